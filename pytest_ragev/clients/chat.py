"""Chat Completions (``POST {base_url}/chat/completions``), the OpenAI-compatible call every
server we know speaks: OpenAI, vLLM, llama.cpp's server, Ollama's ``/v1``, LiteLLM.

:class:`ChatCompletions` sends a list of messages and returns the reply's text, usage,
latency and attempts. The built-in pipeline's generator (``[pipeline.chat]``, which
renders the RAG prompt itself) and an LLM judge (``[judge]``, JSON mode) both call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragev.clients.endpoint import EndpointClient, reply_keys
from pytest_ragev.core.errors import PipelineError

#: The path of the call under ``base_url``.
CHAT_PATH = "chat/completions"


@dataclass(frozen=True)
class Completion:
    """One completion: the text, the server's ``usage`` counts, wall time and attempts."""

    text: str
    usage: Mapping[str, Any]
    latency_s: float
    attempts: int


class ChatCompletions(EndpointClient):
    """An :class:`EndpointClient` that asks a chat model. Thread-safe."""

    @property
    def endpoint(self) -> str:
        """The URL completions are asked at."""
        return self.config.url(CHAT_PATH)

    def payload(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        response_format: Mapping[str, Any] | None = None,
        seed: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
    ) -> dict[str, Any]:
        """The JSON request body; knobs left ``None`` are left out (the server's defaults)."""
        body: dict[str, Any] = {"model": self.config.model,
                                "messages": [dict(message) for message in messages]}
        for name, value in (("temperature", temperature), ("top_p", top_p),
                            ("max_tokens", max_tokens), ("seed", seed)):
            if value is not None:
                body[name] = value
        if response_format is not None:
            body["response_format"] = dict(response_format)
        return body

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        response_format: Mapping[str, Any] | None = None,
        seed: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
    ) -> Completion:
        """Ask the model; :class:`PipelineError` (one line, naming the table, secrets
        scrubbed) on HTTP errors, timeouts, an open breaker and malformed replies.

        ``response_format`` is sent as it is (``{"type": "json_object"}`` asks for JSON
        mode); the reply's text is returned unparsed.
        """
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        response = self.post(CHAT_PATH, self.payload(
            messages, response_format=response_format, seed=seed, temperature=temperature,
            max_tokens=max_tokens, top_p=top_p))
        text = completion_text(response.body)
        if text is None:
            raise PipelineError(
                f"{self.what}: {self.endpoint} answered without choices[0].message.content "
                f"(top-level keys: {reply_keys(response.body)}); check that base_url points "
                "at an OpenAI-compatible /v1 API"
            )
        usage = response.body.get("usage")
        return Completion(
            text=text,
            usage=dict(usage) if isinstance(usage, Mapping) else {},
            latency_s=response.latency_s,
            attempts=response.attempts,
        )


def completion_text(body: Any) -> str | None:
    """``choices[0].message.content`` of a reply, or ``None`` when it is not a string there."""
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
