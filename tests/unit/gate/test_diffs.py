"""The most regressed questions and the variants table."""

from __future__ import annotations

import math

import pytest

from pytest_ragev.gate import (
    compare_variants,
    top_regressions,
)
from tests.unit.gate._runs import FAST, make_run, noisy


def test_top_regressions_ranks_and_carries_the_diff() -> None:
    before = make_run(
        {"recall": {1: 1.0, 2: 1.0, 3: 0.5, 4: 0.0}, "bleu4": {1: 0.5, 2: 0.5, 3: 0.5, 4: 0.2}},
        retrieved={1: [1, 7], 2: [2], 3: [3], 4: [9]},
        answers={1: "Paris", 2: "Berlin"},
    )
    after = make_run(
        {"recall": {1: 0.0, 2: 0.5, 3: 0.5, 4: 1.0}, "bleu4": {1: 0.1, 2: 0.5, 3: 0.6, 4: 0.2}},
        retrieved={1: [7, 8], 2: [2], 3: [3], 4: [4]},
        answers={1: "Lyon", 2: "Berlin"},
    )
    diffs = top_regressions(before, after, n=10)
    assert [d.qid for d in diffs] == [1, 2]
    first = diffs[0]
    assert first.worsening == pytest.approx(1.4)
    assert first.metrics["recall"].delta == pytest.approx(-1.0)
    assert (first.retrieved_before, first.retrieved_after) == ([1, 7], [7, 8])
    assert 1 in first.relevant and 7 not in first.relevant
    assert (first.answer_before, first.answer_after) == ("Paris", "Lyon")
    assert [d.qid for d in top_regressions(before, after, n=1)] == [1]
    assert [d.qid for d in top_regressions(before, after, n=5, metric="bleu4")] == [1]
    assert top_regressions(before, after, n=0) == []


def test_new_error_ranks_first_and_lower_metrics_rank_by_rise() -> None:
    before = make_run({"latency": {1: 1.0, 2: 1.0, 3: 1.0}}, directions={"latency": "lower"})
    after = make_run(
        {"latency": {1: 1.5, 2: 0.5, 3: 1.0}},
        directions={"latency": "lower"},
        errors={3: "TimeoutError: pipeline took too long"},
    )
    diffs = top_regressions(before, after)
    assert [d.qid for d in diffs] == [3, 1]
    assert math.isinf(diffs[0].worsening) and diffs[0].error_after is not None





def test_compare_variants_marks_significant_cells() -> None:
    base_scores, better_scores = noisy(200, +0.1, seed=5, sd=0.02)
    _, same_scores = noisy(200, 0.0, seed=5, sd=0.02)
    base = make_run({"recall": base_scores, "mrr": base_scores},
                    params={"pipeline": {"top_k": 5, "chunk": 256}})
    better = make_run({"recall": better_scores, "mrr": same_scores}, variant="k10",
                      params={"pipeline": {"top_k": 10, "chunk": 256}})
    table = compare_variants(base, [better], FAST)
    assert table.metrics == ["recall", "mrr"]
    row = table.rows[0]
    assert row.name == "k10" and row.changed_knobs == ["pipeline.top_k"]
    assert row.cells["recall"].significant and row.cells["recall"].marker == "▲"
    assert row.cells["recall"].delta == pytest.approx(0.1, abs=0.01)
    assert table.base.cells["recall"].mean == base.summary["recall"].mean
    worse = compare_variants(better, [make_run({"recall": base_scores}, variant="b")], FAST)
    assert worse.rows[0].cells["recall"].marker == "▼"
