"""``score_columns``: the values of ``score`` as one array per metric; the batch kernel."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragev import METRIC_NAMES, RETRIEVAL_METRICS, MetricInput, score
from pytest_ragev.metrics import retrieval, score_columns
from pytest_ragev.metrics._validate import flat_ids

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
pids = st.integers(min_value=0, max_value=30)
texts = st.lists(
    st.sampled_from(["the", "cat", "sat", ".", "天气", "很好", "，", " "]), max_size=12
)


@st.composite
def samples(draw: st.DrawFn) -> MetricInput:
    return MetricInput(
        retrieval_gt=draw(st.lists(st.lists(pids, max_size=6), max_size=3)),
        retrieval_ids=draw(st.lists(pids, max_size=14)),
        generated_text="".join(draw(texts)),
        generated_gt=" ".join(draw(texts)),
    )


def _assert_same(columns: dict[str, np.ndarray], rows: list[dict[str, float]]) -> None:
    assert list(columns) == (list(rows[0]) if rows else list(columns))
    for name, column in columns.items():
        assert column.dtype == np.float64
        assert column.tolist() == [row[name] for row in rows], name


@FAST
@given(st.lists(samples(), max_size=8), st.sampled_from(["weknora", "standard"]), st.randoms())
def test_columns_hold_exactly_the_values_of_the_rows(
    inputs: list[MetricInput], profile: str, rng: random.Random
) -> None:
    grades = [
        {pid: float(rng.choice([0, 1, 2, 3])) for group in sample.retrieval_gt for pid in group}
        or None
        for sample in inputs
    ]
    columns = score_columns(inputs, profile=profile, grades=grades)
    rows = score(inputs, profile=profile, grades=grades)
    assert list(columns) == list(METRIC_NAMES)
    assert all(len(column) == len(inputs) for column in columns.values())
    _assert_same(columns, rows)


def test_columns_on_every_retrieval_path() -> None:
    long = [*range(700), 3, 5]  # beyond the batch width: per-sample path
    inputs = [
        MetricInput([[1, 2, 3]], [2, 5, 1, 3], "", ""),
        MetricInput([[1, 2], [3, 4]], [1, 3, 5], "", ""),  # several GT sets
        MetricInput([[2**70, 1]], [2**70, 5], "", ""),  # beyond 64 bits
        MetricInput([[5, 699]], long, "", ""),
        MetricInput([], [], "", ""),
    ]
    columns = score_columns(inputs, metrics=RETRIEVAL_METRICS)
    _assert_same(columns, score(inputs, metrics=RETRIEVAL_METRICS))
    assert columns["map"][0] == pytest.approx(0.8055555556, abs=1e-10)
    assert columns["precision"][1] == pytest.approx(1 / 3, abs=1e-12)
    assert columns["mrr"][2] == 1.0


def test_columns_options_and_errors() -> None:
    sample = MetricInput([[1]], [1], "a b", "a c")
    assert list(score_columns([sample], metrics=["rougel", "ndcg3"])) == ["ndcg3", "rougel"]
    assert score_columns([sample], metrics=[]) == {}
    empty = score_columns([])
    assert list(empty) == list(METRIC_NAMES)
    assert all(column.shape == (0,) for column in empty.values())
    with pytest.raises(TypeError, match=r"inputs\[1\]\.retrieval_ids\[0\]: .* got list"):
        score_columns([sample, MetricInput([[1]], [[1]], "", "")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="profile: unknown profile"):
        score_columns([sample], profile="trec")


class Index:
    """An integer type known only by ``__index__``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        return other == self.value


def test_index_types_are_ids_on_both_paths_and_numpy_bools_are_not() -> None:
    plain = score([MetricInput([[1, 2]], [2, 9, 1], "", "")], metrics=RETRIEVAL_METRICS)
    fast = MetricInput([[Index(1), Index(2)]], [Index(2), 9, Index(1)], "", "")  # type: ignore[list-item]
    assert score([fast], metrics=RETRIEVAL_METRICS) == plain
    # An id beyond 64 bits and two GT sets in the batch: the per-sample checks read all.
    other = MetricInput([[2**70], [1]], [2**70], "", "")
    assert score([fast, other], metrics=RETRIEVAL_METRICS)[0] == plain[0]
    for bad in (np.True_, True):
        with pytest.raises(TypeError, match=r"inputs\[0\]\.retrieval_ids\[1\]: .* got bool"):
            score([MetricInput([[1]], [1, bad], "", "")], metrics=RETRIEVAL_METRICS)  # type: ignore[list-item]


