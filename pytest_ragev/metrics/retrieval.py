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


def _first_occurrence(matrix: IntArray, valid: BoolArray) -> BoolArray:
    """Valid cells whose value does not occur earlier in the row."""
    width = matrix.shape[1]
    if width < 2:
        return valid
    if len(matrix) and int(matrix.max()) < _PAD_LIMIT:
        # Cheap screen: sort each row, padding replaced by values above the row's
        # maximum (distinct per column), and look for equal neighbours.
        filler = matrix.max(axis=1, keepdims=True) + 1 + np.arange(width)
        ordered = np.sort(np.where(valid, matrix, filler), axis=1)
        suspects = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if len(suspects) == 0:
            return valid
    else:
        suspects = np.arange(len(matrix))
    rows, row_valid = matrix[suspects], valid[suspects]
    earlier = np.tri(width, width, -1, dtype=bool).T  # [j, k] = j < k
    equal = rows[:, :, None] == rows[:, None, :]
    repeated = (equal & row_valid[:, :, None] & earlier[None, :, :]).any(axis=1)
    keep = valid.copy()
    keep[suspects] = row_valid & ~repeated
    return keep


def _compact(matrix: IntArray, keep: BoolArray) -> tuple[IntArray, BoolArray]:
    """Shift the kept cells of each row to the left, preserving their order."""
    counts = keep.sum(axis=1)
    new_valid = np.arange(matrix.shape[1]) < counts[:, None]
    compacted = np.zeros_like(matrix)
    compacted[new_valid] = matrix[keep]
    return compacted, new_valid


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
    rows_per_chunk = max(1, _CHUNK_CELLS // max(1, width_r * max(width_g, 1)))
    for start in range(0, count, rows_per_chunk):
        stop = min(count, start + rows_per_chunk)
        retrieved, retrieved_valid = ids.padded(start, stop)
        truth, truth_valid = gt.padded(start, stop)
        keep = _first_occurrence(retrieved, retrieved_valid)
        if keep is not retrieved_valid and not np.array_equal(keep, retrieved_valid):
            retrieved, retrieved_valid = _compact(retrieved, keep)
        truth_valid = _first_occurrence(truth, truth_valid)
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
    (graded nDCG only) their gains, scaled so that each row's largest is 1."""
    rows, width_r = retrieved.shape
    relevant_count = relevant_truth.sum(axis=1)
    retrieved_count = retrieved_valid.sum(axis=1)
    if width_r == 0 or truth.shape[1] == 0:
        zero = np.zeros(rows)
        return [zero, zero, zero, zero, zero, zero]

    # match[i, r, g]: retrieved id r of sample i is relevant ground-truth passage g.
    match = retrieved[:, :, None] == truth[:, None, :]
    match &= relevant_truth[:, None, :]
    hit = match.any(axis=2) & retrieved_valid
    if truth_gain is None:
        gain = hit.astype(np.float64)
        ideal_gain = None
    else:
        gain = np.where(hit, (match * truth_gain[:, None, :]).max(axis=2), 0.0)
        ideal_gain = -np.sort(-np.where(relevant_truth, truth_gain, 0.0), axis=1)

    hits_so_far = np.cumsum(hit, axis=1)
    hit_count = hits_so_far[:, -1]
    found = hit_count > 0
    safe_hits = np.maximum(hit_count, 1)
    precision = np.where(found, hit_count / np.maximum(retrieved_count, 1), 0.0)
    recall = np.where(found, hit_count / np.maximum(relevant_count, 1), 0.0)
    mrr = np.where(found, 1.0 / (np.argmax(hit, axis=1) + 1), 0.0)
    ap_sum = (np.where(hit, hits_so_far, 0) / np.arange(1, width_r + 1)).sum(axis=1)
    ap_denominator = safe_hits if profile == "weknora" else np.maximum(relevant_count, 1)
    ap = np.where(found, ap_sum / ap_denominator, 0.0)

    ndcgs = []
    for k in _CUTOFFS:
        discount = 1.0 / np.log2(np.arange(k) + 2)
        dcg = gain[:, :k] @ discount[: min(k, width_r)]
        if ideal_gain is None:
            # Binary: the ideal list puts min(|G|, k) relevant passages first.
            cumulative = np.concatenate(([0.0], np.cumsum(discount)))
            idcg = cumulative[np.minimum(relevant_count, k)]
        else:
            idcg = ideal_gain[:, :k] @ discount[: min(k, ideal_gain.shape[1])]
        with np.errstate(divide="ignore", invalid="ignore"):
            ndcgs.append(np.where(idcg > 0, np.minimum(dcg / idcg, 1.0), 0.0))
    return [precision, recall, ndcgs[0], ndcgs[1], mrr, ap]
