"""An OpenAI-compatible Chat Completions client, configured by ``[pipeline.chat]``.

Standard library only. The API key is read from the environment variable named by
``api_key_env`` on every call and never stored: it cannot reach a repr, a snapshot,
a log line or an exception message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragev.core.errors import PipelineError
from pytest_ragev.core.redact import Secret, redact_urls, url_secrets
from pytest_ragev.core.tables import Table, check_placeholders, fill
from pytest_ragev.pipelines.remote import _env, _retry
from pytest_ragev.pipelines.remote._breaker import DEFAULT_LIMIT, Breaker

DEFAULT_PROMPT = (
    "You are a helpful assistant. Answer the question using only the provided context. "
    "If the context does not contain the answer, say that you do not know."
)
DEFAULT_CONTEXT_TEMPLATE = "Context:\n{contexts}\n\nQuestion: {query}"

CHAT_KEYS = (
    "base_url", "model", "api_key_env", "temperature", "top_p", "max_tokens", "seed",
    "prompt", "context_template", "timeout", "max_retries", "retry_backoff", "extra_headers",
    "max_consecutive_failures",
)
# Knobs that change how a request travels, not what the model answers: kept out of
# answer_key() so raising a timeout does not throw the answer cache away.
_TRANSPORT_KEYS = frozenset({"api_key_env", "timeout", "max_retries", "retry_backoff",
                             "extra_headers", "max_consecutive_failures"})
#: The preflight's own patience: one quick look, not a question's retry budget.
PREFLIGHT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ChatConfig:
    """The resolved ``[pipeline.chat]`` table (defaults filled in). Holds no secret values."""

    base_url: str
    model: str
    api_key_env: str | None = None
    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    prompt: str = DEFAULT_PROMPT
    context_template: str = DEFAULT_CONTEXT_TEMPLATE
    timeout: float = 60.0
    max_retries: int = 3
    retry_backoff: float = 0.5
    max_consecutive_failures: int = DEFAULT_LIMIT
    # Literal header values may be credentials: keep them out of repr().
    extra_headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], *, source: Path | str) -> ChatConfig:
        """Validate a ``[pipeline.chat]`` table; one-line :class:`ConfigError` on a bad key."""
        opts = Table(table, where="[pipeline.chat]", source=source)
        opts.check_keys(CHAT_KEYS)
        base_url = opts.string("base_url", required=True)
        assert base_url is not None
        if not base_url.startswith(("http://", "https://")):
            raise opts.fail("base_url", redact_urls(base_url),
                            "write the API root, e.g. base_url = \"http://127.0.0.1:8000/v1\"")
        if url_secrets(base_url):
            # The config would record the password, and urllib cannot send it anyway.
            raise opts.fail("base_url", redact_urls(base_url),
                            "keep credentials out of the URL: name the variable holding the "
                            "key in api_key_env, or send a header from ${VAR} in extra_headers")
        model = opts.string("model", required=True)
        if not model:
            raise opts.fail("model", model, "name the model, e.g. model = \"qwen2.5-7b-instruct\"")
        key_env = opts.string("api_key_env")
        if key_env is not None and (not key_env or "=" in key_env or key_env.startswith("$")):
            raise opts.fail("api_key_env", key_env, "give the NAME of the environment variable "
                            "holding the key, e.g. api_key_env = \"OPENAI_API_KEY\"")
        template = opts.string("context_template", DEFAULT_CONTEXT_TEMPLATE)
        assert template is not None
        check_placeholders(opts, "context_template", template, allowed=("contexts", "query"),
                           required=("contexts", "query"))
        prompt = opts.string("prompt", DEFAULT_PROMPT)
        assert prompt is not None
        temperature = opts.number("temperature", 0.0, low=0.0, high=2.0, example="0.2")
        top_p = opts.number("top_p", None, low=0.0, high=1.0, low_open=True, example="0.9")
        timeout = opts.number("timeout", 60.0, low=0.0, low_open=True, example="60")
        backoff = opts.number("retry_backoff", 0.5, low=0.0, example="0.5")
        retries = opts.integer("max_retries", 3, low=0, example="3")
        seed = table.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise opts.fail("seed", seed, "use a whole number, e.g. seed = 42")
        stop_after = opts.integer("max_consecutive_failures", DEFAULT_LIMIT, low=0, example="5")
        assert timeout is not None and backoff is not None and retries is not None
        assert stop_after is not None
        return cls(
            base_url=base_url.rstrip("/"),
            model=model,
            api_key_env=key_env,
            temperature=temperature,
            top_p=top_p,
            max_tokens=opts.integer("max_tokens", None, low=1, example="512"),
            seed=seed,
            prompt=prompt,
            context_template=template,
            timeout=timeout,
            max_retries=retries,
            retry_backoff=backoff,
            max_consecutive_failures=stop_after,
            extra_headers=opts.string_table("extra_headers"),
        )

    @property
    def endpoint(self) -> str:
        """The URL requests go to."""
        return f"{self.base_url}/chat/completions"

    def snapshot(self) -> dict[str, Any]:
        """Every knob, JSON-safe: the key's variable NAME, literal credentials as ``***``."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "prompt": self.prompt,
            "context_template": self.context_template,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "retry_backoff": self.retry_backoff,
            "max_consecutive_failures": self.max_consecutive_failures,
            "extra_headers": _env.snapshot_headers(self.extra_headers),
        }

    def answer_knobs(self) -> dict[str, Any]:
        """The part of :meth:`snapshot` that can change what the model answers."""
        return {k: v for k, v in self.snapshot().items() if k not in _TRANSPORT_KEYS}

    def retry_policy(self) -> _retry.RetryPolicy:
        """Timeout and retry settings for :func:`_retry.send`."""
        return _retry.RetryPolicy(timeout=self.timeout, max_retries=self.max_retries,
                                  backoff=self.retry_backoff)


