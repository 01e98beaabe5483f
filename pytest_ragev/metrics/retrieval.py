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

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Cells of the (rows x retrieved x ground truth) comparison cube per chunk.
_CHUNK_CELLS = 1 << 21
#: Padding values are made from the row maximum; ids this close to 2**63 take the cube.
_PAD_LIMIT = np.iinfo(np.int64).max - (1 << 20)


class FlatIds:
    """Many id lists as one int64 array plus the length of each list."""

    __slots__ = ("lengths", "offsets", "values")

    def __init__(self, values: IntArray, lengths: IntArray) -> None:
        self.values = values
        self.lengths = lengths
        self.offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.offsets[1:])

    def padded(self, start: int, stop: int) -> tuple[IntArray, BoolArray]:
        """Rows ``start:stop`` as a zero-padded matrix and its validity mask."""
        lengths = self.lengths[start:stop]
        width = int(lengths.max()) if len(lengths) else 0
        values = self.values[self.offsets[start] : self.offsets[stop]]
        if len(values) == width * len(lengths):  # rectangular: no scatter needed
            return values.reshape(len(lengths), width), np.ones((len(lengths), width), bool)
        valid = np.arange(width) < lengths[:, None]
        matrix = np.zeros((len(lengths), width), dtype=np.int64)
        matrix[valid] = values
        return matrix, valid


