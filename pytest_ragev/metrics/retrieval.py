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

__all__ = ["RetrievalScores", "dedupe", "score_batch", "score_one"]

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
        gains = [max(grade_of.get(pid, 0.0), 0.0) for pid in ids]
        ideal = sorted((grade_of[pid] for pid in relevant), reverse=True)
    ndcg3, ndcg10 = (_ndcg(gains, ideal, k) for k in _CUTOFFS)
    return (precision, recall, ndcg3, ndcg10, mrr, ap)


# ---------------------------------------------------------------------------------
# The numpy path.

IntMatrix = npt.NDArray[np.int64]
FloatMatrix = npt.NDArray[np.float64]
BoolMatrix = npt.NDArray[np.bool_]

#: Cells of the (rows x retrieved x ground truth) comparison cube per chunk.
_CHUNK_CELLS = 1 << 22


def _pad(lists: Sequence[Sequence[int]], width: int) -> tuple[IntMatrix, BoolMatrix]:
    """Row-padded int64 matrix of ``lists`` and its validity mask."""
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    total = int(lengths.sum())
    matrix = np.zeros((len(lists), width), dtype=np.int64)
    valid = np.arange(width) < lengths[:, None]
    if total:
        flat = np.fromiter((value for row in lists for value in row), dtype=np.int64, count=total)
        matrix[valid] = flat
    return matrix, valid


def _first_occurrence(matrix: IntMatrix, valid: BoolMatrix) -> BoolMatrix:
    """Valid cells whose value does not occur earlier in the row."""
    width = matrix.shape[1]
    if width < 2:
        return valid.copy()
    equal = matrix[:, :, None] == matrix[:, None, :]
    earlier = np.tri(width, width, -1, dtype=bool).T  # [j, k] = j < k
    repeated: BoolMatrix = (equal & valid[:, :, None] & earlier[None, :, :]).any(axis=1)
    return valid & ~repeated


def _compact(matrix: IntMatrix, keep: BoolMatrix) -> tuple[IntMatrix, BoolMatrix]:
    """Shift the kept cells of each row to the left, preserving their order."""
    counts = keep.sum(axis=1)
    new_valid = np.arange(matrix.shape[1]) < counts[:, None]
    compacted = np.zeros_like(matrix)
    compacted[new_valid] = matrix[keep]
    return compacted, new_valid


def score_batch(
    ids: Sequence[Sequence[int]],
    gt: Sequence[Sequence[int]],
    *,
    profile: str,
    grades: Sequence[Mapping[int, float] | None] | None = None,
) -> list[FloatMatrix]:
    """The six retrieval metrics of many samples with one ground-truth set each.

    ``ids[i]`` may contain repeats (removed here, first occurrence kept); ``gt[i]``
    is sample i's single set (empty for none). Returns six float arrays, one per
    metric, in report order.
    """
    n = len(ids)
    width_r = max(map(len, ids), default=0)
    width_g = max(map(len, gt), default=0)
    columns = [np.zeros(n) for _ in range(6)]
    if n == 0:
        return columns
    rows_per_chunk = max(1, _CHUNK_CELLS // max(1, width_r * max(width_r, width_g)))
    for start in range(0, n, rows_per_chunk):
        stop = min(n, start + rows_per_chunk)
        chunk_grades = grades[start:stop] if grades is not None else None
        values = _score_chunk(
            ids[start:stop], gt[start:stop], width_r, width_g, profile, chunk_grades
        )
        for column, value in zip(columns, values, strict=True):
            column[start:stop] = value
    return columns


def _score_chunk(
    ids: Sequence[Sequence[int]],
    gt: Sequence[Sequence[int]],
    width_r: int,
    width_g: int,
    profile: str,
    grades: Sequence[Mapping[int, float] | None] | None,
) -> list[FloatMatrix]:
    retrieved, retrieved_valid = _pad(ids, width_r)
    keep = _first_occurrence(retrieved, retrieved_valid)
    if not np.array_equal(keep, retrieved_valid):
        retrieved, retrieved_valid = _compact(retrieved, keep)
    truth, truth_valid = _pad(gt, width_g)
    truth_valid = _first_occurrence(truth, truth_valid)

    if profile == "standard" and grades is not None and any(grades):
        truth_gain = np.ones(truth.shape, dtype=np.float64)
        for row, mapping in enumerate(grades):
            if mapping:
                for col, pid in enumerate(gt[row]):
                    if pid in mapping:
                        truth_gain[row, col] = mapping[pid]
        truth_gain = np.where(truth_valid, np.maximum(truth_gain, 0.0), 0.0)
        relevant_truth = truth_gain > 0
    else:
        truth_gain = truth_valid.astype(np.float64)
        relevant_truth = truth_valid

    # match[i, r, g]: retrieved id r of sample i is ground-truth passage g.
    match = retrieved[:, :, None] == truth[:, None, :]
    match &= relevant_truth[:, None, :]
    match &= retrieved_valid[:, :, None]
    gain = (match * truth_gain[:, None, :]).max(axis=2) if width_g else np.zeros(retrieved.shape)
    hit = gain > 0

    retrieved_count = retrieved_valid.sum(axis=1)
    relevant_count = relevant_truth.sum(axis=1)
    hits_so_far = np.cumsum(hit, axis=1)
    hit_count = hits_so_far[:, -1] if width_r else np.zeros(len(ids), dtype=np.int64)

    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(retrieved_count > 0, hit_count / retrieved_count, 0.0)
        recall = np.where(relevant_count > 0, hit_count / relevant_count, 0.0)
        ranks = np.arange(1, width_r + 1, dtype=np.float64)
        first_hit = np.argmax(hit, axis=1) if width_r else np.zeros(len(ids), dtype=np.int64)
        mrr = np.where(hit_count > 0, 1.0 / (first_hit + 1), 0.0)
        ap_sum = (np.where(hit, hits_so_far, 0) / ranks).sum(axis=1)
        ap_denominator = hit_count if profile == "weknora" else relevant_count
        ap = np.where(hit_count > 0, ap_sum / np.maximum(ap_denominator, 1), 0.0)

        ndcgs = []
        ideal_gain = -np.sort(-truth_gain, axis=1)
        for k in _CUTOFFS:
            discount_r = 1.0 / np.log2(np.arange(min(k, width_r)) + 2)
            discount_g = 1.0 / np.log2(np.arange(min(k, width_g)) + 2)
            dcg = gain[:, : len(discount_r)] @ discount_r
            idcg = ideal_gain[:, : len(discount_g)] @ discount_g
            ndcgs.append(np.where(idcg > 0, np.minimum(dcg / idcg, 1.0), 0.0))

    return [precision, recall, ndcgs[0], ndcgs[1], mrr, ap]
