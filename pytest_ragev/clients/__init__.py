"""Clients of HTTP services: the one set of rules every call to a model's API follows.

- :mod:`.endpoint`: :class:`EndpointConfig`, the knobs every service table shares
  (``base_url``, ``model``, ``api_key_env``, ``timeout``, ``max_retries``,
  ``retry_backoff``, ``max_consecutive_failures``, ``extra_headers``) read from a
  :class:`~pytest_ragev.core.tables.Table` with the table's label in every message, and
  :class:`EndpointClient`, which sends JSON by those rules (preflight, retries with
  backoff and ``Retry-After``, a circuit breaker, secrets scrubbed).
- :mod:`.chat`: :class:`ChatCompletions`, the OpenAI-compatible chat call.
- :mod:`.embeddings`: :class:`EmbeddingClient` (``[pipeline.embedding]``), the OpenAI
  ``/v1/embeddings`` call, in concurrent batches.
- :mod:`.rerank`: :class:`RerankClient` (``[pipeline.rerank]``), the ``/rerank`` call of
  Cohere, Jina, vLLM and text-embeddings-inference.

The request machinery is private (``_retry``: requests, retries, same-origin redirects,
a deadline per attempt; ``_breaker``: stop after consecutive failures; ``_env``:
``${VAR}`` headers); what other packages need of it is named here. Standard library
only; nothing here is imported when the plugin merely loads.
"""

from __future__ import annotations

from pytest_ragev.clients._breaker import DEFAULT_LIMIT, Breaker
from pytest_ragev.clients._env import expand_headers, snapshot_headers, unset_references
from pytest_ragev.clients._retry import (
    AUTH_STATUSES,
    RedirectRefused,
    Response,
    RetryPolicy,
    parse_retry_after,
    scrub,
    send,
)
from pytest_ragev.clients.chat import CHAT_PATH, ChatCompletions, Completion, completion_text
from pytest_ragev.clients.embeddings import (
    EMBEDDING_KEYS,
    EmbeddingClient,
    EmbeddingConfig,
)
from pytest_ragev.clients.endpoint import (
    ENDPOINT_KEYS,
    PREFLIGHT_TIMEOUT_S,
    TRANSPORT_KEYS,
    EndpointClient,
    EndpointConfig,
    reply_keys,
)
from pytest_ragev.clients.rerank import RERANK_APIS, RERANK_KEYS, RerankClient, RerankConfig

__all__ = [
    "AUTH_STATUSES",
    "CHAT_PATH",
    "DEFAULT_LIMIT",
    "EMBEDDING_KEYS",
    "ENDPOINT_KEYS",
    "PREFLIGHT_TIMEOUT_S",
    "RERANK_APIS",
    "RERANK_KEYS",
    "TRANSPORT_KEYS",
    "Breaker",
    "ChatCompletions",
    "Completion",
    "EmbeddingClient",
    "EmbeddingConfig",
    "EndpointClient",
    "EndpointConfig",
    "RedirectRefused",
    "RerankClient",
    "RerankConfig",
    "Response",
    "RetryPolicy",
    "completion_text",
    "expand_headers",
    "parse_retry_after",
    "reply_keys",
    "scrub",
    "send",
    "snapshot_headers",
    "unset_references",
]
