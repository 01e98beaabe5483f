"""Precision, recall, nDCG@3, nDCG@10, MRR and MAP of retrieved passage ids.

Two implementations of the same definitions:

* :func:`score_one` — plain Python, one sample at a time, written to be read next to
  ``docs/metrics.md``; it handles every shape (several ground-truth sets, very long
  result lists, ids beyond 64 bits).
* :func:`score_batch` — numpy over padded id matrices, for the common shape (at most
  one ground-truth set, result lists of moderate length); the test suite checks it
  against :func:`score_one` and ``pytrec_eval``.

Inputs are already validated (``_validate``): ids are ints, retrieved ids are
distinct only after :func:`dedupe`.

Profiles:

* ``weknora`` — binary relevance; precision, recall, MRR and AP are computed per
  ground-truth set and averaged over the sets; AP divides by the number of relevant
  passages *found*; nDCG uses all sets united.
* ``standard`` — ``trec_eval`` (``set_P``, ``set_recall``, ``ndcg_cut_3``,
  ``ndcg_cut_10``, ``recip_rank``, ``map``) with the sets united into one qrels list;
  optional grades give graded, linear-gain nDCG; a passage is relevant when its grade
  is > 0; AP divides by the number of relevant passages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["FlatIds", "RetrievalScores", "dedupe", "score_batch", "score_one"]

#: precision, recall, ndcg3, ndcg10, mrr, map.
RetrievalScores = tuple[float, float, float, float, float, float]

_ZERO: RetrievalScores = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
_CUTOFFS = (3, 10)


def dedupe(ids: Sequence[int]) -> list[int]:
    """``ids`` without repeats, each at its first (best) rank."""
    if len(set(ids)) == len(ids):
        return list(ids)
    return list(dict.fromkeys(ids))


def _discount(rank: int) -> float:
    """1 / log2(rank + 2) for a 0-based rank."""
    return 1.0 / math.log2(rank + 2)


def _ndcg(gains: Sequence[float], ideal: Sequence[float], k: int) -> float:
    dcg = sum(gain * _discount(rank) for rank, gain in enumerate(gains[:k]) if gain)
    idcg = sum(gain * _discount(rank) for rank, gain in enumerate(ideal[:k]))
    if idcg <= 0:
        return 0.0
    return min(1.0, dcg / idcg)


def _binary_set_scores(ids: Sequence[int], relevant: set[int], *, ap_by_found: bool) -> list[float]:
    """precision, recall, mrr, ap of ``ids`` against one relevant set."""
    hit_ranks = [rank for rank, pid in enumerate(ids) if pid in relevant]
    if not ids or not hit_ranks:
        return [0.0, 0.0, 0.0, 0.0]
    precision = len(hit_ranks) / len(ids)
    recall = len(hit_ranks) / len(relevant)
    mrr = 1.0 / (hit_ranks[0] + 1)
    ap_sum = sum((found + 1) / (rank + 1) for found, rank in enumerate(hit_ranks))
    ap = ap_sum / (len(hit_ranks) if ap_by_found else len(relevant))
    return [precision, recall, mrr, ap]


def score_one(
    ids: Sequence[int],
    gt: Sequence[Sequence[int]],
    *,
    profile: str,
    grades: Mapping[int, float] | None = None,
) -> RetrievalScores:
    """The six retrieval metrics of one sample (``ids`` already deduplicated)."""
    sets = [set(group) for group in gt]
    united: set[int] = set().union(*sets)
    if profile == "weknora":
        if not sets or not ids:
            return _ZERO
        per_set = [_binary_set_scores(ids, group, ap_by_found=True) for group in sets]
        precision, recall, mrr, ap = (
            sum(column) / len(sets) for column in zip(*per_set, strict=True)
        )
        gains = [1.0 if pid in united else 0.0 for pid in ids]
        ideal = [1.0] * len(united)
    else:
        grade_of = {pid: 1.0 for pid in united}
        if grades:
            grade_of.update(grades)
        relevant = {pid for pid, grade in grade_of.items() if grade > 0}
        precision, recall, mrr, ap = _binary_set_scores(ids, relevant, ap_by_found=False)
        # nDCG is scale-invariant: grades divided by the largest one keep DCG and IDCG
        # finite (grades near the float maximum would overflow their sums to inf/inf).
        top = max(grade_of.values(), default=0.0)
        scale = top if top > 0 else 1.0
        gains = [max(grade_of.get(pid, 0.0), 0.0) / scale for pid in ids]
        ideal = sorted((grade_of[pid] / scale for pid in relevant), reverse=True)
    ndcg3, ndcg10 = (_ndcg(gains, ideal, k) for k in _CUTOFFS)
    return (precision, recall, ndcg3, ndcg10, mrr, ap)


# ---------------------------------------------------------------------------------
# The numpy path.
#
# Samples are processed in chunks laid out "transposed": one row per rank (or GT
# position), one column per sample. Every step is then an elementwise operation over
# a long contiguous row of samples (numpy's reductions along a short per-sample axis
# pay a per-row overhead), and a chunk is sized so that its few (width x samples)
# arrays stay in the CPU cache: measured on 100,000 x 10, chunks of 2**16 cells run
# the whole path 2.2x faster than chunks of 2**21 cells.

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Cells (width x samples) of one chunk's arrays.
_CHUNK_CELLS = 1 << 16
#: Up to this width, repeats are found by comparing every pair of ranks (w(w-1)/2
#: elementwise passes); wider lists sort each sample instead.
_PAIRWISE_MAX_WIDTH = 16


class FlatIds:
    """Many id lists as one int64 array plus the length of each list."""

    __slots__ = ("lengths", "offsets", "values")

    def __init__(self, values: IntArray, lengths: IntArray) -> None:
        self.values = values
        self.lengths = lengths
        self.offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.offsets[1:])

    def transposed(self, start: int, stop: int) -> tuple[IntArray, BoolArray]:
        """Lists ``start:stop`` as a (position x list) matrix and its validity mask.

        Cells past a list's end are invalid; their value is another cell's (never
        read without the mask).
        """
        lengths = self.lengths[start:stop]
        count = len(lengths)
        width = int(lengths.max()) if count else 0
        first, last = int(self.offsets[start]), int(self.offsets[stop])
        if last - first == width * count:  # rectangular: a transposed copy is all it takes
            matrix = np.ascontiguousarray(self.values[first:last].reshape(count, width).T)
            return matrix, np.ones((width, count), dtype=bool)
        matrix = np.empty((width, count), dtype=np.int64)
        valid = np.empty((width, count), dtype=bool)
        # One gather per position: cheaper than scattering through a boolean mask.
        cells = self.offsets[start:stop].copy()
        end = max(last - 1, 0)
        for position in range(width):
            np.greater(lengths, position, out=valid[position])
            np.take(self.values, np.minimum(cells, end), out=matrix[position])
            cells += 1
        return matrix, valid


def _repeats(matrix: IntArray, valid: BoolArray) -> BoolArray:
    """Cells (position x sample) equal to a valid cell earlier in the same sample."""
    width, count = matrix.shape
    repeated = np.zeros((width, count), dtype=bool)
    if width < 2 or count == 0:
        return repeated
    if width <= _PAIRWISE_MAX_WIDTH:
        equal = np.empty(count, dtype=bool)
        for later in range(1, width):
            for earlier in range(later):
                np.equal(matrix[earlier], matrix[later], out=equal)
                repeated[later] |= equal
        # Valid cells form a prefix, so a valid cell's earlier cells are valid too.
        repeated &= valid
        return repeated
    # Wide lists: sort each sample's values (stably: among equal values the earliest
    # position comes first; invalid cells, zeroed, follow every valid zero because
    # valid cells form a prefix); a valid cell equal to its valid predecessor in that
    # order is a repeat.
    rows, rows_valid = matrix.T, valid.T
    keys = np.where(rows_valid, rows, 0)
    by_value = np.argsort(keys, axis=1, kind="stable")
    ordered = np.take_along_axis(keys, by_value, axis=1)
    ordered_valid = np.take_along_axis(rows_valid, by_value, axis=1)
    repeat_in_order = np.zeros_like(rows_valid)
    repeat_in_order[:, 1:] = (ordered[:, 1:] == ordered[:, :-1]) & ordered_valid[:, 1:]
    repeated_rows = np.zeros_like(rows_valid)
    np.put_along_axis(repeated_rows, by_value, repeat_in_order, axis=1)
    return np.ascontiguousarray(repeated_rows.T)


def _drop_repeats(matrix: IntArray, valid: BoolArray) -> tuple[IntArray, BoolArray]:
    """Each sample's list without repeats (first occurrence kept, order kept, moved up).

    Returns the inputs themselves when no sample has a repeat (the common case); only
    the samples that do are rewritten, on copies.
    """
    repeated = _repeats(matrix, valid)
    suspects = np.flatnonzero(repeated.any(axis=0))
    if len(suspects) == 0:
        return matrix, valid
    matrix, valid = matrix.copy(), valid.copy()
    width = matrix.shape[0]
    rows = matrix[:, suspects].T
    keep = (valid[:, suspects] & ~repeated[:, suspects]).T
    new_valid = np.arange(width) < keep.sum(axis=1)[:, None]
    compacted = np.zeros_like(rows)
    compacted[new_valid] = rows[keep]
    matrix[:, suspects] = compacted.T
    valid[:, suspects] = new_valid.T
    return matrix, valid


def score_batch(
    ids: FlatIds,
    gt: FlatIds,
    *,
    profile: str,
    grades: Sequence[Mapping[int, float] | None] | None = None,
) -> list[FloatArray]:
    """The six retrieval metrics of many samples with one ground-truth set each.

    ``ids`` holds every sample's retrieved ids (repeats are removed here, first
    occurrence kept); ``gt`` every sample's single set (empty for none). Returns six
    float arrays, one per metric, in report order.
    """
    count = len(ids.lengths)
    columns = [np.zeros(count) for _ in range(6)]
    if count == 0:
        return columns
    width = max(1, int(ids.lengths.max()), int(gt.lengths.max()))
    graded = profile == "standard" and grades is not None and any(grades)
    rows_per_chunk = max(1, _CHUNK_CELLS // width)
    for start in range(0, count, rows_per_chunk):
        stop = min(count, start + rows_per_chunk)
        ranked, ranked_valid = _drop_repeats(*ids.transposed(start, stop))
        truth, truth_valid = gt.transposed(start, stop)
        # A GT set is a set: a repeated passage counts once.
        relevant = truth_valid & ~_repeats(truth, truth_valid)
        gain = None
        if graded:
            assert grades is not None
            gain, relevant = _truth_gains(truth, relevant, grades[start:stop])
        values = _score_chunk(ranked, ranked_valid, truth, relevant, gain, profile)
        for column, value in zip(columns, values, strict=True):
            column[start:stop] = value
    return columns


def _truth_gains(
    truth: IntArray, truth_valid: BoolArray, grades: Sequence[Mapping[int, float] | None]
) -> tuple[FloatArray, BoolArray]:
    """(gain of each GT cell divided by its sample's largest grade, cell has grade > 0).

    nDCG is scale-invariant, and the division keeps every DCG sum finite: grades
    near the float maximum would overflow to inf / inf = NaN. Relevance (grade > 0)
    is read before the division, which could underflow a tiny grade to 0.
    """
    gains = truth_valid.astype(np.float64)
    for sample, mapping in enumerate(grades):
        if mapping:
            for position in np.flatnonzero(truth_valid[:, sample]).tolist():
                grade = mapping.get(int(truth[position, sample]))
                if grade is not None:
                    gains[position, sample] = max(grade, 0.0)
    relevant = gains > 0
    top = gains.max(axis=0) if len(gains) else np.ones(gains.shape[1])
    gains /= np.where(top > 0, top, 1.0)
    return gains, relevant


def _score_chunk(
    ranked: IntArray,
    ranked_valid: BoolArray,
    truth: IntArray,
    relevant_truth: BoolArray,
    truth_gain: FloatArray | None,
    profile: str,
) -> list[FloatArray]:
    """The six metrics of one chunk (all arrays position x sample).

    ``relevant_truth`` marks the relevant, distinct GT cells; ``truth_gain`` (graded
    nDCG only) their gains, scaled so that each sample's largest is 1.
    """
    width_r, samples = ranked.shape
    if width_r == 0 or truth.shape[0] == 0:
        zero = np.zeros(samples)
        return [zero, zero, zero, zero, zero, zero]
    relevant_count = relevant_truth.sum(axis=0)
    retrieved_count = ranked_valid.sum(axis=0)

    # hit[r, i]: retrieved id r of sample i is a relevant ground-truth passage.
    hit = np.zeros((width_r, samples), dtype=bool)
    gain: FloatArray | None = None if truth_gain is None else np.zeros((width_r, samples))
    equal = np.empty((width_r, samples), dtype=bool)
    for position in range(truth.shape[0]):
        np.equal(ranked, truth[position], out=equal)
        equal &= relevant_truth[position]
        hit |= equal
        if gain is not None:
            assert truth_gain is not None
            np.maximum(gain, np.where(equal, truth_gain[position], 0.0), out=gain)
    hit &= ranked_valid

    # hits_so_far rank by rank (numpy's cumsum along the short axis is ~20x slower).
    hits_so_far = np.empty((width_r, samples))
    hits_so_far[0] = hit[0]
    for rank in range(1, width_r):
        np.add(hits_so_far[rank - 1], hit[rank], out=hits_so_far[rank])
    hit_count = hits_so_far[-1]
    at_hit = hit * (1.0 / np.arange(1, width_r + 1))[:, None]  # 1 / rank at each hit
    # MRR: 1 / rank of the first hit, i.e. the largest; AP: sum of hits_so_far / rank.
    mrr = at_hit.max(axis=0)
    ap_sum = (hits_so_far * at_hit).sum(axis=0)
    # A hit implies at least one id retrieved and one relevant passage: no 0 / 0.
    precision = hit_count / np.maximum(retrieved_count, 1)
    recall = hit_count / np.maximum(relevant_count, 1)
    ap_denominator = hit_count if profile == "weknora" else relevant_count
    ap = ap_sum / np.maximum(ap_denominator, 1)

    if gain is None:
        gain = hit.astype(np.float64)
        ideal_gain = None
    else:
        gain[~hit] = 0.0
        assert truth_gain is not None
        ideal_gain = -np.sort(-np.where(relevant_truth, truth_gain, 0.0), axis=0)
    ndcgs = []
    for k in _CUTOFFS:
        discount = 1.0 / np.log2(np.arange(k) + 2)
        top_k = min(k, width_r)
        dcg = (gain[:top_k] * discount[:top_k, None]).sum(axis=0)
        if ideal_gain is None:
            # Binary: the ideal list puts min(|G|, k) relevant passages first.
            cumulative = np.concatenate(([0.0], np.cumsum(discount)))
            idcg = cumulative[np.minimum(relevant_count, k)]
        else:
            top_ideal = min(k, len(ideal_gain))
            idcg = (ideal_gain[:top_ideal] * discount[:top_ideal, None]).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ndcgs.append(np.where(idcg > 0, np.minimum(dcg / idcg, 1.0), 0.0))
    return [precision, recall, ndcgs[0], ndcgs[1], mrr, ap]
