"""Graded nDCG (standard profile) with extreme grades: never NaN, in [0, 1], exact.

Grades near the float maximum used to overflow DCG and IDCG to inf (inf / inf = NaN
on the numpy path, clamped to 1.0 on the per-sample path even for a bad order).
"""

from __future__ import annotations

import math

import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragev import RETRIEVAL_METRICS, MetricInput, score
from pytest_ragev.metrics import retrieval
from pytest_ragev.metrics._validate import flat_ids

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HUGE = 1.5e308

pids = st.integers(min_value=0, max_value=12)
# Any finite grade >= 0: zero, subnormals, ordinary values and ones near the maximum.
extreme_grades = st.one_of(
    st.just(0.0),
    st.just(5e-324),
    st.floats(min_value=0.0, max_value=1.7976931348623157e308, allow_nan=False),
    st.sampled_from([HUGE, 1.7976931348623157e308, 1e300]),
)


@st.composite
def graded_cases(
    draw: st.DrawFn, grade_values: st.SearchStrategy[float]
) -> tuple[list[int], list[int], dict[int, float]]:
    gt = draw(st.lists(pids, min_size=1, max_size=8, unique=True))
    ids = draw(st.lists(pids, max_size=14))
    graded = draw(st.lists(st.sampled_from(gt), unique=True))
    grades = {pid: draw(grade_values) for pid in graded}
    return gt, ids, grades


def _ndcgs(gt: list[int], ids: list[int], grades: dict[int, float]) -> list[tuple[float, ...]]:
    """(ndcg3, ndcg10) from the numpy path, score(), and the per-sample path."""
    sample = MetricInput([gt], ids, "", "")
    row = score([sample], profile="standard", metrics=RETRIEVAL_METRICS, grades=[grades])[0]
    one = retrieval.score_one(retrieval.dedupe(ids), [gt], profile="standard", grades=grades)
    ids_flat, gt_flat = flat_ids([ids]), flat_ids([gt])
    assert ids_flat is not None and gt_flat is not None
    batch = retrieval.score_batch(ids_flat, gt_flat, profile="standard", grades=[grades])
    return [
        (row["ndcg3"], row["ndcg10"]),
        (one[2], one[3]),
        (float(batch[2][0]), float(batch[3][0])),
    ]


@FAST
@given(graded_cases(extreme_grades))
def test_extreme_grades_never_give_nan_and_both_paths_agree(
    case: tuple[list[int], list[int], dict[int, float]],
) -> None:
    gt, ids, grades = case
    results = _ndcgs(gt, ids, grades)
    for values in results:
        for value in values:
            assert not math.isnan(value)
            assert 0.0 <= value <= 1.0
    for values in results[1:]:
        assert values == pytest.approx(results[0], abs=1e-12)


@FAST
@given(graded_cases(st.integers(min_value=0, max_value=5).map(float)), st.integers(0, 1020))
def test_graded_ndcg_is_scale_invariant_and_equals_pytrec_eval(
    case: tuple[list[int], list[int], dict[int, float]], exponent: int
) -> None:
    gt, ids, grades = case
    qrels = {"q": {str(pid): int(grades.get(pid, 1)) for pid in gt}}
    ranking = list(dict.fromkeys(ids))
    run = {"q": {str(pid): float(len(ranking) - rank) for rank, pid in enumerate(ranking)}}
    if not ranking:
        run = {"q": {"-1": 1.0}}  # pytrec_eval skips a query without a ranking
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_3", "ndcg_cut_10"}).evaluate(run)["q"]
    expected = (trec["ndcg_cut_3"], trec["ndcg_cut_10"])
    # Times a power of two: exact in binary, up to grades of 5 * 2**1020 (near the max).
    scaled = {pid: grade * 2.0**exponent for pid, grade in grades.items()}
    scaled.update({pid: 2.0**exponent for pid in gt if pid not in grades})
    for values in _ndcgs(gt, ids, grades) + _ndcgs(gt, ids, scaled):
        assert values == pytest.approx(expected, abs=1e-9)


def test_huge_equal_grades_in_ideal_order_score_one_and_in_bad_order_less() -> None:
    ideal = MetricInput([[1, 2]], [1, 2], "", "")
    worse = MetricInput([[1, 2]], [2, 9, 1], "", "")
    rows = score(
        [ideal, worse, worse],
        profile="standard",
        metrics=RETRIEVAL_METRICS,
        grades=[{1: HUGE, 2: HUGE}, {1: HUGE, 2: 1.0}, {1: 2.0, 2: 1.0}],
    )
    assert rows[0]["ndcg3"] == rows[0]["ndcg10"] == 1.0
    # Passage 2 (grade ~0) first, passage 1 at rank 3: DCG = 1/log2(4) of IDCG = 1.
    assert rows[1]["ndcg3"] == pytest.approx(0.5, abs=1e-12)
    assert rows[2]["ndcg3"] == pytest.approx((1 + 2 * 0.5) / (2 + 1 / math.log2(3)), abs=1e-12)
    for sample, grades in ((ideal, {1: HUGE, 2: HUGE}), (worse, {1: HUGE, 2: 1.0})):
        one = retrieval.score_one(sample.retrieval_ids, sample.retrieval_gt, profile="standard",
                                  grades=grades)  # fmt: skip
        assert one[2] == pytest.approx(1.0 if sample is ideal else 0.5, abs=1e-12)
