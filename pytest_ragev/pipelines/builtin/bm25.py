"""BM25 keyword retrieval on flat numpy arrays (no scipy, no Python object per posting).

The index is "eager" like bm25s's: the BM25 contribution (impact) of every (term,
document) pair is computed once at build time and stored column-wise: per term, the
documents that contain it (``indices``, int32, ascending) and their impacts (``data``,
float32), delimited by ``indptr``; per term its largest impact; and for the most frequent
terms a dense row of impacts over every document. Flat arrays only, so an index on disk
is memory-mapped as it is (see :mod:`.store`) and shared by processes through the page
cache. The scoring
is bm25s's default, the Lucene variant (Kamphuis et al., ECIR 2020)::

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(q, d) = sum over query tokens t (repeats count) of
                  idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

so scores match ``bm25s.BM25(k1=k1, b=b, method="lucene")`` given the same tokens.
Scores are sums of float32 impacts in float64, which are exact (a few terms, magnitudes
within 2^29 of each other), so a document's score does not depend on the order in which
its terms were added: pruned and exhaustive search give bit-identical scores.

:meth:`BM25Index.normalised` maps a raw score to [0, 1] for thresholds: 1.0 is what a
document of average length containing every query token exactly once would score
(``sum idf * 1 / (1 + k1)``), higher raw scores are clipped to 1. Because it is a ratio
to the query's own attainable score, a threshold means the same on any corpus.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DEFAULT_K1 = 1.5
DEFAULT_B = 0.75

#: Tokens per build block: bounds the build's temporary arrays (about 40 bytes a token).
#: Measured building the KB of 300k passages: 4M-token blocks peaked at 692 MB and spent
#: 1.7 s in the two passes, 1M-token blocks 567 MB and 1.2 s (smaller blocks sort in
#: cache); 512k tokens gave 546 MB and 1.4 s, each block also paying per term.
BLOCK_TOKENS = 1 << 20
#: Below this many postings in all query lists together, a query is summed directly.
_SMALL_QUERY = 4096
#: The sorted-run accumulation gives way to the dense one past 1/this of the documents.
_SPARSE_DIV = 8
#: The refresh of θ scans at most about this many postings of the short lists.
_REFRESH_SCAN = 16384
#: Terms in at least this share of the documents also get a dense column of impacts (one
#: float32 per document), so probing one is a gather instead of a binary search ...
DENSE_SHARE = 0.0625
#: ... for at most this many terms (the most frequent: stop words, in real text).
DENSE_MAX = 64
#: Relative slack on every pruning comparison, so rounding can only keep a document.
_SLACK = 1e-9


class _Lists:
    """The query's posting lists, rarest first: slices, repeats, bounds, suffix bounds."""

    def __init__(
        self,
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        repeats: npt.NDArray[np.int64],
        bounds: npt.NDArray[np.float64],
        rows: list[int],
    ) -> None:
        import numpy as np

        self.starts, self.ends, self.repeats, self.bounds = starts, ends, repeats, bounds
        #: rows[i]: the list's row in the index's dense columns, or -1.
        self.rows = rows
        #: rest[i]: the most the lists i, i+1, ... can add to any document.
        self.rest = np.append(np.cumsum(bounds[::-1])[::-1], 0.0)