def _dedupe_rows(matrix: IntArray, valid: BoolArray) -> tuple[IntArray, BoolArray]:
    """Each row without repeats (first occurrence kept, order kept, shifted left).

    Returns the inputs themselves when no row has a repeat (the common case); only
    the rows that do are rewritten, on copies.
    """
    count, width = matrix.shape
    if width < 2 or count == 0:
        return matrix, valid
    top = int(matrix.max())
    if top < _PAD_LIMIT:
        # Cheap screen: sort each row, padding replaced by values above every value
        # (distinct per column), and look for equal neighbours.
        if valid.all():
            ordered = np.sort(matrix, axis=1)
        else:
            filler = np.arange(top + 1, top + 1 + width, dtype=np.int64)
            ordered = np.sort(np.where(valid, matrix, filler), axis=1)
        equal_cells = np.flatnonzero(ordered[:, 1:] == ordered[:, :-1])
        if len(equal_cells) == 0:
            return matrix, valid
        suspects = np.unique(equal_cells // (width - 1))
    else:
        suspects = np.arange(count)
    matrix, valid = matrix.copy(), valid.copy()
    earlier = np.tri(width, width, -1, dtype=bool).T  # [j, k] = j < k
    step = max(1, _CHUNK_CELLS // (width * width))  # bounds the comparison cube
    for first in range(0, len(suspects), step):
        chosen = suspects[first : first + step]
        rows, row_valid = matrix[chosen], valid[chosen]
        equal = rows[:, :, None] == rows[:, None, :]
        repeated = (equal & row_valid[:, :, None] & earlier[None, :, :]).any(axis=1)
        keep = row_valid & ~repeated
        # Shift the kept cells of each row to the left, preserving their order.
        new_valid = np.arange(width) < keep.sum(axis=1)[:, None]
        compacted = np.zeros_like(rows)
        compacted[new_valid] = rows[keep]
        matrix[chosen] = compacted
        valid[chosen] = new_valid
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
    width_r = int(ids.lengths.max())
    width_g = int(gt.lengths.max())
    graded = profile == "standard" and grades is not None and any(grades)
    # The kernel holds a few (width x rows) arrays at a time; no 3-d cube.
    rows_per_chunk = max(1, _CHUNK_CELLS // max(1, width_r, width_g))
    for start in range(0, count, rows_per_chunk):
        stop = min(count, start + rows_per_chunk)
        retrieved, retrieved_valid = ids.padded(start, stop)
        truth, truth_valid = gt.padded(start, stop)
        retrieved, retrieved_valid = _dedupe_rows(retrieved, retrieved_valid)
        # A GT set's repeats are dropped the same way (a set is a set).
        truth, truth_valid = _dedupe_rows(truth, truth_valid)
        gain = None
        relevant = truth_valid
        if graded:
            assert grades is not None
            gain, relevant = _truth_gains(truth, truth_valid, grades[start:stop])
        values = _score_matrices(retrieved, retrieved_valid, truth, relevant, gain, profile)
        for column, value in zip(columns, values, strict=True):
            column[start:stop] = value
    return columns


def _truth_gains(
    truth: IntArray, truth_valid: BoolArray, grades: Sequence[Mapping[int, float] | None]
) -> tuple[FloatArray, BoolArray]:
    """(gain of each GT cell divided by its row's largest grade, cell has grade > 0).

    nDCG is scale-invariant, and the division keeps every DCG sum finite: grades
    near the float maximum would overflow to inf / inf = NaN. Relevance (grade > 0)
    is read before the division, which could underflow a tiny grade to 0.
    """
    gains = truth_valid.astype(np.float64)
    for row, mapping in enumerate(grades):
        if mapping:
            for col in np.flatnonzero(truth_valid[row]).tolist():
                grade = mapping.get(int(truth[row, col]))
                if grade is not None:
                    gains[row, col] = max(grade, 0.0)
    relevant = gains > 0
    top = gains.max(axis=1, keepdims=True) if gains.shape[1] else np.ones((len(gains), 1))
    gains /= np.where(top > 0, top, 1.0)
    return gains, relevant


def _score_matrices(
    retrieved: IntArray,
    retrieved_valid: BoolArray,
    truth: IntArray,
    relevant_truth: BoolArray,
    truth_gain: FloatArray | None,
    profile: str,
) -> list[FloatArray]:
    """The six metrics; ``relevant_truth`` marks the relevant GT cells, ``truth_gain``
    (graded nDCG only) their gains, scaled so that each row's largest is 1.

    The work runs on transposed (rank x sample) arrays: every step is then an
    elementwise operation over long contiguous rows of samples, where reductions
    along a short per-sample axis would pay numpy's per-row overhead.
    """
    rows, width_r = retrieved.shape
    if width_r == 0 or truth.shape[1] == 0:
        zero = np.zeros(rows)
        return [zero, zero, zero, zero, zero, zero]
    ranked = np.ascontiguousarray(retrieved.T)  # [rank, sample]
    ranked_valid = np.ascontiguousarray(retrieved_valid.T)
    truth_t = np.ascontiguousarray(truth.T)  # [gt position, sample]
    relevant_t = np.ascontiguousarray(relevant_truth.T)
    relevant_count = relevant_t.sum(axis=0)
    retrieved_count = ranked_valid.sum(axis=0)

    # hit[r, i]: retrieved id r of sample i is a relevant ground-truth passage.
    hit = np.zeros((width_r, rows), dtype=bool)
    gain: FloatArray | None = None if truth_gain is None else np.zeros((width_r, rows))
    gain_t = None if truth_gain is None else np.ascontiguousarray(truth_gain.T)
    equal = np.empty((width_r, rows), dtype=bool)
    for position in range(truth_t.shape[0]):
        np.equal(ranked, truth_t[position], out=equal)
        equal &= relevant_t[position]
        hit |= equal
        if gain is not None:
            assert gain_t is not None
            np.maximum(gain, np.where(equal, gain_t[position], 0.0), out=gain)
    hit &= ranked_valid

    # hits_so_far rank by rank (numpy's cumsum along the short axis is ~20x slower).
    hits_so_far = np.empty((width_r, rows))
    hits_so_far[0] = hit[0]
    for rank in range(1, width_r):
        np.add(hits_so_far[rank - 1], hit[rank], out=hits_so_far[rank])
    hit_count = hits_so_far[-1]
    at_hit = hit * (1.0 / np.arange(1, width_r + 1))[:, None]  # 1 / rank at each hit
    # MRR: 1 / rank of the first hit, i.e. the largest; AP: Σ hits_so_far / rank.
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
        ideal = -np.sort(-np.where(relevant_truth, truth_gain, 0.0), axis=1)
        ideal_gain = np.ascontiguousarray(ideal.T)  # [ideal rank, sample]
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
