"""BM25 keyword retrieval on numpy arrays (no scipy).

The index is "eager" like bm25s's: the BM25 contribution of every (term, document) pair is
computed once at build time and stored column-wise (per term: the documents that contain
it and their scores), so a query only sums the columns of its terms. The scoring is
bm25s's default, the Lucene variant (Kamphuis et al., ECIR 2020)::

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(q, d) = sum over query tokens t (repeats count) of
                  idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

so scores match ``bm25s.BM25(k1=k1, b=b, method="lucene")`` given the same tokens.

:meth:`BM25Index.normalised` maps a raw score to [0, 1] for thresholds: 1.0 is what a
document of average length containing every query token exactly once would score
(``sum idf * 1 / (1 + k1)``), higher raw scores are clipped to 1. Because it is a ratio
to the query's own attainable score, a threshold means the same on any corpus.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ragev.core.io import atomic_write_bytes, atomic_write_text

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DEFAULT_K1 = 1.5
DEFAULT_B = 0.75


class BM25Index:
    """An immutable BM25 index over documents given as token lists (see the module doc)."""

    def __init__(
        self,
        *,
        vocab: dict[str, int],
        idf: npt.NDArray[np.float64],
        indptr: npt.NDArray[np.int64],
        indices: npt.NDArray[np.int32],
        data: npt.NDArray[np.float32],
        n_docs: int,
        k1: float,
        b: float,
    ) -> None:
        self.vocab = vocab
        self.idf = idf
        self.indptr = indptr
        self.indices = indices
        self.data = data
        self.n_docs = n_docs
        self.k1 = k1
        self.b = b
        #: Per term, its largest contribution to any document (the pruning bound).
        self.max_impact = _max_per_term(indptr, data)

    @classmethod
    def build(
        cls, documents: Sequence[Sequence[str]], *, k1: float = DEFAULT_K1, b: float = DEFAULT_B
    ) -> BM25Index:
        """Index ``documents`` (each a token list); document ``i`` is result index ``i``."""
        import numpy as np

        vocab: dict[str, int] = {}
        token_ids: list[int] = []
        lengths = np.empty(len(documents), dtype=np.int64)
        setdefault = vocab.setdefault
        for position, tokens in enumerate(documents):
            lengths[position] = len(tokens)
            # ``len(vocab)`` is read before the insertion, so a new token gets the next id.
            token_ids.extend([setdefault(token, len(vocab)) for token in tokens])
        n_docs = len(documents)
        ids = np.asarray(token_ids, dtype=np.int64)
        docs = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
        # One sort gives term frequencies and the column-wise (term, then document) order.
        keys, tf = np.unique(ids * max(n_docs, 1) + docs, return_counts=True)
        terms = keys // max(n_docs, 1)
        doc_of = keys % max(n_docs, 1)
        df = np.bincount(terms, minlength=len(vocab)).astype(np.float64)
        idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        avgdl = float(lengths.mean()) if n_docs and lengths.sum() else 1.0
        norm = k1 * (1.0 - b + b * lengths[doc_of] / avgdl)
        data = (idf[terms] * tf / (tf + norm)).astype(np.float32)
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df.astype(np.int64), out=indptr[1:])
        return cls(
            vocab=vocab,
            idf=idf,
            indptr=indptr,
            indices=doc_of.astype(np.int32),
            data=data,
            n_docs=n_docs,
            k1=k1,
            b=b,
        )

    def token_ids(self, tokens: Sequence[str]) -> list[int]:
        """The vocabulary ids of ``tokens``; tokens the corpus never uses are left out."""
        vocab = self.vocab
        return [vocab[token] for token in tokens if token in vocab]

    def scores(self, tokens: Sequence[str]) -> npt.NDArray[np.float64]:
        """The raw BM25 score of every document for the query ``tokens``."""
        import numpy as np

        out = np.zeros(self.n_docs, dtype=np.float64)
        for term in self.token_ids(tokens):
            start, end = self.indptr[term], self.indptr[term + 1]
            out[self.indices[start:end]] += self.data[start:end]
        return out

    def search(self, tokens: Sequence[str], top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` best ``(document index, raw score)`` pairs with a score above 0.

        Best first; equal scores keep document order, so results are deterministic.
        Exact, with MaxScore-style pruning: the query terms with short posting lists are
        summed over the documents that contain them. If the k-th best of those partial
        scores already exceeds the most the common words (long lists) could add together,
        no other document can reach the top k, and the long lists are only probed for the
        candidates that still can. Otherwise every list is summed, as bm25s does.
        """
        import numpy as np

        ids = self.token_ids(tokens)
        if not ids or top_k <= 0:
            return []
        terms, repeats = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        indptr, indices, data = self.indptr, self.indices, self.data
        lengths = indptr[terms + 1] - indptr[terms]
        short = lengths <= max(self.n_docs // 16, top_k)
        if short.any() and not short.all():
            long_terms, long_repeats = terms[~short], repeats[~short]
            reach = float((self.max_impact[long_terms] * long_repeats).sum())
            spans = [(indptr[t], indptr[t + 1], float(c))
                     for t, c in zip(terms[short], repeats[short], strict=True)]
            if len(spans) == 1:
                a, b, c = spans[0]
                candidates = indices[a:b]
                partial = data[a:b] * c
            else:
                hits = np.concatenate([indices[a:b] for a, b, _ in spans])
                weights = np.concatenate([data[a:b] * c for a, b, c in spans])
                candidates, inverse = np.unique(hits, return_inverse=True)
                partial = np.asarray(
                    np.bincount(inverse, weights=weights, minlength=len(candidates)),
                    dtype=np.float64,
                )
            if len(candidates) >= top_k:
                kth = np.partition(partial, len(partial) - top_k)[len(partial) - top_k]
                if kth > reach:
                    # A document outside the candidates scores at most ``reach`` < kth.
                    return self._finish(candidates, partial, long_terms, long_repeats, top_k)
        totals = np.zeros(self.n_docs, dtype=np.float32)
        for term, count in zip(terms, repeats, strict=True):
            start, end = indptr[term], indptr[term + 1]
            weight = data[start:end] if count == 1 else data[start:end] * np.float32(count)
            np.add.at(totals, indices[start:end], weight)
        if self.n_docs > top_k:
            keep = np.argpartition(totals, self.n_docs - top_k)[self.n_docs - top_k :]
            kth = totals[keep].min()
            # Ties at the cut: keep every document scoring like the k-th, order in _top.
            keep = np.flatnonzero(totals >= kth) if kth > 0 else keep[totals[keep] > 0]
        else:
            keep = np.flatnonzero(totals > 0)
        return self._top(keep, totals[keep].astype(np.float64), top_k)

    def _finish(
        self,
        candidates: npt.NDArray[np.integer[Any]],
        partial: npt.NDArray[np.floating[Any]],
        terms: npt.NDArray[np.int64],
        repeats: npt.NDArray[np.int64],
        top_k: int,
    ) -> list[tuple[int, float]]:
        """Add the long lists' contributions to the candidates that can still make the top k.

        Terms go by decreasing bound; after each, a candidate whose score plus what the
        terms still to come could add stays below the k-th best current score is dropped
        (the k-th best current score only grows, so it is a safe lower bound).
        """
        import numpy as np

        values = partial.astype(np.float64)
        bounds = self.max_impact[terms] * repeats
        order = np.argsort(-bounds, kind="stable")
        reach = float(bounds.sum())
        for term, count, bound in zip(terms[order], repeats[order], bounds[order], strict=True):
            kth = np.partition(values, len(values) - top_k)[len(values) - top_k]
            alive = values + reach >= kth
            candidates, values = candidates[alive], values[alive]
            start, end = self.indptr[term], self.indptr[term + 1]
            postings = self.indices[start:end]
            # Postings are sorted by document, so a binary search finds each candidate.
            position = np.searchsorted(postings, candidates)
            position[position == len(postings)] = 0
            found = postings[position] == candidates
            values[found] += self.data[start:end][position[found]] * float(count)
            reach -= float(bound)
        return self._top(candidates, values, top_k)

    @staticmethod
    def _top(
        candidates: npt.NDArray[np.integer[Any]], values: npt.NDArray[np.float64], top_k: int
    ) -> list[tuple[int, float]]:
        import numpy as np

        if len(candidates) > top_k:
            kth = np.partition(values, len(values) - top_k)[len(values) - top_k]
            keep = np.flatnonzero(values >= kth)
            candidates, values = candidates[keep], values[keep]
        order = np.lexsort((candidates, -values))[:top_k]
        return [(int(candidates[i]), float(values[i])) for i in order if values[i] > 0.0]

    def normaliser(self, tokens: Sequence[str]) -> float:
        """The raw score that :meth:`normalised` maps to 1.0 for this query (0 if none)."""
        ids = self.token_ids(tokens)
        return float(self.idf[ids].sum()) / (1.0 + self.k1) if ids else 0.0

    def normalised(self, raw: float, tokens: Sequence[str]) -> float:
        """``raw`` as a fraction of the query's reference score, clipped to [0, 1]."""
        scale = self.normaliser(tokens)
        return min(1.0, raw / scale) if scale > 0.0 else 0.0

    def save(self, folder: Path) -> None:
        """Write the index into ``folder`` (``bm25.npz`` and ``bm25-vocab.json``), atomically."""
        import io

        import numpy as np

        buffer = io.BytesIO()
        np.savez(
            buffer,
            idf=self.idf,
            indptr=self.indptr,
            indices=self.indices,
            data=self.data,
            params=np.array([self.n_docs, self.k1, self.b], dtype=np.float64),
        )
        atomic_write_bytes(folder / "bm25.npz", buffer.getvalue())
        words = [""] * len(self.vocab)
        for word, index in self.vocab.items():
            words[index] = word
        atomic_write_text(folder / "bm25-vocab.json", json.dumps(words, ensure_ascii=False))

    @classmethod
    def load(cls, folder: Path) -> BM25Index:
        """Read an index written by :meth:`save`."""
        import numpy as np

        words = json.loads((folder / "bm25-vocab.json").read_text(encoding="utf-8"))
        with np.load(folder / "bm25.npz") as arrays:
            n_docs, k1, b = (float(x) for x in arrays["params"])
            return cls(
                vocab={word: index for index, word in enumerate(words)},
                idf=arrays["idf"],
                indptr=arrays["indptr"],
                indices=arrays["indices"],
                data=arrays["data"],
                n_docs=int(n_docs),
                k1=k1,
                b=b,
            )


def _max_per_term(
    indptr: npt.NDArray[np.int64], data: npt.NDArray[np.float32]
) -> npt.NDArray[np.float64]:
    import numpy as np

    out = np.zeros(len(indptr) - 1, dtype=np.float64)
    filled = indptr[1:] > indptr[:-1]
    if filled.any():
        out[filled] = np.maximum.reduceat(data, indptr[:-1][filled]).astype(np.float64)
    return out
