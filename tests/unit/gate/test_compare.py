"""A run against its baseline run: every mode, direction, tolerance and correction."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.results import RunResult
from pytest_ragev.gate import (
    GateRules,
    MetricRule,
    compare,
    paired_stats,
    step_down_maxt,
)
from pytest_ragev.gate.compare import (
    metric_direction,
    metric_order,
    power_lines,
    questions_for_drop,
)
from pytest_ragev.gate.stats import smallest_p
from tests.unit.gate._runs import FAST, METRICS, make_run, noisy, runs, twelve


def test_significant_drop_regresses_with_the_documented_line() -> None:
    before, after = runs(-0.05)
    comparison = compare(before, after, FAST)
    item = comparison.metrics[0]
    assert item.status == "regressed" and item.regressed and not comparison.passed
    assert item.n == 300 and item.p is not None and item.p < 0.001
    line = comparison.failure_lines[0]
    assert line.startswith(f"ragev: recall {item.current_mean:.3f} < baseline ")
    assert f"(Δ −{abs(item.delta or 0):.3f}, 90% CI [−" in line
    assert line.endswith(", p<0.001, n=300)")




def test_holm_correction_across_the_metrics_of_a_run() -> None:
    # A small drop whose one-sided p is about 0.015 on each of twelve metrics: significant
    # for each metric alone, not once the twelve tests are corrected together.
    before, after = twelve(-0.02, seed=4)
    alone = compare(before, after, GateRules(resamples=2000, correction="none"))
    corrected = compare(before, after, GateRules(resamples=2000, correction="holm"))
    assert {m.status for m in alone.metrics} == {"regressed"}
    assert {m.status for m in corrected.metrics} == {"not significant"}
    first = corrected.metrics[0]
    assert first.p_raw is not None and 0.01 < first.p_raw < 0.03
    assert first.p == pytest.approx(min(1.0, 12 * first.p_raw)) and first.family == 12
    assert alone.metrics[0].p == alone.metrics[0].p_raw and alone.metrics[0].family == 1
    # A large drop survives the correction, and the line says the p-value is adjusted.
    before, after = twelve(-0.1, seed=4)
    strong = compare(before, after, GateRules(resamples=2000, correction="holm"))
    assert len(strong.failure_lines) == 12
    assert strong.failure_lines[0].endswith(", p=0.006 (Holm, 12 metrics), n=200)")


def test_maxt_keeps_the_power_holm_loses_on_metrics_that_move_together() -> None:
    before, after = twelve(-0.02, seed=4)
    maxt = compare(before, after, GateRules(resamples=4000, correction="maxt"))
    assert {m.status for m in maxt.metrics} == {"regressed"}
    first = maxt.metrics[0]
    # Twelve copies of one metric: the joint maximum is the metric itself.
    assert first.p_raw is not None and first.p == pytest.approx(first.p_raw, abs=0.01)
    assert first.family == 12 and first.correction == "maxt"
    assert maxt.failure_lines[0].endswith(" (max-T, 12 metrics), n=200)")
    # max-T is the default, in code and from an empty [gate] table.
    assert GateRules().correction == "maxt"
    assert GateRules.from_table({}, source="x", metric_names=METRICS).correction == "maxt"
    default = compare(before, after, GateRules(resamples=4000))
    assert [m.p for m in default.metrics] == [m.p for m in maxt.metrics]



def test_maxt_family_wise_false_alarms_stay_near_alpha() -> None:
    # 400 unchanged runs of twelve correlated metrics: any-metric false alarms <= alpha,
    # up to three standard errors of the simulation (0.033).
    alarms = 0
    for sim in range(400):
        rng = random.Random(1000 + sim)
        shared = [rng.gauss(0, 0.1) for _ in range(60)]
        diffs = {f"m{j}": {q: shared[q] + rng.gauss(0, 0.05) for q in range(60)}
                 for j in range(12)}
        adjusted = step_down_maxt(diffs, dict.fromkeys(diffs, -1.0), resamples=400, seed=sim)
        alarms += min(adjusted.values()) < 0.05
    assert alarms / 400 <= 0.05 + 0.033


def test_holm_family_leaves_out_disabled_and_tolerance_metrics() -> None:
    before, after = twelve(-0.1, seed=4)
    for correction in ("holm", "maxt"):
        rules = GateRules(
            resamples=2000,
            per_metric={"m0": MetricRule(enabled=False), "m1": MetricRule(mode="tolerance")},
            correction=correction,  # type: ignore[arg-type]
        )
        comparison = compare(before, after, rules)
        assert {m.family for m in comparison.metrics[2:]} == {10}
        assert comparison.get("m0") is not None and comparison.get("m1") is not None
        assert comparison.metrics[0].family == comparison.metrics[1].family == 1


def test_noise_does_not_fail_the_default_mode() -> None:
    before, after = runs(-0.002, sd=0.2)
    item = compare(before, after, FAST).metrics[0]
    assert item.delta is not None and item.delta < 0
    assert item.status == "not significant" and not item.regressed and item.reason is None


def test_improvement_never_fails_in_any_mode() -> None:
    before, after = runs(+0.05)
    for mode in ("significant", "tolerance", "any"):
        rules = GateRules(default=MetricRule(mode=mode), resamples=2000)  # type: ignore[arg-type]
        item = compare(before, after, rules).metrics[0]
        assert item.status == "improved" and not item.regressed, mode


def test_modes_differ_on_small_noisy_and_small_significant_drops() -> None:
    tolerant = {"max_drop": 0.03}
    # A drop of 0.01 with tiny noise: significant but within the 0.03 tolerance.
    small_sig = runs(-0.01, sd=0.01)
    # A drop of 0.05 with huge noise over 20 questions: beyond tolerance, not significant.
    big_noisy = runs(-0.05, sd=0.6, n=20, seed=4)
    verdicts = {}
    for mode in ("significant", "tolerance", "any"):
        rules = GateRules(default=MetricRule(mode=mode, **tolerant), resamples=2000)  # type: ignore[arg-type]
        verdicts[mode] = tuple(compare(b, a, rules).metrics[0].status for b, a in (small_sig, big_noisy))
    assert verdicts["significant"] == ("within tolerance", "not significant")
    assert verdicts["tolerance"] == ("within tolerance", "regressed")
    assert verdicts["any"] == ("regressed", "regressed")


def test_max_drop_pct_relative_to_baseline() -> None:
    before, after = runs(-0.05, sd=0.01)
    base_mean = before.summary["recall"].mean or 0
    loose = GateRules(default=MetricRule(max_drop_pct=100 * 0.06 / base_mean), resamples=2000)
    strict = GateRules(default=MetricRule(max_drop_pct=100 * 0.04 / base_mean), resamples=2000)
    assert compare(before, after, loose).metrics[0].status == "within tolerance"
    assert compare(before, after, strict).metrics[0].status == "regressed"


def test_zero_baseline_with_pct_rule_for_lower_metric() -> None:
    # A lower-is-better metric at 0 that rises: any relative tolerance of 0 is 0, no crash.
    before = make_run({"hallucination": dict.fromkeys(range(100), 0.0)},
                      directions={"hallucination": "lower"})
    after = make_run({"hallucination": {q: 0.2 if q % 2 else 0.0 for q in range(100)}},
                     directions={"hallucination": "lower"})
    rules = GateRules(default=MetricRule(max_drop_pct=50), resamples=2000)
    item = compare(before, after, rules).metrics[0]
    assert item.status == "regressed"
    assert item.reason is not None
    assert item.reason.startswith("ragev: hallucination 0.100 > baseline 0.000 (Δ +0.100")


def test_lower_metric_falling_is_an_improvement() -> None:
    base, cur = noisy(200, -0.05, seed=8, sd=0.02)
    before = make_run({"latency": base}, directions={"latency": "lower"})
    after = make_run({"latency": cur}, directions={"latency": "lower"})
    assert compare(before, after, FAST).metrics[0].status == "improved"
    assert compare(after, before, FAST).metrics[0].status == "regressed"


def test_per_metric_rules_and_disabled_metrics() -> None:
    base, cur = noisy(300, -0.05, seed=9, sd=0.02)
    before = make_run({"recall": base, "bleu4": base, "mrr": base})
    after = make_run({"recall": cur, "bleu4": cur, "mrr": cur})
    rules = GateRules.from_table(
        {"resamples": 1000, "metrics": {"bleu4": {"max_drop": 0.1}, "mrr": {"enabled": False}}},
        source="ragev.toml", metric_names=["recall", "bleu4", "mrr"],
    )
    comparison = compare(before, after, rules)
    statuses = {m.metric: (m.status, m.regressed) for m in comparison.metrics}
    assert statuses == {
        "recall": ("regressed", True),
        "bleu4": ("within tolerance", False),
        "mrr": ("regressed", False),
    }
    assert len(comparison.failure_lines) == 1


def test_pairs_only_shared_questions_and_lists_overlap() -> None:
    before = make_run({"recall": {q: 1.0 for q in range(0, 10)}})
    after = make_run({"recall": {q: 1.0 for q in range(5, 15)}})
    comparison = compare(before, after, FAST)
    assert comparison.common_qids == [5, 6, 7, 8, 9]
    assert comparison.added == [10, 11, 12, 13, 14] and comparison.removed == [0, 1, 2, 3, 4]
    assert comparison.metrics[0].n == 5 and comparison.metrics[0].status == "unchanged"
    with pytest.raises(BaselineError, match="share no question"):
        compare(make_run({"recall": {1: 1.0}}), make_run({"recall": {2: 1.0}}), FAST)


def test_metric_missing_on_one_side_is_no_data() -> None:
    before = make_run({"recall": {1: 1.0, 2: 0.5}})
    after = make_run({"recall": {1: 1.0, 2: 0.5}, "custom": {1: 0.3, 2: 0.2}})
    item = compare(before, after, FAST).get("custom")
    assert item is not None and item.status == "no data" and item.n == 0 and not item.regressed


def test_non_finite_values_sit_out_of_the_test() -> None:
    before = make_run({"custom": {q: 0.5 for q in range(40)}})
    after = make_run({"custom": {q: (math.nan if q < 5 else 0.5) for q in range(40)}})
    item = compare(before, after, FAST).metrics[0]
    assert item.n == 35 and item.status == "unchanged" and item.p == 1.0


def test_compare_one_metric_gives_its_regression_line() -> None:
    before, after = runs(-0.05)
    item = compare(before, after, FAST, metrics=["recall"]).metrics[0]
    assert item.regressed and (item.reason or "").startswith("ragev: recall ")
    unchanged = compare(before, before, FAST, metrics=["recall"]).metrics[0]
    assert not unchanged.regressed and unchanged.reason is None


def test_variant_label_in_lines() -> None:
    base, cur = noisy(100, -0.2, seed=1, sd=0.01)
    before = make_run({"recall": base}, variant="small")
    after = make_run({"recall": cur}, variant="small")
    assert compare(before, after, FAST).failure_lines[0].startswith("ragev: recall [small] ")


def test_speed_path_handles_twelve_metrics_of_four_hundred() -> None:
    rng = random.Random(0)
    pairs = {
        f"m{i}": ([rng.random() for _ in range(400)], [rng.random() for _ in range(400)])
        for i in range(12)
    }
    stats = paired_stats(pairs, resamples=10_000)
    assert len(stats) == 12
    assert all(0 < s.p_lower <= 1 and 0 < s.p_higher <= 1 for s in stats.values())
    # The two one-sided tails overlap only at ties: they sum to 1 plus a tiny tie mass.
    assert all(1 <= s.p_lower + s.p_higher <= 1.01 for s in stats.values())


# ----------------------------------------------------------------- power: can it see a drop?

def _concentrated_drop(n: int, k: int) -> tuple[RunResult, RunResult]:
    """n questions scoring 1; afterwards k of them lose their whole score."""
    before = make_run({"recall": dict.fromkeys(range(n), 1.0)})
    after = make_run({"recall": {q: 0.0 if q < k else 1.0 for q in range(n)}})
    return before, after


def test_power_line_at_twenty_questions() -> None:
    rules = GateRules(resamples=2000, correction="none")
    before, after = _concentrated_drop(20, 1)
    comparison = compare(before, after, rules)
    assert power_lines([comparison], rules) == [
        'ragev: warning: n=20 cannot detect a 0.05 drop at alpha 0.05 (such a drop can be 1 '
        "question losing its whole score, whose paired p-value cannot go below 0.5); consider "
        'mode = "tolerance" for a deterministic or cached pipeline, or more questions'
    ]
    # The gate indeed cannot fail on it, although the drop is 0.05 exactly.
    assert comparison.metrics[0].delta == pytest.approx(-0.05) and comparison.passed


def test_power_line_counts_holm_and_names_only_the_blind_metrics() -> None:
    # Twelve metrics at 100 questions: alone each could see a 0.05 drop (2^-5 < 0.05),
    # Holm multiplies the smallest p by twelve.
    names = [f"m{i}" for i in range(12)]
    before = make_run(dict.fromkeys(names, dict.fromkeys(range(100), 1.0)))
    after = make_run({m: {q: 0.5 if q < 10 else 1.0 for q in range(100)} for m in names})
    holm_rules = GateRules(resamples=2000, correction="holm")
    lines = power_lines([compare(before, after, holm_rules)], holm_rules)
    assert len(lines) == 1 and lines[0].startswith(
        "ragev: warning: n=100 cannot detect a 0.05 drop at alpha 0.05 (Holm, 12 metrics) "
        "(such a drop can be 5 questions losing their whole score, whose paired p-value cannot "
        "go below 0.38)"
    )
    maxt = GateRules(resamples=2000)
    assert power_lines([compare(before, after, maxt)], maxt) == []
    # A metric in "tolerance" mode does not need the test; only m0 is left blind.
    mixed = GateRules(resamples=2000, correction="none", per_metric={
        **{n: MetricRule(mode="tolerance") for n in names[1:]},
    })
    small_before, small_after = (make_run(dict.fromkeys(names, dict.fromkeys(range(20), 1.0))),
                                 make_run(dict.fromkeys(names, dict.fromkeys(range(20), 1.0))))
    assert power_lines([compare(small_before, small_after, mixed)], mixed)[0].startswith(
        "ragev: warning: n=20 cannot detect a 0.05 drop at alpha 0.05 (such"
    )
    # Generation metrics on 20 answered questions, retrieval on 200: only rougel is blind.
    uneven = {"recall": dict.fromkeys(range(200), 1.0), "rougel": dict.fromkeys(range(20), 0.5)}
    none = GateRules(resamples=2000, correction="none")
    assert power_lines([compare(make_run(uneven), make_run(uneven), none)], none)[0].startswith(
        "ragev: warning: n=20 cannot detect a 0.05 drop at alpha 0.05 for rougel (such"
    )
    off = GateRules(resamples=2000, min_detectable_drop=0.0)
    assert power_lines([compare(small_before, small_after, off)], off) == []


def test_power_line_uses_the_tolerance_when_it_is_larger() -> None:
    rules = GateRules(resamples=2000, correction="none", default=MetricRule(max_drop=0.2))
    before, after = _concentrated_drop(20, 4)
    # 0.2 of 20 questions is 4 questions: p >= 1/16, still blind at alpha 0.05.
    assert "cannot detect a 0.2 drop" in power_lines([compare(before, after, rules)], rules)[0]
    before, after = _concentrated_drop(40, 8)
    assert power_lines([compare(before, after, rules)], rules) == []


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 160), drop=st.sampled_from([0.02, 0.05, 0.1, 0.25]))
def test_the_power_line_is_right_about_a_drop_carried_by_whole_questions(
    n: int, drop: float
) -> None:
    # The warning says a drop of `drop` carried by the fewest questions cannot fail the
    # gate; the gate's own verdict on exactly that drop agrees, whatever n.
    rules = GateRules(resamples=2000, correction="none", min_detectable_drop=drop)
    k = questions_for_drop(n, drop)
    before, after = _concentrated_drop(n, k)
    comparison = compare(before, after, rules)
    warned = bool(power_lines([comparison], rules))
    assert warned == comparison.passed
    assert smallest_p(k, 2000) == max(2.0 ** -k, 1 / 2001)


def test_metric_order_and_direction_over_several_runs() -> None:
    # The diffs and the variants table read these too: the first run's order, then the
    # metrics only later runs have; a direction from the first run that has the metric.
    first = make_run({"recall": {1: 0.5}, "latency": {1: 2.0}}, directions={"latency": "lower"})
    second = make_run({"rougel": {1: 0.1}, "recall": {1: 0.4}})
    assert metric_order(first, second) == ["recall", "latency", "rougel"]
    assert metric_order() == []
    assert metric_direction("latency", second, first) == "lower"
    assert metric_direction("rougel", first, second) == "higher"
    assert metric_direction("absent", first, second) == "higher"
