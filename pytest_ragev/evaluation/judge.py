"""The judge: an OpenAI-compatible chat model that scores answers (``[judge]``).

One :class:`Judge` serves a run: it asks the model for each judged metric of a
question (``[metrics] judged``) with the metric's versioned prompt
(:mod:`~pytest_ragev.evaluation.prompts`), at temperature 0 with a seed, in JSON mode,
and parses the reply ``{"score": <number in [0, 1]>, "reason": "<text>"}``. Every
verdict is looked up in the verdict store first (:mod:`~pytest_ragev.evaluation.verdicts`):
a question whose texts did not change is not judged again.

What can go wrong, and what it costs:

* the service does not answer (no connection, timeouts, 5xx or 429 after every retry,
  or the circuit breaker open after too many of those in a row): that question's
  metric is an error (:attr:`~pytest_ragev.core.types.Verdict.error`), counted and
  listed like a pipeline's, never a silent 0;
* the reply is not the JSON object asked for: asked once more, then the same;
* anything else (the key refused, a request the server rejects, a bug): the judge
  cannot judge any question, so :class:`JudgeFailed` stops the run at once with one
  line (exit status 4).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragev.clients import ENDPOINT_KEYS, ChatCompletions, EndpointConfig
from pytest_ragev.core.errors import ConfigError, PipelineError, RagevError
from pytest_ragev.core.tables import Table
from pytest_ragev.core.types import Verdict
from pytest_ragev.evaluation.prompts import PROMPTS, REPAIR, Prompt
from pytest_ragev.evaluation.verdicts import StoredVerdict, VerdictStore, verdict_key

#: The keys of ``[judge]``: the shared service knobs and the judge's own.
JUDGE_KEYS = (*ENDPOINT_KEYS, "seed", "max_tokens", "json_mode", "store")
#: The seed sent with every request (servers that take one answer alike every time).
DEFAULT_SEED = 20261206
#: Room for a score and a sentence or two of reason.
DEFAULT_MAX_TOKENS = 400
#: Characters of a malformed reply an error shows.
_SHOWN_REPLY = 120


class JudgeFailed(RagevError):
    """The judge cannot judge: stops the run (one line naming the metric and the cause)."""


@dataclass(frozen=True)
class JudgeConfig:
    """The resolved ``[judge]`` table (holds no secret value).

    ``store`` is the verdict store's file (``[judge] store``, relative to the config
    file), ``None`` for the default (the pytest cache folder, or no store without one).
    """

    endpoint: EndpointConfig
    seed: int | None = DEFAULT_SEED
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    json_mode: bool = True
    store: Path | None = None

    @classmethod
    def from_table(cls, table: Mapping[str, Any], *, source: Path | str,
                   base_dir: Path) -> JudgeConfig:
        """Validate a ``[judge]`` table; one-line :class:`ConfigError` naming the key."""
        opts = Table(table, where="[judge]", source=source)
        opts.check_keys(JUDGE_KEYS)
        endpoint = EndpointConfig.from_table(opts, model_example="qwen2.5-72b-instruct")
        seed = table.get("seed", DEFAULT_SEED)
        if seed is not False and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise opts.fail("seed", seed, "use a whole number, e.g. seed = 42, or seed = false "
                            "for a server that refuses one")
        max_tokens = opts.integer("max_tokens", DEFAULT_MAX_TOKENS, low=16, example="400")
        json_mode = opts.boolean("json_mode", True)
        store = opts.string("store", fix='write a file path, e.g. store = "ragev-verdicts.jsonl"')
        if store == "":
            raise opts.fail("store", store, 'write a file path, e.g. store = '
                            '"ragev-verdicts.jsonl", or remove the key for the cache folder')
        return cls(endpoint=endpoint, seed=None if seed is False else int(seed),
                   max_tokens=max_tokens, json_mode=bool(json_mode),
                   store=None if store is None else base_dir / store)

    def identity(self) -> dict[str, Any]:
        """What a verdict depends on of the judge: the model, its endpoint and the knobs
        that change its answers (never a key or a transport setting)."""
        return {**self.endpoint.identity(), "seed": self.seed, "max_tokens": self.max_tokens,
                "json_mode": self.json_mode, "temperature": 0}

    @property
    def label(self) -> str:
        """``qwen2.5-72b-instruct @ http://127.0.0.1:8000/v1``: how reports name the judge."""
        return f"{self.endpoint.model} @ {self.endpoint.base_url}"

    def snapshot(self) -> dict[str, Any]:
        """The settings as reports record them (no secret)."""
        return {**self.endpoint.snapshot(), "seed": self.seed, "max_tokens": self.max_tokens,
                "json_mode": self.json_mode}