class BM25Index:
    """An immutable BM25 index over documents given as token lists (see the module doc).

    Thread-safe: searches share the read-only arrays; each thread has its own scratch.
    """

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
        max_impact: npt.NDArray[np.float64] | None = None,
        dense_terms: npt.NDArray[np.int64] | None = None,
        columns: npt.NDArray[np.float32] | None = None,
    ) -> None:
        self.vocab = vocab
        self.idf = idf
        self.indptr = indptr
        self.indices = indices
        self.data = data
        self.n_docs = n_docs
        self.k1 = k1
        self.b = b
        #: Per term, its largest impact on any document (the pruning bound).
        self.max_impact = (_max_per_term(indptr, data) if max_impact is None
                           else max_impact)
        if dense_terms is None or columns is None:
            dense_terms, columns = _dense_columns(indptr, indices, data, n_docs)
        #: The most frequent terms (ascending ids) and their impacts on every document.
        self.dense_terms, self.columns = dense_terms, columns
        self._rows = {int(term): row for row, term in enumerate(dense_terms)}
        self._local = threading.local()

    @property
    def postings(self) -> int:
        """The number of (term, document) pairs stored."""
        return int(self.indptr[-1])

    @classmethod
    def build(
        cls, documents: Iterable[Sequence[str]], *, k1: float = DEFAULT_K1, b: float = DEFAULT_B
    ) -> BM25Index:
        """Index ``documents`` (token lists, read once); document ``i`` is result index ``i``.

        Tokens become int32 ids as they arrive (one C-level dict lookup each), so the
        token lists can be produced lazily and dropped one by one. The postings are then
        built in blocks of :data:`BLOCK_TOKENS` tokens: each block is sorted (term, then
        document: that gives term frequencies) once to count the documents of each term
        and once more to scatter it into the final arrays, so temporary memory stays
        bounded whatever the corpus size.
        """
        from array import array
        from collections import defaultdict
        from itertools import count

        # A new token gets the next id from the counter, inside the dict lookup.
        vocab: defaultdict[str, int] = defaultdict(count().__next__)
        lookup = vocab.__getitem__
        ids = array("i")
        lengths = array("q")
        for tokens in documents:
            lengths.append(len(tokens))
            ids.extend(map(lookup, tokens))
        vocab.default_factory = None
        n_docs = len(lengths)
        idf, indptr, indices, data = _postings(ids, lengths, len(vocab), k1=k1, b=b)
        # Every token's id goes before the pruning bounds and the dense columns are made,
        # which are then the largest arrays alive beside the postings.
        del ids, lengths
        return cls(vocab=vocab, idf=idf, indptr=indptr, indices=indices, data=data,
                   n_docs=n_docs, k1=k1, b=b)

    def token_ids(self, tokens: Sequence[str]) -> list[int]:
        """The vocabulary ids of ``tokens``; tokens the corpus never uses are left out."""
        vocab = self.vocab
        return [vocab[token] for token in tokens if token in vocab]

    def scores(self, tokens: Sequence[str]) -> npt.NDArray[np.float64]:
        """The raw BM25 score of every document for the query ``tokens`` (exhaustive)."""
        import numpy as np

        out = np.zeros(self.n_docs, dtype=np.float64)
        for term in self.token_ids(tokens):
            start, end = self.indptr[term], self.indptr[term + 1]
            out[self.indices[start:end]] += self.data[start:end]
        return out

    def _scratch(self) -> npt.NDArray[np.float64]:
        # One zeroed accumulator per thread, cleaned after each query (not reallocated).
        acc: npt.NDArray[np.float64] | None = getattr(self._local, "acc", None)
        if acc is None:
            import numpy as np

            acc = self._local.acc = np.zeros(self.n_docs, dtype=np.float64)
        return acc

    def search(self, tokens: Sequence[str], top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` best ``(document index, raw score)`` pairs with a score above 0.

        Best first; equal scores keep document order, so results are deterministic.
        Exact, with MaxScore dynamic pruning (Turtle and Flood 1995) on every query:
        the posting lists are added to an accumulator rarest first; after each, the
        best documents seen so far are scored in full, which gives a lower bound θ on
        the k-th best score. As soon as the bounds of the lists not yet added sum to
        less than θ, no document outside the lists added can reach the top k: those
        lists are only probed (binary search) for the candidates whose partial score
        plus that sum can still reach θ, and candidates drop out term by term.
        Common words (long lists, small bounds) are thus rarely read in full.
        """
        import numpy as np

        ids = self.token_ids(tokens)
        if not ids or top_k <= 0 or self.n_docs == 0:
            return []
        terms, repeats = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        starts, ends = self.indptr[terms], self.indptr[terms + 1]
        if int((ends - starts).sum()) <= _SMALL_QUERY or len(terms) == 1:
            return self._direct(starts, ends, repeats, top_k)
        bounds = self.max_impact[terms] * repeats
        order = np.argsort(ends - starts, kind="stable")  # rarest first
        rows = [self._rows.get(int(term), -1) for term in terms[order]]
        lists = _Lists(starts[order], ends[order], repeats[order], bounds[order], rows)
        found, theta = self._sparse(lists, top_k)
        if found is None:
            found = self._dense(lists, top_k, theta)
        return _top(*found, top_k)

    def _refresh(
        self,
        docs: npt.NDArray[np.integer[Any]],
        partial: npt.NDArray[np.float64],
        lists: _Lists,
        i: int,
        top_k: int,
        pool: list[tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]]],
    ) -> float:
        """Score in full the best partial documents after list ``i``: a lower bound on θ.

        ``docs`` are sorted and distinct, ``partial`` their scores over lists ``..i``;
        the best few get the lists after ``i`` probed, and join the ``pool`` of fully
        scored documents whose k-th best score is returned.
        """
        import numpy as np

        sample = max(2 * top_k, 32)
        if len(docs) > sample:
            pick = np.argpartition(partial, len(docs) - sample)[len(docs) - sample:]
            pick.sort()  # keeps the documents sorted, for the binary searches
            docs, partial = docs[pick], partial[pick]
        exact = partial + self._probe(docs, lists, i + 1)
        pool.append((docs, exact))
        return _kth(pool, top_k)

    def _sparse(
        self, lists: _Lists, top_k: int
    ) -> tuple[tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]] | None, float]:
        """MaxScore with the partial scores kept as sorted (document, score) arrays.

        Merging sorted runs stays in the cache, where a dense accumulator of a million
        documents misses it on every posting. Gives up (``None``, with the θ found so
        far) when the lists to add exceed 1/:data:`_SPARSE_DIV` of the documents.
        """
        import numpy as np

        n = len(lists.starts)
        limit = max(self.n_docs // _SPARSE_DIV, _SMALL_QUERY)
        pool: list[tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]]] = []
        theta = 0.0
        docs: npt.NDArray[np.integer[Any]] = np.zeros(0, dtype=np.int32)
        values: npt.NDArray[np.float64] = np.zeros(0, dtype=np.float64)
        split = n
        for i in range(n):
            if theta > 0.0 and lists.rest[i] < theta * (1.0 - _SLACK):
                split = i
                break
            a, e = int(lists.starts[i]), int(lists.ends[i])
            if len(docs) + e - a > limit:
                return None, theta
            weight = _times(self.data[a:e], int(lists.repeats[i])).astype(np.float64)
            docs, values = (self.indices[a:e], weight) if i == 0 else _merge(
                docs, values, self.indices[a:e], weight)
            if i + 1 < n:
                theta = max(theta, self._refresh(docs, values, lists, i, top_k, pool))
        floor = theta * (1.0 - _SLACK) - lists.rest[split]
        if floor > 0.0:
            keep = values >= floor
            docs, values = docs[keep], values[keep]
        if split == n:
            return (docs, values), theta
        acc = self._scratch()
        added: list[npt.NDArray[np.int32]] = []
        try:
            return self._finish(acc, added, docs, values.copy(), lists, split, theta,
                                top_k), theta
        finally:
            for listed in added:
                acc[listed] = 0.0

    def _dense(
        self, lists: _Lists, top_k: int, theta: float
    ) -> tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]]:
        """MaxScore on the per-thread accumulator, for queries whose lists are long."""
        import numpy as np

        n = len(lists.starts)
        acc = self._scratch()
        added: list[npt.NDArray[np.int32]] = []
        pool: list[tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]]] = []
        short: list[npt.NDArray[np.int32]] = []
        try:
            split = n
            for i in range(n):
                if theta > 0.0 and lists.rest[i] < theta * (1.0 - _SLACK):
                    split = i
                    break
                a, e = int(lists.starts[i]), int(lists.ends[i])
                docs = self.indices[a:e]
                acc[docs] += _times(self.data[a:e], int(lists.repeats[i]))
                added.append(docs)
                if i + 1 == n:
                    break
                # Raise θ from the short lists added so far (cheap to scan), or from this
                # list when it is the first.
                if len(docs) <= _REFRESH_SCAN or not short:
                    short.append(docs)
                scan = _union(short)
                if len(short) > 1:
                    short = [scan]
                theta = max(theta, self._refresh(scan, acc[scan], lists, i, top_k, pool))
            floor = theta * (1.0 - _SLACK) - lists.rest[split]
            candidates: npt.NDArray[np.integer[Any]]
            if sum(len(docs) for docs in added) * 4 > self.n_docs:
                # Many documents touched: one pass over the accumulator (sorted, distinct;
                # a touched document has a positive partial score, an untouched one 0).
                candidates = np.flatnonzero(acc >= floor) if floor > 0 else np.flatnonzero(acc)
            else:
                kept = [docs[acc[docs] >= floor] for docs in added] if floor > 0 else added
                candidates = _union(kept)
            values = acc[candidates]
            if split < n:
                return self._finish(acc, added, candidates, values, lists, split, theta, top_k)
            return candidates, values
        finally:
            if sum(len(docs) for docs in added) * 4 > self.n_docs:
                acc.fill(0.0)
            else:
                for docs in added:
                    acc[docs] = 0.0

    def _direct(
        self,
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        repeats: npt.NDArray[np.int64],
        top_k: int,
    ) -> list[tuple[int, float]]:
        """Few postings (or one list): sum them sparsely, no accumulator."""
        import numpy as np

        if len(starts) == 1:
            a, e = int(starts[0]), int(ends[0])
            values = self.data[a:e].astype(np.float64) * float(repeats[0])
            return _top(self.indices[a:e], values, top_k)
        hits = np.concatenate([self.indices[a:e] for a, e in zip(starts, ends, strict=True)])
        weights = np.concatenate([self.data[a:e].astype(np.float64) * float(c)
                                  for a, e, c in zip(starts, ends, repeats, strict=True)])
        candidates, inverse = np.unique(hits, return_inverse=True)
        sums = np.bincount(inverse, weights=weights, minlength=len(candidates))
        return _top(candidates, sums.astype(np.float64), top_k)

    def _probe(
        self, docs: npt.NDArray[np.integer[Any]], lists: _Lists, first: int
    ) -> npt.NDArray[np.float64]:
        """What the lists ``first``, ``first + 1``, ... add to the sorted ``docs``."""
        import numpy as np

        out = np.zeros(len(docs), dtype=np.float64)
        for j in range(first, len(lists.starts)):
            found, weight = self._lookup(docs, lists, j)
            out[found] += _times(weight, int(lists.repeats[j]))
        return out

    def _lookup(
        self, docs: npt.NDArray[np.integer[Any]], lists: _Lists, j: int
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float32]]:
        """Which ``docs`` list ``j`` holds, and their impacts: a gather from the list's dense
        column when it has one, else a binary search in its postings."""
        import numpy as np

        row = lists.rows[j]
        if row >= 0:
            weight = self.columns[row][docs]
            found = weight > 0.0  # every stored impact is positive
            return found, weight[found]
        a, e = int(lists.starts[j]), int(lists.ends[j])
        postings = self.indices[a:e]
        position = np.searchsorted(postings, docs)
        np.minimum(position, len(postings) - 1, out=position)
        found = postings[position] == docs
        return found, self.data[a:e][position[found]]

    def _finish(
        self,
        acc: npt.NDArray[np.float64],
        added: list[npt.NDArray[np.int32]],
        candidates: npt.NDArray[np.integer[Any]],
        values: npt.NDArray[np.float64],
        lists: _Lists,
        split: int,
        theta: float,
        top_k: int,
    ) -> tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]]:
        """Add the lists from ``split`` on for the candidates that can still make the top k.

        Lists go by decreasing bound; before each, a candidate whose score plus what the
        lists still to come could add stays below θ is dropped. θ only grows: it is the
        larger of the bound found so far and the k-th best lower bound among candidates.
        A list is read from its dense column when it has one; else it is probed by
        binary search for few candidates, or added to the accumulator when the
        candidates outnumber a sixteenth of its postings (a binary search costs about
        as much as adding 16 postings); ``added`` records those.
        """
        import numpy as np

        bounds = lists.bounds[split:]
        reach = float(bounds.sum())
        for j in split + np.argsort(-bounds, kind="stable"):
            if len(candidates) >= top_k:
                kth = float(np.partition(values, len(values) - top_k)[len(values) - top_k])
                theta = max(theta, kth)
            alive = values + reach >= theta * (1.0 - _SLACK)
            if not alive.all():
                candidates, values = candidates[alive], values[alive]
            a, e, c = int(lists.starts[j]), int(lists.ends[j]), int(lists.repeats[j])
            if lists.rows[j] < 0 and len(candidates) * 16 > e - a:
                before = acc[candidates]
                docs = self.indices[a:e]
                acc[docs] += _times(self.data[a:e], c)
                added.append(docs)
                values += acc[candidates] - before
            else:
                found, weight = self._lookup(candidates, lists, j)
                values[found] += _times(weight, c)
            reach -= float(lists.bounds[j])
        return candidates, values

    def normaliser(self, tokens: Sequence[str]) -> float:
        """The raw score that :meth:`normalised` maps to 1.0 for this query (0 if none)."""
        ids = self.token_ids(tokens)
        return float(self.idf[ids].sum()) / (1.0 + self.k1) if ids else 0.0

    def normalised(self, raw: float, tokens: Sequence[str]) -> float:
        """``raw`` as a fraction of the query's reference score, clipped to [0, 1]."""
        scale = self.normaliser(tokens)
        return min(1.0, raw / scale) if scale > 0.0 else 0.0


def _times(weight: npt.NDArray[np.float32], count: int) -> npt.NDArray[Any]:
    """``weight * count`` in float64 (exact); a float32 product would round."""
    import numpy as np

    return weight if count == 1 else np.multiply(weight, count, dtype=np.float64)


def _union(lists: list[npt.NDArray[np.int32]]) -> npt.NDArray[np.int32]:
    """The sorted distinct documents of sorted lists (a stable sort merges sorted runs fast)."""
    import numpy as np

    if len(lists) == 1:
        return lists[0]
    merged = np.sort(np.concatenate(lists), kind="stable")
    if len(merged) < 2:
        return merged
    keep = np.empty(len(merged), dtype=bool)
    keep[0] = True
    np.not_equal(merged[1:], merged[:-1], out=keep[1:])
    return merged[keep]


def _kth(
    pool: list[tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]]], k: int
) -> float:
    """The k-th best exact score among the distinct documents scored so far (0 if < k)."""
    import numpy as np

    all_docs = np.concatenate([docs for docs, _ in pool])
    if len(all_docs) < k:
        return 0.0
    # A document may have been scored in two rounds (same score): count it once.
    _, first = np.unique(all_docs, return_index=True)
    if len(first) < k:
        return 0.0
    values = np.concatenate([scores for _, scores in pool])[first]
    return float(np.partition(values, len(values) - k)[len(values) - k])


def _merge(
    docs: npt.NDArray[np.integer[Any]],
    values: npt.NDArray[np.float64],
    more_docs: npt.NDArray[np.integer[Any]],
    more_values: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]]:
    """Two sorted (document, score) runs merged, the scores of a shared document summed."""
    import numpy as np

    merged = np.concatenate((docs, more_docs))
    order = np.argsort(merged, kind="stable")  # a merge of two sorted runs
    merged = merged[order]
    summed = np.concatenate((values, more_values))[order]
    first = np.empty(len(merged), dtype=bool)
    first[:1] = True
    np.not_equal(merged[1:], merged[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    return merged[starts], np.add.reduceat(summed, starts) if len(starts) else summed


def _top(
    candidates: npt.NDArray[np.integer[Any]], values: npt.NDArray[np.float64], top_k: int
) -> list[tuple[int, float]]:
    """The best ``top_k`` positive ``values``, ties by ascending document."""
    import numpy as np

    if len(candidates) > top_k:
        kth = np.partition(values, len(values) - top_k)[len(values) - top_k]
        keep = np.flatnonzero(values >= kth)
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))[:top_k]
    return [(int(candidates[i]), float(values[i])) for i in order if values[i] > 0.0]


def _postings(
    ids: Any, lengths: Any, n_terms: int, *, k1: float, b: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int32],
           npt.NDArray[np.float32]]:
    """``(idf, indptr, indices, data)`` of the documents whose token ids follow each other
    in ``ids`` (an ``array("i")``), ``lengths`` (an ``array("q")``) tokens each: the
    blocks of :meth:`BM25Index.build`. Its temporary arrays are gone on return."""
    import numpy as np

    n_docs = len(lengths)
    doc_lengths = np.frombuffer(lengths, dtype=np.int64) if n_docs else np.zeros(0, np.int64)
    total = int(doc_lengths.sum())
    avgdl = total / n_docs if n_docs and total else 1.0
    norm = k1 * (1.0 - b + b * doc_lengths / avgdl)
    starts = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(doc_lengths, out=starts[1:])

    token_ids = np.frombuffer(ids, dtype=np.int32) if total else np.zeros(0, np.int32)
    blocks = []
    first = 0
    while first < n_docs:
        last = int(np.searchsorted(starts, starts[first] + BLOCK_TOKENS, side="right")) - 1
        last = min(max(last, first + 1), n_docs)
        blocks.append((first, last))
        first = last

    def pairs(first: int, last: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32],
                                              npt.NDArray[np.int64]]:
        # One sort of the block's (term, document) keys gives the term frequencies
        # and the column-wise order (term, then document).
        width = last - first
        local = np.repeat(np.arange(width, dtype=np.int64), doc_lengths[first:last])
        keys, tf = np.unique(
            token_ids[starts[first]:starts[last]].astype(np.int64) * width + local,
            return_counts=True,
        )
        return (keys // width).astype(np.int32), (keys % width + first).astype(np.int32), tf

    # Pass 1 counts the documents of each term; pass 2 sorts each block again (cheaper
    # than keeping every block's pairs: the peak memory stays the final arrays').
    df = np.zeros(n_terms, dtype=np.int64)
    for first, last in blocks:
        df += np.bincount(pairs(first, last)[0], minlength=n_terms)
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    data = np.empty(int(indptr[-1]), dtype=np.float32)
    # Blocks come in document order, so appending each block's run of a term after
    # the previous blocks' keeps every posting list sorted by document.
    fill = indptr[:-1].copy()
    for first, last in blocks:
        terms, docs, tf = pairs(first, last)
        counts = np.bincount(terms, minlength=n_terms)
        offset = np.cumsum(counts) - counts
        position = fill[terms] + (np.arange(len(terms), dtype=np.int64) - offset[terms])
        indices[position] = docs
        data[position] = idf[terms] * tf / (tf + norm[docs])
        fill += counts
        del terms, docs, tf, position
    return idf, indptr, indices, data


def _dense_columns(
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int32],
    data: npt.NDArray[np.float32],
    n_docs: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The terms in at least :data:`DENSE_SHARE` of the documents (the :data:`DENSE_MAX`
    most frequent) and their impacts as dense rows (0 where a term is absent)."""
    import numpy as np

    df = np.diff(indptr)
    frequent = np.flatnonzero(df >= max(DENSE_SHARE * n_docs, 1.0))
    if len(frequent) > DENSE_MAX:
        frequent = np.sort(frequent[np.argsort(-df[frequent], kind="stable")[:DENSE_MAX]])
    columns = np.zeros((len(frequent), n_docs), dtype=np.float32)
    for row, term in enumerate(frequent):
        start, end = indptr[term], indptr[term + 1]
        columns[row, indices[start:end]] = data[start:end]
    return frequent.astype(np.int64), columns


def _max_per_term(
    indptr: npt.NDArray[np.int64], data: npt.NDArray[np.float32]
) -> npt.NDArray[np.float64]:
    import numpy as np

    out = np.zeros(len(indptr) - 1, dtype=np.float64)
    filled = indptr[1:] > indptr[:-1]
    if filled.any():
        out[filled] = np.maximum.reduceat(data, indptr[:-1][filled]).astype(np.float64)
    return out
