"""Value types shared by every part of pytest-ragev.

This module is imported whenever the plugin loads (every pytest run in a user's
environment), so it must stay free of heavy imports: no pyarrow, numpy or jieba.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pytest_ragev.core.redact import redact

#: The retrieval metrics, in report order.
RETRIEVAL_METRICS: tuple[str, ...] = ("precision", "recall", "ndcg3", "ndcg10", "mrr", "map")
#: The generation metrics, in report order.
GENERATION_METRICS: tuple[str, ...] = ("bleu1", "bleu2", "bleu4", "rouge1", "rouge2", "rougel")
#: All twelve built-in metrics, in report order.
METRIC_NAMES: tuple[str, ...] = RETRIEVAL_METRICS + GENERATION_METRICS
#: The answer-quality metrics a judge scores (``[metrics] judged``), in report order.
JUDGED_METRICS: tuple[str, ...] = ("correctness", "faithfulness", "context_relevance")
#: The semantic similarity of the answer and the reference (``[metrics] similarity``).
SIMILARITY = "similarity"
#: The optional answer-quality metrics, in report order: each is a number in [0, 1],
#: higher is better, and is gated, reported and baselined like the twelve once enabled.
QUALITY_METRICS: tuple[str, ...] = (SIMILARITY, *JUDGED_METRICS)
#: Every metric name pytest-ragev itself defines (custom metrics take other names).
BUILTIN_METRICS: tuple[str, ...] = METRIC_NAMES + QUALITY_METRICS

#: ``task.status`` values of the JSON report (the seed's).
STATUS_PENDING = 0
STATUS_RUNNING = 1
STATUS_SUCCESS = 2
STATUS_FAILED = 3


@dataclass(frozen=True)
class QAPair:
    """One question of a dataset with its ground truth.

    ``pids`` are the relevant passage ids (qrels with ``score > 0``), ascending;
    ``passages`` their texts in the same order; ``grades`` their relevance grades
    (1 when the qrels file has no ``score`` column). ``aid``/``answer`` are ``None``
    for a question that has no reference answer. ``tags`` are the question's tags from
    the optional ``tags`` column of ``queries.parquet`` (each once, in the order
    written; ``lang:<code>`` names its language): the slices it belongs to.
    """

    qid: int
    question: str
    pids: tuple[int, ...]
    passages: tuple[str, ...]
    aid: int | None
    answer: str | None
    grades: tuple[float, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def has_qrels(self) -> bool:
        """Whether retrieval metrics can be computed for this question."""
        return bool(self.pids)

    @property
    def has_answer(self) -> bool:
        """Whether generation metrics can be computed for this question."""
        return self.answer is not None


@dataclass(frozen=True, slots=True)
class MetricInput:
    """What the metric engine scores for one question.

    ``retrieval_gt`` holds ground-truth passage-id sets (the plugin passes one set,
    ``[pids]``); ``retrieval_ids`` the retrieved passage ids, best first.
    """

    retrieval_gt: list[list[int]]
    retrieval_ids: list[int]
    generated_text: str
    generated_gt: str


@dataclass(frozen=True, slots=True)
class MetricCase(MetricInput):
    """What a custom metric's function receives: the :class:`MetricInput` (so a function
    written for it keeps working) plus the question and the pipeline's answer.

    ``case`` is the dataset's question as the pipeline got it; ``retrieved_texts`` the
    texts of the retrieved items, best first and not deduplicated (a chunk's own text;
    for a passage id, that passage's corpus text; ``""`` for an id the corpus lacks);
    ``meta`` the answer's ``Answer.meta`` (latency, token counts, cost, ...); ``variant``
    the configuration (``None`` for the base one).
    """

    case: QAPair
    retrieved_texts: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    variant: str | None = None

    @property
    def question(self) -> str:
        """The question's text."""
        return self.case.question


@runtime_checkable
class ChunkLike(Protocol):
    """Anything with a ``text``; an optional ``passage_id`` short-cuts the text lookup."""

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Chunk:
    """A retrieved chunk: its text, the passage it came from (when known) and its score."""

    text: str
    passage_id: int | None = None
    score: float | None = None


#: One retrieved item: a passage id, a chunk text, or a chunk object.
Retrieved = int | str | ChunkLike


@dataclass(frozen=True)
class Answer:
    """What a pipeline returns for one question.

    ``retrieved`` lists passage ids, chunk texts or chunk objects, best first;
    ``text`` is the generated answer. ``meta`` carries JSON-safe extras (latency,
    token counts, whether a fallback response was used) into the report.
    """

    retrieved: Sequence[Retrieved]
    text: str
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, repr=False)
class PipelineSettings:
    """The resolved ``[pipeline]`` table of a run (with variant overrides applied).

    ``name`` selects the pipeline (``"builtin"``, ``"http"``, ``"module:callable"``);
    ``options`` holds every other key of the table as parsed from TOML (nested
    tables such as ``chat`` stay dicts); ``base_dir`` is the folder of the config
    file, against which relative paths in ``options`` resolve; ``variant`` is the
    variant name (``None`` for the base configuration). Its ``repr`` shows the options
    with secrets redacted.
    """

    name: str = "builtin"
    options: Mapping[str, Any] = field(default_factory=dict)
    base_dir: Path = field(default_factory=Path.cwd)
    variant: str | None = None

    def __repr__(self) -> str:
        # Shown by `pytest -l` in failing tracebacks and by debuggers: never a raw secret.
        # dict.items reads the storage itself: showing the table is not reading its knobs
        # (see core.knobs.KnobOptions).
        options = dict(dict.items(self.options)) if isinstance(self.options, dict) \
            else self.options
        return (
            f"PipelineSettings(name={self.name!r}, options={redact(options)!r}, "
            f"base_dir={self.base_dir!r}, variant={self.variant!r})"
        )