@dataclass(frozen=True)
class JudgedTexts:
    """What a judge is shown of one question."""

    question: str
    answer: str
    reference: str
    passages: tuple[str, ...]


#: The texts each metric's prompt shows (and so its verdict depends on).
_SHOWN: dict[str, tuple[str, ...]] = {
    "correctness": ("question", "answer", "reference"),
    "faithfulness": ("answer", "passages"),
    "context_relevance": ("question", "passages"),
}


def shown_texts(metric: str, texts: JudgedTexts) -> dict[str, Any]:
    """The texts ``metric``'s prompt shows, by name (what its verdict's key digests)."""
    return {name: list(getattr(texts, name)) if name == "passages" else getattr(texts, name)
            for name in _SHOWN[metric]}


def applies(metric: str, texts: JudgedTexts, *, has_reference: bool) -> bool:
    """Whether ``metric`` can judge this question: correctness needs a reference answer,
    faithfulness an answer, context_relevance retrieved passages or not (none scores 0)."""
    if metric == "correctness":
        return has_reference
    return True


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_reply(text: str) -> tuple[float, str] | None:
    """``(score, reason)`` of a reply that is the JSON object asked for (a fence around
    it is fine), else ``None``."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        data = json.loads(body)
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            data = json.loads(body[start:end + 1])
        except ValueError:
            return None
    if not isinstance(data, Mapping):
        return None
    score = data.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        return None
    score = float(score)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        return None
    reason = data.get("reason", "")
    return score, " ".join(str(reason).split()) if reason is not None else ""


def _tokens(usage: Mapping[str, Any], name: str) -> int:
    value = usage.get(name)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


class Judge:
    """Judges questions by one ``[judge]`` configuration; thread-safe.

    ``store`` holds the verdicts of earlier runs (``None``: none is kept, every verdict
    is asked for); ``rejudge`` (``--ragev-rejudge``) asks for every verdict anew and
    keeps the new ones. ``calls`` counts the requests sent.
    """

    def __init__(self, config: JudgeConfig, *, store: VerdictStore | None = None,
                 rejudge: bool = False) -> None:
        self.config = config
        self.store = store
        self.rejudge = rejudge
        self.client = ChatCompletions(config.endpoint)
        self._identity = config.identity()

    def __repr__(self) -> str:
        return f"Judge({self.config.label!r})"

    def missing_environment(self) -> list[str]:
        """One line per environment variable a request needs and the environment lacks."""
        return self.client.missing_environment()

    def preflight(self) -> str | None:
        """One look at the service before any question; ``None`` when it answers."""
        return self.client.preflight()

    def key(self, metric: str, texts: JudgedTexts) -> str:
        """The store key of ``metric``'s verdict on ``texts``."""
        return verdict_key(judge=self._identity, prompt=PROMPTS[metric].version,
                           texts=shown_texts(metric, texts))

    def verdict(self, metric: str, texts: JudgedTexts) -> Verdict:
        """``metric``'s verdict on ``texts``: replayed from the store when it holds one
        (and ``rejudge`` is off), else asked for. Raises :class:`JudgeFailed` when the
        judge cannot judge at all."""
        key = self.key(metric, texts)
        if self.store is not None and not self.rejudge:
            stored = self.store.get(key)
            if stored is not None:
                return Verdict(metric=metric, score=stored.score, reason=stored.reason,
                               prompt_tokens=stored.prompt_tokens,
                               completion_tokens=stored.completion_tokens, replayed=True,
                               key=key)
        prompt = PROMPTS[metric]
        try:
            score, reason, prompt_tokens, completion_tokens = self._ask(prompt, texts)
        except _ReplyError as error:
            return Verdict(metric=metric, score=None, error=f"JudgeReplyError: {error}", key=key)
        except PipelineError as error:
            if error.transport or self.client.breaker.is_open:
                return Verdict(metric=metric, score=None, error=f"JudgeError: {error}",
                               key=key)
            raise JudgeFailed(f"judged metric {metric!r}: {error}") from None
        verdict = Verdict(metric=metric, score=score, reason=reason,
                          prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          key=key)
        if self.store is not None:
            self.store.add(self.stored(verdict, texts))
        return verdict

    def stored(self, verdict: Verdict, texts: JudgedTexts | str) -> StoredVerdict:
        """``verdict`` as a store line (``texts``, or the question alone, names it)."""
        question = texts if isinstance(texts, str) else texts.question
        assert verdict.score is not None
        return StoredVerdict(
            key=verdict.key, metric=verdict.metric, score=verdict.score, reason=verdict.reason,
            judge=self.config.label, prompt=PROMPTS[verdict.metric].version,
            prompt_tokens=verdict.prompt_tokens, completion_tokens=verdict.completion_tokens,
            question=question,
        )

    def _ask(self, prompt: Prompt, texts: JudgedTexts) -> tuple[float, str, int, int]:
        """Ask once, and once more after a reply that is not the JSON asked for."""
        cfg = self.config
        messages: list[dict[str, str]] = prompt.messages(
            question=texts.question, answer=texts.answer, reference=texts.reference,
            passages=texts.passages)
        spent = [0, 0]
        reply = ""
        for attempt in range(2):
            completion = self.client.complete(
                messages, response_format={"type": "json_object"} if cfg.json_mode else None,
                seed=cfg.seed, temperature=0.0, max_tokens=cfg.max_tokens)
            spent[0] += _tokens(completion.usage, "prompt_tokens")
            spent[1] += _tokens(completion.usage, "completion_tokens")
            reply = completion.text
            parsed = parse_reply(reply)
            if parsed is not None:
                return parsed[0], parsed[1], spent[0], spent[1]
            if attempt == 0:
                messages = [*messages, {"role": "assistant", "content": reply},
                            {"role": "user", "content": REPAIR}]
        shown = " ".join(reply.split())
        shown = shown if len(shown) <= _SHOWN_REPLY else shown[:_SHOWN_REPLY - 1] + "…"
        raise _ReplyError(f"{self.client.what}: the reply is not "
                          f'{{"score": <0..1>, "reason": "..."}} JSON, twice (last: {shown!r})')


class _ReplyError(Exception):
    """A reply that is not the JSON object asked for, after the second try."""


def passages_of(retrieved: Sequence[int | str], corpus: Mapping[int, str]) -> tuple[str, ...]:
    """The texts of retrieved items as a judge is shown them: a text as it is, a passage
    id as its corpus text (an id the corpus lacks as an empty passage)."""
    return tuple(item if isinstance(item, str) else corpus.get(item, "") for item in retrieved)


def check_judged(judged: Sequence[str], table: Mapping[str, Any], *, source: Path | str,
                 base_dir: Path) -> JudgeConfig | None:
    """The judge of a run, or ``None`` when no metric is judged; one-line
    :class:`ConfigError` for a bad ``[judge]`` table."""
    if not judged:
        if table:
            raise ConfigError(f"{source}: [judge] is set but [metrics] judged names no metric; "
                              'add judged = ["correctness"] (or others) under [metrics], or '
                              "remove [judge]")
        return None
    return JudgeConfig.from_table(table, source=source, base_dir=base_dir)
