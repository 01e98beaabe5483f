"""The paired statistics: sign-flip p-values, bootstrap intervals, Holm and max-T."""

from __future__ import annotations

import random

import pytest

from pytest_ragev.gate import (
    holm,
    paired_stats,
    step_down_maxt,
)
from tests.unit.gate._runs import noisy


def test_p_value_is_deterministic_and_independent_of_other_metrics() -> None:
    base, cur = noisy(200, -0.02, seed=3)
    a = [base[q] for q in range(200)]
    b = [cur[q] for q in range(200)]
    alone = paired_stats({"recall": (a, b)}, resamples=3000, seed=11)["recall"]
    again = paired_stats({"recall": (a, b)}, resamples=3000, seed=11)["recall"]
    with_other = paired_stats(
        {"x": (b, a), "recall": (a, b), "y": (a[:50], b[:50])}, resamples=3000, seed=11
    )["recall"]
    assert alone == again
    # Other metrics share the matrix product: p-values are identical, interval bounds
    # may differ in the last bit of a float (BLAS sums in blocks of another shape).
    assert (with_other.p_lower, with_other.p_higher) == (alone.p_lower, alone.p_higher)
    assert with_other.ci_low == pytest.approx(alone.ci_low, abs=1e-12)
    assert with_other.ci_high == pytest.approx(alone.ci_high, abs=1e-12)
    other_seed = paired_stats({"recall": (a, b)}, resamples=3000, seed=12)["recall"]
    assert other_seed.p_lower != alone.p_lower


def test_paired_stats_sees_a_clear_drop_and_brackets_it() -> None:
    base, cur = noisy(300, -0.05, seed=1, sd=0.05)
    stats = paired_stats(
        {"m": ([base[q] for q in range(300)], [cur[q] for q in range(300)])}, resamples=4000
    )["m"]
    assert stats.delta == pytest.approx(stats.current_mean - stats.baseline_mean)
    assert stats.ci_low < stats.delta < stats.ci_high < 0
    assert stats.p_lower < 0.001 < 0.99 < stats.p_higher
    assert stats.ci_level == pytest.approx(0.9)


def test_identical_runs_are_unchanged_with_p_one() -> None:
    values = [0.1 * (q % 10) for q in range(50)]
    stats = paired_stats({"m": (values, values)}, resamples=1000)["m"]
    assert stats.p_lower == stats.p_higher == 1.0
    assert stats.ci_low == stats.ci_high == 0.0


def test_sign_flip_p_value_matches_exact_enumeration() -> None:
    # Five differences: the exact one-sided p over all 2**5 sign flips is computable.
    diffs = [-0.3, -0.2, -0.25, 0.05, -0.1]
    observed = sum(diffs)
    flips = [
        sum(d if (mask >> i) & 1 else -d for i, d in enumerate(diffs)) for mask in range(32)
    ]
    exact = sum(1 for f in flips if f <= observed + 1e-12) / 32
    stats = paired_stats({"m": ([0.0] * 5, diffs)}, resamples=40_000, seed=5)["m"]
    assert stats.p_lower == pytest.approx(exact, abs=0.01)



def test_holm_adjusted_p_values() -> None:
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03})
    # sorted: a (x3) 0.03; c (x2) 0.06; b (x1) 0.04, raised to the running max 0.06
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.5, "b": 0.6}) == {"a": 1.0, "b": 1.0}
    assert holm({"only": 0.02}) == {"only": 0.02}
    assert holm({}) == {}



def test_step_down_maxt_properties() -> None:
    rng = random.Random(3)
    diffs = {f"m{i}": {q: rng.gauss(-0.02 * i, 0.1) for q in range(80)} for i in range(6)}
    diffs["flat"] = dict.fromkeys(range(80), 0.0)
    signs = {name: -1.0 for name in diffs}
    adjusted = step_down_maxt(diffs, signs, resamples=4000, seed=1)
    raw = {n: paired_stats({n: ([0.0] * 80, list(d.values()))}, resamples=4000)[n].p_lower
           for n, d in diffs.items() if n != "flat"}
    assert adjusted["flat"] == 1.0
    # Never below the metric's own p (up to Monte-Carlo error), never above Bonferroni.
    for name, p in raw.items():
        assert adjusted[name] >= p - 0.01
        assert adjusted[name] <= min(1.0, 6 * p) + 0.01
    # Step-down order: a more extreme metric never gets a larger adjusted p.
    ranked = sorted(raw, key=raw.__getitem__)
    assert [adjusted[n] for n in ranked] == sorted(adjusted[n] for n in ranked)
    assert step_down_maxt(diffs, signs, resamples=4000, seed=1) == adjusted  # reproducible
