"""Rerank (``POST {base_url}/rerank``): a question and documents in, a score per document
out, configured by ``[pipeline.rerank]``.

Two request and reply shapes, chosen with ``api``:

- ``"cohere"`` (default; also Jina's and vLLM's): ``{"model", "query", "documents"}`` ->
  ``{"results": [{"index": i, "relevance_score": s}, ...]}``;
- ``"tei"`` (text-embeddings-inference): ``{"query", "texts", "raw_scores": false}`` ->
  ``[{"index": i, "score": s}, ...]``.

Every document must come back with one finite score; a reply that is not in the shape
asked for is one line naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragev.clients.endpoint import (
    ENDPOINT_KEYS,
    TRANSPORT_KEYS,
    EndpointClient,
    EndpointConfig,
    reply_keys,
)
from pytest_ragev.core.errors import PipelineError
from pytest_ragev.core.tables import Table

RERANK_PATH = "rerank"
RERANK_APIS = ("cohere", "tei")
RERANK_KEYS = (*ENDPOINT_KEYS, "api")
#: The reply each API gives, for messages that say what was expected.
_SHAPES = {
    "cohere": "{\"results\": [{\"index\": 0, \"relevance_score\": 0.9}, ...]} (Cohere, Jina, vLLM)",
    "tei": "[{\"index\": 0, \"score\": 0.9}, ...] (text-embeddings-inference)",
}


@dataclass(frozen=True)
class RerankConfig:
    """A resolved ``[pipeline.rerank]`` table. Holds no secret value."""

    endpoint: EndpointConfig
    api: str = "cohere"

    @classmethod
    def from_table(cls, table: Mapping[str, Any], *, source: object,
                   where: str = "[pipeline.rerank]") -> RerankConfig:
        """Validate the table; one-line :class:`~pytest_ragev.core.errors.ConfigError`."""
        opts = Table(table, where=where, source=str(source))
        opts.check_keys(RERANK_KEYS)
        endpoint = EndpointConfig.from_table(opts, model_example="bge-reranker-v2-m3",
                                             base_url_example="http://127.0.0.1:8081/v1")
        api = opts.choice("api", "cohere", RERANK_APIS, what="rerank API")
        return cls(endpoint=endpoint, api=api)

    def snapshot(self) -> dict[str, Any]:
        """Every knob, JSON-safe, without secrets."""
        return {**self.endpoint.snapshot(), "api": self.api}

    def identity(self) -> dict[str, Any]:
        """What names the scores: endpoint and model (no transport knob, no secret)."""
        return self.endpoint.identity()

    def answer_knobs(self) -> dict[str, Any]:
        """The knobs that can change a score."""
        return {k: v for k, v in self.snapshot().items() if k not in TRANSPORT_KEYS}


class RerankClient(EndpointClient):
    """Asks a reranker to score documents against a question. Thread-safe."""

    def __init__(self, config: RerankConfig) -> None:
        super().__init__(config.endpoint)
        self.rerank_config = config

    @property
    def endpoint(self) -> str:
        """The URL scores are asked at."""
        return self.config.url(RERANK_PATH)

    def payload(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        """The JSON request body in the configured API's shape."""
        if self.rerank_config.api == "tei":
            return {"query": query, "texts": list(documents), "raw_scores": False}
        return {"model": self.config.model, "query": query, "documents": list(documents)}

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in order. :class:`PipelineError` (one line) on HTTP
        errors, an open breaker and replies that do not score every document."""
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        if not documents:
            return []
        response = self.post(RERANK_PATH, self.payload(query, documents))
        return self._read(response.body, len(documents))

    def _read(self, body: Any, count: int) -> list[float]:
        api = self.rerank_config.api
        items = body.get("results") if api == "cohere" and isinstance(body, Mapping) else (
            body if api == "tei" else None)
        field = "relevance_score" if api == "cohere" else "score"
        if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
            raise PipelineError(
                f"{self.what}: {self.endpoint} did not answer in the {api!r} shape "
                f"{_SHAPES[api]} (top-level keys: {reply_keys(body)}); set "
                f"{self.config.label} api to the server's: {', '.join(RERANK_APIS)}"
            )
        scores: list[float | None] = [None] * count
        for item in items:
            index, score = item.get("index"), item.get(field)
            if (isinstance(index, bool) or not isinstance(index, int)
                    or not 0 <= index < count or isinstance(score, bool)
                    or not isinstance(score, int | float) or not math.isfinite(score)):
                raise PipelineError(
                    f"{self.what}: {self.endpoint} answered an item without a document index "
                    f"in 0..{count - 1} and a finite {field}: {dict(item)!r:.120}"
                )
            scores[index] = float(score)
        missing = [i for i, score in enumerate(scores) if score is None]
        if missing:
            raise PipelineError(
                f"{self.what}: {self.endpoint} scored {count - len(missing)} of {count} "
                f"documents (none for index {missing[0]}); the reranker must score every "
                "document (send no top_n)"
            )
        return [float(score) for score in scores if score is not None]
