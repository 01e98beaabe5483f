"""The built-in pipeline's models behind HTTP: ``[pipeline.embedding]`` and ``[pipeline.rerank]``.

:class:`EndpointEmbedder` is an :class:`~.models.Embedder` over
:class:`~pytest_ragev.clients.EmbeddingClient`: the corpus's chunks go in concurrent
batches with progress (their vectors are then cached with the knowledge base, under the
model's identity); questions, asked one per thread as the run answers them, are gathered
into batches too (:class:`QueryBatcher`). :class:`EndpointReranker` scores a question's
chunks with :class:`~pytest_ragev.clients.RerankClient` and remembers every score by
(model identity, question, chunk) for the process: variants that differ only in
``rerank_top_k`` or ``rerank_threshold``, or share a reranker, ask for each pair once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from pytest_ragev.clients import EmbeddingClient, EmbeddingConfig, RerankClient, RerankConfig
from pytest_ragev.core.digest import sha256_json

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: How long the first question of a batch waits for others to join it (seconds).
LINGER_S = 0.002


def _normalised(rows: Any) -> npt.NDArray[np.float32]:
    """The vectors (a matrix or a list of rows) as float32 rows of unit length (cosine
    similarity is then a dot product)."""
    import numpy as np

    if len(rows) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    matrix = np.array(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


class QueryBatcher:
    """Gathers texts asked for from many threads into requests of up to ``batch_size``.

    The first caller becomes the leader: it waits :data:`LINGER_S` for others to join,
    then sends what is pending, batch after batch, until nothing is; the others wait for
    their own result. A failed request fails every text of its batch with the same error.
    """

    def __init__(self, send: Callable[[list[str]], Any], batch_size: int) -> None:
        self._send = send
        self._size = batch_size
        self._lock = threading.Lock()
        self._pending: list[tuple[str, Future[Any]]] = []
        self._leading = False

    def __call__(self, text: str) -> Any:
        """``text``'s vector (a row of the batch it went in)."""
        future: Future[Any] = Future()
        with self._lock:
            self._pending.append((text, future))
            lead = not self._leading
            self._leading = True
        if lead:
            if LINGER_S > 0:
                time.sleep(LINGER_S)
            self._drain()
        return future.result()

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch = self._pending[:self._size]
                del self._pending[:self._size]
                if not batch:
                    self._leading = False
                    return
            try:
                vectors = self._send([text for text, _ in batch])
            except BaseException as error:
                for _, future in batch:
                    future.set_exception(error)
            else:
                for (_, future), vector in zip(batch, vectors, strict=True):
                    future.set_result(vector)


class EndpointEmbedder:
    """An embedder whose model answers at ``[pipeline.embedding]``. Thread-safe."""

    def __init__(self, config: EmbeddingConfig, *, query_prefix: str | None = None,
                 passage_prefix: str | None = None) -> None:
        self.client = EmbeddingClient(config)
        self.query_prefix = query_prefix or ""
        self.passage_prefix = passage_prefix or ""
        self._queries = QueryBatcher(self.client.embed, config.batch_size)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """The questions' vectors; one text at a time from many threads is batched."""
        prefixed = [self.query_prefix + text for text in texts]
        if len(prefixed) == 1:
            return _normalised([self._queries(prefixed[0])])
        return _normalised(self.client.embed_many(prefixed))

    def encode_passages(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> npt.NDArray[np.float32]:
        """The chunks' vectors: concurrent batches, ``progress(done, of)`` after each."""
        return _normalised(self.client.embed_many(
            [self.passage_prefix + text for text in texts], progress=progress))


#: Scores remembered per process at most (a question's pool of 100 chunks is 100).
SCORE_MEMO = 200_000
_scores: OrderedDict[tuple[str, str, str], float] = OrderedDict()
_scores_lock = threading.Lock()


class EndpointReranker:
    """Scores chunks with the reranker at ``[pipeline.rerank]``; every score is
    remembered by (model identity, question, chunk text) for the process. Thread-safe."""

    def __init__(self, config: RerankConfig) -> None:
        self.client = RerankClient(config)
        self._identity = sha256_json(config.identity())

    def __call__(self, kb: Any, question: str, texts: Sequence[str]) -> list[float] | None:
        known: dict[str, float] = {}
        with _scores_lock:
            for text in texts:
                key = (self._identity, question, text)
                if key in _scores:
                    known[text] = _scores[key]
                    _scores.move_to_end(key)
        missing = [text for text in dict.fromkeys(texts) if text not in known]
        if missing:
            fresh = self.client.scores(question, missing)
            known.update(zip(missing, fresh, strict=True))
            with _scores_lock:
                for text, score in zip(missing, fresh, strict=True):
                    _scores[(self._identity, question, text)] = score
                while len(_scores) > SCORE_MEMO:
                    _scores.popitem(last=False)
        return [known[text] for text in texts]
