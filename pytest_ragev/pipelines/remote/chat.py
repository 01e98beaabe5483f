"""The RAG generator's chat model, configured by ``[pipeline.chat]``: the prompt and the
question's contexts rendered into messages, sent through the shared Chat Completions
client (:class:`pytest_ragev.clients.ChatCompletions`).

Standard library only. The API key is read from the environment variable named by
``api_key_env`` on every call and never stored: it cannot reach a repr, a snapshot,
a log line or an exception message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragev.clients import (
    DEFAULT_LIMIT,
    ENDPOINT_KEYS,
    TRANSPORT_KEYS,
    Breaker,
    ChatCompletions,
    Completion,
    EndpointConfig,
    RetryPolicy,
    snapshot_headers,
)
from pytest_ragev.core.tables import Table, check_placeholders, fill

__all__ = [
    "CHAT_KEYS",
    "DEFAULT_CONTEXT_TEMPLATE",
    "DEFAULT_PROMPT",
    "ChatClient",
    "ChatConfig",
    "ChatResult",
    "render_contexts",
]

DEFAULT_PROMPT = (
    "You are a helpful assistant. Answer the question using only the provided context. "
    "If the context does not contain the answer, say that you do not know."
)
DEFAULT_CONTEXT_TEMPLATE = "Context:\n{contexts}\n\nQuestion: {query}"

#: The table's label in every message.
LABEL = "[pipeline.chat]"
CHAT_KEYS = (
    *ENDPOINT_KEYS, "temperature", "top_p", "max_tokens", "seed", "prompt", "context_template",
)
#: One completion of the RAG generator (the shared client's result).
ChatResult = Completion


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
        opts = Table(table, where=LABEL, source=source)
        opts.check_keys(CHAT_KEYS)
        endpoint = EndpointConfig.from_table(opts)
        template = opts.string("context_template", DEFAULT_CONTEXT_TEMPLATE)
        assert template is not None
        check_placeholders(opts, "context_template", template, allowed=("contexts", "query"),
                           required=("contexts", "query"))
        prompt = opts.string("prompt", DEFAULT_PROMPT)
        assert prompt is not None
        temperature = opts.number("temperature", 0.0, low=0.0, high=2.0, example="0.2")
        top_p = opts.number("top_p", None, low=0.0, high=1.0, low_open=True, example="0.9")
        seed = table.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise opts.fail("seed", seed, "use a whole number, e.g. seed = 42")
        return cls(
            base_url=endpoint.base_url,
            model=endpoint.model,
            api_key_env=endpoint.api_key_env,
            temperature=temperature,
            top_p=top_p,
            max_tokens=opts.integer("max_tokens", None, low=1, example="512"),
            seed=seed,
            prompt=prompt,
            context_template=template,
            timeout=endpoint.timeout,
            max_retries=endpoint.max_retries,
            retry_backoff=endpoint.retry_backoff,
            max_consecutive_failures=endpoint.max_consecutive_failures,
            extra_headers=endpoint.extra_headers,
        )

    def endpoint_config(self) -> EndpointConfig:
        """The transport knobs, as the shared client reads them."""
        return EndpointConfig(
            label=LABEL, base_url=self.base_url, model=self.model, api_key_env=self.api_key_env,
            timeout=self.timeout, max_retries=self.max_retries, retry_backoff=self.retry_backoff,
            max_consecutive_failures=self.max_consecutive_failures,
            extra_headers=self.extra_headers,
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
            "extra_headers": snapshot_headers(self.extra_headers),
        }

    def answer_knobs(self) -> dict[str, Any]:
        """The part of :meth:`snapshot` that can change what the model answers."""
        return {k: v for k, v in self.snapshot().items() if k not in TRANSPORT_KEYS}

    def retry_policy(self) -> RetryPolicy:
        """Timeout and retry settings of every request."""
        return self.endpoint_config().retry_policy()


def render_contexts(contexts: Sequence[str]) -> str:
    """Number the contexts ``[1] ...`` so the model (and a reader) can tell them apart."""
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(contexts, start=1))


class ChatClient:
    """Sends one question with its contexts to ``{base_url}/chat/completions``.

    Holds no mutable state but the shared client's breaker: :meth:`complete` may be
    called from many threads at once.
    """

    def __init__(self, config: ChatConfig) -> None:
        self.config = config
        self._chat = ChatCompletions(config.endpoint_config())

    def __repr__(self) -> str:
        return f"ChatClient(model={self.config.model!r}, endpoint={self.config.endpoint!r})"

    @property
    def breaker(self) -> Breaker:
        """The circuit breaker of this client's requests."""
        return self._chat.breaker

    def messages(self, query: str, contexts: Sequence[str]) -> list[dict[str, str]]:
        """The ``messages`` array for a question (system prompt, rendered template)."""
        user = fill(self.config.context_template,
                    {"contexts": render_contexts(contexts), "query": query})
        messages = [{"role": "system", "content": self.config.prompt}] if self.config.prompt else []
        messages.append({"role": "user", "content": user})
        return messages

    def _knobs(self) -> dict[str, Any]:
        cfg = self.config
        return {"temperature": cfg.temperature, "top_p": cfg.top_p,
                "max_tokens": cfg.max_tokens, "seed": cfg.seed}

    def payload(self, query: str, contexts: Sequence[str]) -> dict[str, Any]:
        """The JSON request body; unset sampling knobs are left out (server defaults)."""
        return self._chat.payload(self.messages(query, contexts), **self._knobs())

    def missing_environment(self) -> list[str]:
        """One line per environment variable a request needs and the environment lacks."""
        return self._chat.missing_environment()

    def preflight(self) -> str | None:
        """One look at the server before any question (``GET {base_url}/models``):
        ``None`` when it is there and takes the key, else why the run cannot go on."""
        return self._chat.preflight()

    def complete(self, query: str, contexts: Sequence[str]) -> ChatResult:
        """Ask the model; :class:`PipelineError` on HTTP errors, timeouts, malformed replies."""
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        return self._chat.complete(self.messages(query, contexts), **self._knobs())
