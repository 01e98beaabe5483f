"""The paired statistics: sign-flip p-values, bootstrap intervals, Holm and max-T."""

from __future__ import annotations

import random

import pytest

from pytest_ragev.gate import (
    decision_band,
    holm,
    maxt_columns,
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
    # 2**5 assignments are fewer than the resamples: all of them, so the p is exact.
    assert stats.p_lower == pytest.approx(exact, abs=1e-12)
    assert stats.resamples == 31  # the assignments other than the observed one


def test_many_changed_questions_are_resampled_not_enumerated() -> None:
    diffs = [(-1) ** i * 0.01 * (i % 7) - 0.002 for i in range(40)]
    stats = paired_stats({"m": ([0.5] * 40, [0.5 + d for d in diffs])}, resamples=3000)["m"]
    assert stats.resamples == 3000


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


# --------------------------------------------------------------- shortcut and sizing


def test_identical_paired_scores_are_decided_without_resampling() -> None:
    values = [0.25 * (q % 5) for q in range(20_000)]
    stats = paired_stats({"m": (values, values)}, resamples=10_000, seed=3)["m"]
    assert (stats.resamples, stats.changed) == (0, 0)
    assert (stats.p_lower, stats.p_higher, stats.ci_low, stats.ci_high) == (1.0, 1.0, 0.0, 0.0)
    assert stats.n == 20_000


def test_unchanged_questions_take_no_part_in_the_resampling() -> None:
    # Five changed questions among 5,000: the p-value is the exact sign-flip p over
    # the five (2**5 assignments), as if the 4,995 zeros were not there.
    diffs = [-0.3, -0.2, -0.25, 0.05, -0.1]
    exact = sum(
        1 for mask in range(32)
        if sum(d if (mask >> i) & 1 else -d for i, d in enumerate(diffs)) <= sum(diffs) + 1e-12
    ) / 32
    before = [0.5] * 5000
    after = list(before)
    for i, d in enumerate(diffs):
        after[i * 997] = 0.5 + d
    stats = paired_stats({"m": (before, after)}, resamples=40_000, seed=5)["m"]
    assert stats.changed == 5
    assert stats.p_lower == pytest.approx(exact, abs=0.01)
    assert stats.delta == pytest.approx(sum(diffs) / 5000)
    # The bootstrap still draws 5,000 questions: the interval is that of the mean over n.
    assert stats.ci_low <= stats.delta <= stats.ci_high
    assert stats.ci_high - stats.ci_low < 0.002


def _pairs(n: int, shift: float, seed: int) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    before = [rng.random() for _ in range(n)]
    after = [min(1.0, max(0.0, b + rng.gauss(shift, 0.1))) for b in before]
    return before, after


@pytest.mark.parametrize(("shift", "worse"), [(-0.03, True), (0.0, False), (0.03, False)])
def test_early_stop_keeps_the_verdict_and_saves_resamples(shift: float, worse: bool) -> None:
    pairs = {"m": _pairs(2000, shift, seed=7)}
    full = paired_stats(pairs, resamples=10_000, seed=1)["m"]
    sized = paired_stats(pairs, resamples=10_000, seed=1,
                         decide={"m": decision_band(0.05)})["m"]
    assert full.resamples == 10_000
    # Clearly on one side of alpha: stopped at a look, with the same decision.
    assert sized.resamples < 10_000
    assert (sized.p_lower < 0.05) == (full.p_lower < 0.05) == worse
    assert (sized.p_higher < 0.05) == (full.p_higher < 0.05) == (shift > 0)
    assert sized.delta == full.delta
    # The sized bootstrap's bounds agree with the full one's to the printed digit.
    assert sized.ci_low == pytest.approx(full.ci_low, abs=1e-3)
    assert sized.ci_high == pytest.approx(full.ci_high, abs=1e-3)


def test_a_p_value_near_alpha_is_resampled_in_full() -> None:
    # Search a shift whose full-resampling p sits at alpha: no early look can be sure.
    for step in range(40):
        pairs = {"m": _pairs(400, -0.0005 * step, seed=2)}
        full = paired_stats(pairs, resamples=4000, seed=1)["m"]
        if 0.035 < full.p_lower < 0.065:
            break
    else:
        raise AssertionError("no shift put p near alpha")
    sized = paired_stats(pairs, resamples=4000, seed=1, decide={"m": decision_band(0.05)})["m"]
    assert sized.resamples == 4000
    assert sized.p_lower == full.p_lower


def test_decision_band_under_holm_and_two_sided() -> None:
    assert decision_band(0.05) == (0.05, 0.05)
    assert decision_band(0.05, 10) == pytest.approx((0.005, 0.05))
    assert decision_band(0.1, two_sided=True) == pytest.approx((0.05, 0.05))


def test_maxt_columns_early_stop_keeps_rejections() -> None:
    import numpy as np

    rng = np.random.default_rng(5)
    # Columns: a clear worsening, noise, a column of zeros.
    matrix = np.stack([rng.normal(0.02, 0.1, 3000), rng.normal(0.0, 0.1, 3000),
                       np.zeros(3000)], axis=1)
    full = maxt_columns(matrix, resamples=8000, seed=2)
    sized = maxt_columns(matrix, resamples=8000, seed=2, decide=(0.05, 0.05))
    assert full[2] == sized[2] == 1.0
    # Few questions: every sign assignment, the exact adjusted p (one metric: its own p).
    few = maxt_columns(np.array([[0.3], [0.2], [0.25], [-0.05], [0.1]]), resamples=8000, seed=0)
    assert few[0] == pytest.approx(2 / 32)
    assert list(full < 0.05) == list(sized < 0.05) == [True, False, False]
    # Stopped early: its p-values are counted over fewer flips, so they are coarser.
    assert sized[0] > full[0]


def test_interval_expansion_matches_the_drawn_bootstrap_for_many_changes() -> None:
    # 20,000 changed questions x 10,000 draws is past the drawn-bootstrap budget: the
    # interval then comes from the Cornish-Fisher expansion, which must sit on the
    # drawn bootstrap's bounds well within the printed digit.
    before, after = _pairs(20_000, -0.002, seed=9)
    drawn = paired_stats({"m": (before, after)}, resamples=1000, seed=1)["m"]
    expanded = paired_stats({"m": (before, after)}, resamples=10_000, seed=1,
                            decide={"m": decision_band(0.05)})["m"]
    assert expanded.ci_low == pytest.approx(drawn.ci_low, abs=2e-4)
    assert expanded.ci_high == pytest.approx(drawn.ci_high, abs=2e-4)