@dataclass(frozen=True)
class ChatResult:
    """One completion: the text, the server's ``usage`` counts, wall time and attempts."""

    text: str
    usage: Mapping[str, Any]
    latency_s: float
    attempts: int


def render_contexts(contexts: Sequence[str]) -> str:
    """Number the contexts ``[1] ...`` so the model (and a reader) can tell them apart."""
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(contexts, start=1))


class ChatClient:
    """Sends one question with its contexts to ``{base_url}/chat/completions``.

    Holds no mutable state: :meth:`complete` may be called from many threads at once.
    """

    def __init__(self, config: ChatConfig) -> None:
        self.config = config
        self.breaker = Breaker(config.max_consecutive_failures,
                               knob="[pipeline.chat] max_consecutive_failures")

    def __repr__(self) -> str:
        return f"ChatClient(model={self.config.model!r}, endpoint={self.config.endpoint!r})"

    def messages(self, query: str, contexts: Sequence[str]) -> list[dict[str, str]]:
        """The ``messages`` array for a question (system prompt, rendered template)."""
        user = fill(self.config.context_template,
                    {"contexts": render_contexts(contexts), "query": query})
        messages = [{"role": "system", "content": self.config.prompt}] if self.config.prompt else []
        messages.append({"role": "user", "content": user})
        return messages

    def payload(self, query: str, contexts: Sequence[str]) -> dict[str, Any]:
        """The JSON request body; unset sampling knobs are left out (server defaults)."""
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model, "messages": self.messages(query, contexts)}
        for name, value in (("temperature", cfg.temperature), ("top_p", cfg.top_p),
                            ("max_tokens", cfg.max_tokens), ("seed", cfg.seed)):
            if value is not None:
                body[name] = value
        return body

    def missing_environment(self) -> list[str]:
        """One line per environment variable a request needs and the environment lacks."""
        cfg = self.config
        lines = []
        if cfg.api_key_env is not None and not os.environ.get(cfg.api_key_env):
            lines.append(_unset_key_line(cfg.api_key_env))
        lines += [f"[pipeline.chat] extra_headers refer to ${{{var}}}, which is not set; "
                  f"export {var}=... before running pytest"
                  for var in _env.unset_references(cfg.extra_headers)]
        return lines

    def preflight(self) -> str | None:
        """One look at the server before any question: ``None`` when it is there and takes
        the key, else why the run cannot go on (one line).

        It asks ``GET {base_url}/models`` (every OpenAI-compatible server we know has it;
        it costs no tokens) with one retry and at most :data:`PREFLIGHT_TIMEOUT_S`. No
        connection, no answer in time, 401/403, or a redirect to another origin (not
        followed: every question would meet it) stop the run; any other answer, a 404 of
        a server without the route included, shows a server that is listening.
        """
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        cfg = self.config
        policy = _retry.RetryPolicy(timeout=min(cfg.timeout, PREFLIGHT_TIMEOUT_S),
                                    max_retries=min(cfg.max_retries, 1), backoff=cfg.retry_backoff)
        try:
            headers, secrets = self._headers()
            _retry.send(method="GET", url=f"{cfg.base_url}/models", headers=headers,
                        payload=None, policy=policy,
                        what=f"[pipeline.chat] model {cfg.model!r}: preflight",
                        client_error_hint=self._hint, secrets=secrets)
        except _retry.RedirectRefused as error:
            return str(error)  # the server moved elsewhere: no question would get an answer
        except PipelineError as error:
            if (error.transport and error.status is None) or error.status in _retry.AUTH_STATUSES:
                return str(error)  # nobody answered, or the key was refused
        return None

    def _headers(self) -> tuple[dict[str, str], list[str]]:
        """The request headers (the key expanded from the environment) and the secrets."""
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        cfg = self.config
        headers, secrets = _env.expand_headers(cfg.extra_headers, where="[pipeline.chat]")
        if cfg.api_key_env is not None:
            key = Secret(os.environ.get(cfg.api_key_env) or "")
            if not key:
                raise PipelineError(_unset_key_line(cfg.api_key_env))
            headers["Authorization"] = Secret(f"Bearer {key}")
            secrets.append(key)
        return headers, secrets

    def complete(self, query: str, contexts: Sequence[str]) -> ChatResult:
        """Ask the model; :class:`PipelineError` on HTTP errors, timeouts, malformed replies."""
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        cfg = self.config
        headers, secrets = self._headers()
        response = _retry.send(
            method="POST",
            url=cfg.endpoint,
            headers=headers,
            payload=self.payload(query, contexts),
            policy=cfg.retry_policy(),
            what=f"[pipeline.chat] model {cfg.model!r}",
            client_error_hint=self._hint,
            secrets=secrets,
            breaker=self.breaker,
        )
        text = _completion_text(response.body)
        if text is None:
            raise PipelineError(
                f"[pipeline.chat] model {cfg.model!r}: {cfg.endpoint} answered without "
                f"choices[0].message.content (top-level keys: {_keys(response.body)}); check "
                "that base_url points at an OpenAI-compatible /v1 API"
            )
        usage = response.body.get("usage")
        return ChatResult(
            text=text,
            usage=dict(usage) if isinstance(usage, Mapping) else {},
            latency_s=response.latency_s,
            attempts=response.attempts,
        )

    def _hint(self, status: int, message: str) -> str:
        if status in (401, 403):
            if self.config.api_key_env is None:
                return "the server wants a key: set api_key_env to the variable holding it"
            return f"check the key in ${self.config.api_key_env}"
        if status == 404:
            return (f"check base_url ({self.config.base_url}) and model "
                    f"({self.config.model!r})")
        return "check the [pipeline.chat] settings against the server's API"


def _unset_key_line(var: str) -> str:
    return (f"[pipeline.chat] api_key_env = {var!r}: the environment variable {var} is not "
            f"set; export {var}=... or remove api_key_env for a server without authentication")


def _completion_text(body: Any) -> str | None:
    if not isinstance(body, Mapping):
        return None
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        return None
    content = message.get("content")
    return content if isinstance(content, str) else None


def _keys(body: Any) -> str:
    if isinstance(body, Mapping):
        return ", ".join(sorted(map(str, body))) or "none"
    return f"none, the body is a JSON {type(body).__name__}"
