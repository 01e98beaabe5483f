"""Embeddings (``POST {base_url}/embeddings``), the OpenAI API that OpenAI, vLLM, Ollama's
``/v1`` and text-embeddings-inference all serve, configured by ``[pipeline.embedding]``.

Request ``{"model": ..., "input": [texts], "encoding_format": "base64", "dimensions": n}``
(``dimensions`` only when set); reply ``{"data": [{"index": i, "embedding": ...}, ...]}``,
put back in the order of ``index`` when the server gives one. ``encoding_format =
"base64"`` (the default, as OpenAI's own SDK asks) gets each vector as the base64 of its
little-endian float32 values: decoding a batch's JSON floats costs ten times more CPU
than the request, so a corpus embedded through a fast server is bound by it. A vector
answered as a list of numbers (a server that ignores the format) is read too; ``"float"``
asks for lists, for a server that refuses the field. :meth:`EmbeddingClient.embed_many` sends a
corpus in batches of ``batch_size``, ``concurrency`` requests at a time, and reports its
progress; every reply is checked (one vector per text, numbers only, one width, the
``dimensions`` asked for), so a malformed reply is one line, never a wrong vector.
"""

from __future__ import annotations

import base64
import binascii
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_ragev.clients.endpoint import (
    ENDPOINT_KEYS,
    TRANSPORT_KEYS,
    EndpointClient,
    EndpointConfig,
    reply_keys,
)
from pytest_ragev.core.errors import PipelineError
from pytest_ragev.core.tables import Table

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

EMBEDDING_PATH = "embeddings"
EMBEDDING_KEYS = (*ENDPOINT_KEYS, "dimensions", "batch_size", "concurrency", "encoding_format")
#: How vectors travel: ``base64`` (float32 bytes) or ``float`` (JSON numbers).
ENCODINGS = ("base64", "float")
DEFAULT_BATCH_SIZE = 64
DEFAULT_CONCURRENCY = 4
#: What the table speaks, for messages that say what is supported.
SUPPORTED = ("the OpenAI /v1/embeddings API (OpenAI, vLLM, Ollama's /v1, "
             "text-embeddings-inference)")

#: ``(done, of)`` texts embedded so far.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class EmbeddingConfig:
    """A resolved ``[pipeline.embedding]`` table. Holds no secret value."""

    endpoint: EndpointConfig
    dimensions: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    concurrency: int = DEFAULT_CONCURRENCY
    encoding_format: str = "base64"

    @classmethod
    def from_table(cls, table: Mapping[str, Any], *, source: object,
                   where: str = "[pipeline.embedding]") -> EmbeddingConfig:
        """Validate the table; one-line :class:`~pytest_ragev.core.errors.ConfigError`."""
        opts = Table(table, where=where, source=str(source))
        opts.check_keys(EMBEDDING_KEYS)
        endpoint = EndpointConfig.from_table(opts, model_example="text-embedding-3-small")
        dimensions = opts.integer("dimensions", None, low=1, example="1024")
        batch = opts.integer("batch_size", DEFAULT_BATCH_SIZE, low=1, example="64")
        concurrency = opts.integer("concurrency", DEFAULT_CONCURRENCY, low=1, example="4")
        encoding = opts.choice("encoding_format", "base64", ENCODINGS,
                               what="vector encoding")
        assert batch is not None and concurrency is not None
        return cls(endpoint=endpoint, dimensions=dimensions, batch_size=batch,
                   concurrency=concurrency, encoding_format=encoding)

    def snapshot(self) -> dict[str, Any]:
        """Every knob, JSON-safe, without secrets."""
        return {**self.endpoint.snapshot(), "dimensions": self.dimensions,
                "batch_size": self.batch_size, "concurrency": self.concurrency,
                "encoding_format": self.encoding_format}

    def identity(self) -> dict[str, Any]:
        """What names the vectors: endpoint, model and dimensions (no transport knob, no
        secret). Vectors cached under it are served again only to the same identity."""
        return {**self.endpoint.identity(), "dimensions": self.dimensions}

    def answer_knobs(self) -> dict[str, Any]:
        """The knobs that can change a vector (batching, concurrency and the wire format
        cannot: a float32 vector is the same in base64 and in JSON)."""
        return {k: v for k, v in self.snapshot().items() if k not in TRANSPORT_KEYS
                and k not in ("batch_size", "concurrency", "encoding_format")}