#: The range a custom metric's values must lie in: ``(low, high)``, ``None`` for no bound.
Bounds = tuple[float | None, float | None]


@dataclass(frozen=True)
class MetricValue:
    """What a custom metric may return instead of a bare number: the value with the
    tokens it cost (a metric that asks a model) and why it scored so.

    The tokens are added to the run's judging totals (and to its cost with
    ``[pricing] judge``); the reason is shown beside the value in the reports.
    """

    value: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reason: str | None = None


@dataclass(frozen=True)
class Verdict:
    """One question's value of a judged metric (``[metrics] judged``) or of a custom
    metric, computed while the question was answered.

    ``score`` is ``None`` when the judgement failed: ``error`` says why, and the
    question is counted and listed as an error (never a silent 0). ``replayed`` says the
    verdict was read from the verdict store (no call was made); ``key`` is its key there
    (empty for custom metrics, which are not stored). ``prompt_tokens`` and
    ``completion_tokens`` are what producing it cost (a replayed verdict keeps the
    recorded cost of its call).
    """

    metric: str
    score: float | None
    reason: str = ""
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    replayed: bool = False
    key: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-safe plain data, empty fields left out."""
        data: dict[str, Any] = {"metric": self.metric, "score": self.score}
        if self.reason:
            data["reason"] = self.reason
        if self.error is not None:
            data["error"] = self.error
        if self.prompt_tokens or self.completion_tokens:
            data["prompt_tokens"] = self.prompt_tokens
            data["completion_tokens"] = self.completion_tokens
        if self.replayed:
            data["replayed"] = True
        if self.key:
            data["key"] = self.key
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        """Inverse of :meth:`to_json`."""
        score = data.get("score")
        error = data.get("error")
        return cls(
            metric=str(data["metric"]),
            score=None if score is None else float(score),
            reason=str(data.get("reason", "")),
            error=None if error is None else str(error),
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            replayed=bool(data.get("replayed", False)),
            key=str(data.get("key", "")),
        )


@dataclass(frozen=True)
class CustomMetric:
    """An extra metric returned by the ``pytest_ragev_metrics`` hook.

    ``function`` maps one question to a float (or a :class:`MetricValue`: the float with
    the tokens it cost and a reason). It receives a :class:`MetricCase`: a
    :class:`MetricInput` (a function written for that keeps working) that also carries
    the question, the retrieved texts and the answer's ``meta``. ``direction`` says
    whether larger is better (``"higher"``) or worse (``"lower"``: latency, tokens,
    cost); a ``[thresholds]`` value is then a floor or a ceiling. ``kind`` says which
    questions it applies to: ``"retrieval"`` (those with qrels), ``"generation"`` (those
    with a reference answer) or ``"all"``. ``bounds`` is the range every value must lie
    in, ``(0.0, 1.0)`` by default; ``(0.0, None)`` for an unbounded count or duration.
    """

    name: str
    function: Callable[[MetricCase], float | MetricValue]
    direction: Literal["higher", "lower"] = "higher"
    kind: Literal["retrieval", "generation", "all"] = "all"
    bounds: Bounds = (0.0, 1.0)

    def __post_init__(self) -> None:
        low, high = self.bounds
        if low is not None and high is not None and low > high:
            raise ValueError(
                f"CustomMetric {self.name!r}: bounds {self.bounds!r} are empty; "
                "write (low, high) with low <= high, None for no bound"
            )

    def out_of_bounds(self, value: float) -> bool:
        """Whether ``value`` lies outside :attr:`bounds`."""
        low, high = self.bounds
        return (low is not None and value < low) or (high is not None and value > high)

    @property
    def range_text(self) -> str:
        """``[0, 1]``, ``[0, ∞)``, ``(−∞, ∞)``: the bounds as a reader writes them."""
        low, high = self.bounds
        left = "(−∞" if low is None else f"[{low:g}"
        right = "∞)" if high is None else f"{high:g}]"
        return f"{left}, {right}"