def _assert_batch_scores_like_the_reference(
    cases: list[tuple[list[int], list[int]]], profile: str, **knobs: int
) -> None:
    """score_batch with some module knobs set, against score_one sample by sample."""
    saved = {name: getattr(retrieval, name) for name in knobs}
    for name, value in knobs.items():
        setattr(retrieval, name, value)
    try:
        ids, gt = flat_ids([ids for _, ids in cases]), flat_ids([gt for gt, _ in cases])
        assert ids is not None and gt is not None
        columns = retrieval.score_batch(ids, gt, profile=profile)
    finally:
        for name, value in saved.items():
            setattr(retrieval, name, value)
    for index, (truth, ranked) in enumerate(cases):
        expected = retrieval.score_one(retrieval.dedupe(ranked), [truth], profile=profile)
        for column, want in zip(columns, expected, strict=True):
            assert math.isclose(float(column[index]), want, abs_tol=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.lists(pids, max_size=12), st.lists(pids, max_size=40)),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from(["weknora", "standard"]),
)
def test_small_chunks_score_like_the_reference_path(
    cases: list[tuple[list[int], list[int]]], profile: str
) -> None:
    # Chunks of a few rows and of a few suspect rows in the repeat search.
    _assert_batch_scores_like_the_reference(cases, profile, _CHUNK_CELLS=64)


extreme_ids = st.sampled_from([-(2**63), -7, 0, 1, 2, 2**62, 2**63 - 2, 2**63 - 1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.lists(extreme_ids, max_size=10), st.lists(extreme_ids, max_size=24)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["weknora", "standard"]),
    st.sampled_from([0, 4, 64]),
    st.sampled_from([64, 1 << 16]),
)
def test_both_repeat_searches_score_like_the_reference_path(
    cases: list[tuple[list[int], list[int]]], profile: str, pairwise_max: int, chunk_cells: int
) -> None:
    # Repeats found pair by pair (narrow lists) and by sorting (wide ones), on ids at
    # both ends of int64, where a padding value made from the data could collide.
    _assert_batch_scores_like_the_reference(
        cases, profile, _PAIRWISE_MAX_WIDTH=pairwise_max, _CHUNK_CELLS=chunk_cells
    )


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([MetricInput([[1]], [], "", ""), MetricInput([[1]], [True, 2], "", "")],
         r"inputs\[1\]\.retrieval_ids\[0\]: .* got bool"),
        ([MetricInput([[1]], [5, 0], "", ""), MetricInput([[1]], [7, 1, False], "", "")],
         r"inputs\[1\]\.retrieval_ids\[2\]: .* got bool"),
        ([MetricInput([[1]], [1], "", ""), MetricInput(((2, True),), [1], "", "")],
         r"inputs\[1\]\.retrieval_gt\[0\]: .* got bool"),
        ([MetricInput([[1]], [1], "", ""), MetricInput([{False, 5}], [1], "", "")],
         r"inputs\[1\]\.retrieval_gt\[0\]: .* got bool"),
    ],
)  # fmt: skip
def test_bools_hidden_among_zeros_and_ones_are_found(
    batch: list[MetricInput], message: str
) -> None:
    # Python bools convert to 0 and 1 in an int64 array: each 0/1 cell is traced back.
    with pytest.raises(TypeError, match=message):
        score_columns(batch, metrics=RETRIEVAL_METRICS)
    plain = [MetricInput([[0, 1]], [1, 0, 0, 5], "", ""), MetricInput([[1]], [0], "", "")]
    assert score_columns(plain, metrics=RETRIEVAL_METRICS)["precision"].tolist() == [2 / 3, 0.0]