class EmbeddingClient(EndpointClient):
    """Asks an embedding model for vectors. Thread-safe."""

    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__(config.endpoint)
        self.embedding = config

    @property
    def endpoint(self) -> str:
        """The URL vectors are asked at."""
        return self.config.url(EMBEDDING_PATH)

    def payload(self, texts: Sequence[str]) -> dict[str, Any]:
        """The JSON request body for one batch."""
        body: dict[str, Any] = {"model": self.config.model, "input": list(texts),
                                "encoding_format": self.embedding.encoding_format}
        if self.embedding.dimensions is not None:
            body["dimensions"] = self.embedding.dimensions
        return body

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One request: a vector per text, in order. :class:`PipelineError` (one line)
        on HTTP errors, an open breaker and replies that are not one vector per text."""
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        if not texts:
            import numpy as np

            return np.zeros((0, 0), dtype=np.float32)
        response = self.post(EMBEDDING_PATH, self.payload(texts))
        return self._vectors(response.body, len(texts))

    def _vectors(self, body: Any, count: int) -> npt.NDArray[np.float32]:
        data = body.get("data") if isinstance(body, Mapping) else None
        if not isinstance(data, list) or not all(
                isinstance(item, Mapping) and isinstance(item.get("embedding"), (list, str))
                for item in data):
            raise PipelineError(
                f"{self.what}: {self.endpoint} answered without data[*].embedding (top-level "
                f"keys: {reply_keys(body)}); {self.config.label} speaks {SUPPORTED}: check "
                "that base_url is its API root, e.g. http://127.0.0.1:8080/v1"
            )
        if len(data) != count:
            raise PipelineError(
                f"{self.what}: {self.endpoint} answered {len(data)} vector(s) for {count} "
                "text(s); the server must embed every input"
            )
        if all(isinstance(item.get("index"), int) for item in data):
            data = sorted(data, key=lambda item: int(item["index"]))
        return self._matrix([self._decoded(item["embedding"]) for item in data])

    def _decoded(self, vector: list[Any] | str) -> Any:
        """A vector as a list of numbers, or the float32 array its base64 holds."""
        if isinstance(vector, list):
            return vector
        import numpy as np

        try:
            raw = base64.b64decode(vector, validate=True)
            if len(raw) % 4:
                raise ValueError("not a whole number of float32 values")
        except (binascii.Error, ValueError) as error:
            raise PipelineError(
                f"{self.what}: {self.endpoint} answered a vector string that is not base64 "
                f"of float32 values ({error}); set [pipeline.embedding] encoding_format = "
                "\"float\" if the server encodes otherwise"
            ) from None
        return np.frombuffer(raw, dtype="<f4")

    def _matrix(self, vectors: list[Any]) -> npt.NDArray[np.float32]:
        """The vectors as one float32 matrix, checked in numpy (a Python loop over every
        number cost more than the request's JSON decoding)."""
        import numpy as np

        wanted = self.embedding.dimensions
        expected = wanted if wanted is not None else len(vectors[0])
        odd = next((len(vector) for vector in vectors if len(vector) != expected), None)
        if odd is not None:
            raise PipelineError(
                f"{self.what}: {self.endpoint} answered a vector of {odd} dimensions, not "
                f"{expected}; " + ("check that the model supports dimensions"
                                   if wanted is not None
                                   else "one model must give every vector one width")
            )
        try:
            matrix = np.array(vectors, dtype=np.float64)
            good = bool(matrix.shape[1] > 0 and np.isfinite(matrix).all())
        except (TypeError, ValueError):
            good = False
        if not good:
            raise PipelineError(
                f"{self.what}: {self.endpoint} answered a vector that is not a list of finite "
                "numbers; check that the server returns floats (encoding_format \"float\")"
            )
        return matrix.astype(np.float32)

    def embed_many(self, texts: Sequence[str], *,
                   progress: Progress | None = None) -> npt.NDArray[np.float32]:
        """Every text's vector, in order: batches of ``batch_size``, at most
        ``concurrency`` requests in flight; ``progress(done, of)`` after each batch. The
        first failure stops the batches not yet sent and is raised."""
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        size, total = self.embedding.batch_size, len(texts)
        starts = list(range(0, total, size))
        import numpy as np

        out: list[npt.NDArray[np.float32]] = [np.zeros((0, 0), dtype=np.float32)
                                              for _ in starts]
        if not starts:
            return np.zeros((0, 0), dtype=np.float32)
        lock = threading.Lock()
        done = 0
        stop = threading.Event()

        def run(slot: int) -> None:
            nonlocal done
            if stop.is_set():
                return  # another batch failed: the run stops here
            batch = texts[starts[slot]:starts[slot] + size]
            try:
                out[slot] = self.embed(batch)
            except BaseException:
                stop.set()  # before the worker takes the next batch
                raise
            with lock:
                done += len(batch)
                finished = done
            if progress is not None:
                progress(finished, total)

        workers = min(self.embedding.concurrency, len(starts))
        with ThreadPoolExecutor(max_workers=workers,
                                thread_name_prefix="ragev-embed") as pool:
            futures: list[Future[None]] = [pool.submit(run, slot) for slot in range(len(starts))]
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f.done() and f.exception() is not None), None)
            if failed is not None:
                for future in futures:
                    future.cancel()
                error = failed.exception()
                assert error is not None
                raise error
        return np.concatenate(out) if len(out) > 1 else out[0]
