"""The regression gate: rules from TOML tables, thresholds, paired tests and every mode."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

import pytest

from pytest_ragev.core.errors import BaselineError, ConfigError
from pytest_ragev.core.results import Direction, MetricSummary, RunResult, SampleResult
from pytest_ragev.core.tables import changed_keys
from pytest_ragev.gate import (
    GateRules,
    MaxValue,
    MetricRule,
    MinValue,
    check_thresholds,
    compare,
    compare_variants,
    holm,
    paired_stats,
    step_down_maxt,
    thresholds_from_table,
    top_regressions,
)


def make_run(
    scores: Mapping[str, Mapping[int, float]],
    *,
    variant: str | None = None,
    directions: Mapping[str, Direction] | None = None,
    params: dict[str, object] | None = None,
    retrieved: Mapping[int, list[int]] | None = None,
    answers: Mapping[int, str] | None = None,
    errors: Mapping[int, str] | None = None,
) -> RunResult:
    """A RunResult with the given per-question scores (metric -> qid -> value)."""
    qids = sorted({q for per_q in scores.values() for q in per_q} | set(errors or {}))
    samples = []
    for qid in qids:
        failed = (errors or {}).get(qid)
        samples.append(
            SampleResult(
                qid=qid,
                question=f"question {qid}?",
                retrieval_gt=[[qid, qid + 1000]],
                retrieval_ids=list((retrieved or {}).get(qid, [qid])),
                generated_text=(answers or {}).get(qid, f"answer {qid}"),
                generated_gt=f"reference {qid}",
                metrics={} if failed else {m: v[qid] for m, v in scores.items() if qid in v},
                error=failed,
                variant=variant,
            )
        )
    summary = {}
    for name, per_q in scores.items():
        values = [v for q, v in per_q.items() if not (errors or {}).get(q)]
        summary[name] = MetricSummary(
            name=name,
            mean=sum(values) / len(values) if values else None,
            n=len(values),
            direction=(directions or {}).get(name, "higher"),
        )
    return RunResult(
        dataset_id="toy",
        fingerprint="f" * 64,
        dataset_stats={"questions": len(qids)},
        profile="weknora-0.9",
        params=params or {"pipeline": {"top_k": 5}},
        params_hash="h" * 64,
        samples=samples,
        summary=summary,
        variant=variant,
    )


def noisy(n: int, shift: float, seed: int, sd: float = 0.1) -> tuple[dict[int, float], ...]:
    """Baseline/current scores of n questions: shared difficulty, independent noise."""
    rng = random.Random(seed)
    base, cur = {}, {}
    for qid in range(n):
        level = rng.random()
        base[qid] = level + rng.gauss(0, sd)
        cur[qid] = level + shift + rng.gauss(0, sd)
    return base, cur


FAST = GateRules(resamples=2000)


# ----------------------------------------------------------------- rules from tables

METRICS = ["recall", "ndcg10", "bleu4"]


def test_from_table_defaults_and_per_metric_merge() -> None:
    rules = GateRules.from_table(
        {
            "max_drop": 0.01,
            "significance": 0.1,
            "seed": 7,
            "resamples": 5000,
            "metrics": {"ndcg10": {"max_drop_pct": 5, "mode": "tolerance"}},
        },
        source="ragev.toml",
        metric_names=METRICS,
    )
    assert rules.seed == 7 and rules.resamples == 5000
    assert rules.rule_for("recall") == MetricRule(max_drop=0.01, significance=0.1)
    ndcg = rules.rule_for("ndcg10")
    assert (ndcg.max_drop, ndcg.max_drop_pct, ndcg.significance, ndcg.mode) == (
        0.01, 5.0, 0.1, "tolerance",
    )
    assert GateRules.from_table({}, source="x", metric_names=METRICS) == GateRules()


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ({"max_dorp": 0.1}, "unknown key [gate] 'max_dorp'; did you mean 'max_drop'?"),
        ({"significance": 1.5}, "significance = 1.5 is invalid; use a number in (0, 0.5)"),
        ({"significance": 0}, "significance = 0 is invalid; use a number in (0, 0.5)"),
        ({"significance": "0.05"}, "significance = '0.05' is invalid; use a number in (0, 0.5)"),
        ({"max_drop": True}, "max_drop = True is invalid; use a number in [0, ∞)"),
        ({"max_drop": -0.1}, "max_drop = -0.1 is invalid; use a number in [0, ∞), e.g. max_drop = 0.01"),
        ({"mode": "signifcant"}, "mode = 'signifcant' is invalid; not a gate mode; did you mean 'significant'?"),
        ({"resamples": 10.5}, "resamples = 10.5 is invalid; use a whole number >= 100"),
        ({"resamples": 10}, "resamples = 10 is invalid; use a whole number >= 100"),
        ({"metrics": {"recal": {"max_drop": 0.1}}}, "unknown metric 'recal'; did you mean 'recall'?"),
        ({"metrics": {"recall": {"seed": 1}}}, "unknown key [gate.metrics.recall] 'seed'"),
        ({"metrics": {"recall": 0.1}}, "[gate.metrics.recall] must be a table, got float"),
        ({"enabled": "no"}, "enabled = 'no' is invalid; write true or false"),
        ({"correction": "bonferroni"}, "correction = 'bonferroni' is invalid; not a correction"),
        ({"significance": 0.00005}, "significance = 5e-05 can never be reached with "
                                   "resamples = 10000"),
        ({"resamples": 100, "metrics": {"recall": {"significance": 0.005}}},
         "[gate.metrics.recall] significance = 0.005 can never be reached"),
    ],
)
def test_from_table_errors_are_one_line(table: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        GateRules.from_table(table, source="conf/ragev.toml", metric_names=METRICS)
    message = str(info.value)
    assert fragment in message
    assert message.startswith(("conf/ragev.toml: [gate", "conf/ragev.toml: unknown key [gate"))
    assert "\n" not in message


def test_zero_baseline_pct_tolerance_does_not_divide() -> None:
    rule = MetricRule(max_drop_pct=10)
    assert rule.tolerance(0.0) == 0.0
    assert rule.tolerance(0.5) == pytest.approx(0.05)
    assert MetricRule(max_drop=0.1, max_drop_pct=10).tolerance(0.5) == pytest.approx(0.1)


# ----------------------------------------------------------------- thresholds


def test_threshold_line_format_and_direction() -> None:
    run = make_run(
        {"recall": {q: 0.412 for q in range(118)}, "latency": {q: 1.3 for q in range(118)}},
        directions={"latency": "lower"},
    )
    checks = thresholds_from_table(
        {"recall": 0.5, "latency": 1.0},
        source="ragev.toml",
        directions={"recall": "higher", "latency": "lower"},
    )
    assert checks == [MinValue("recall", 0.5), MaxValue("latency", 1.0)]
    results = check_thresholds(run, checks)
    assert [r.reason for r in results] == [
        "ragev: recall 0.412 < threshold 0.500 (n=118)",
        "ragev: latency 1.300 > threshold 1.000 (n=118)",
    ]
    assert not any(r.passed for r in results)
    assert MinValue("recall", 0.4).fails(run) is None
    assert MaxValue("latency", 2).fails(run) is None


def test_threshold_without_values_fails_and_bad_table_raises() -> None:
    run = make_run({"recall": {}})
    assert MinValue("recall", 0.5).fails(run) == (
        "ragev: recall has no values (n=0), threshold 0.500 unmet"
    )
    with pytest.raises(ConfigError, match=r"'recal' is not a metric; did you mean 'recall'\?"):
        thresholds_from_table({"recal": 0.5}, source="t", directions={"recall": "higher"})
    with pytest.raises(ConfigError, match="recall = 'high' is invalid; use a number"):
        thresholds_from_table({"recall": "high"}, source="t", directions={"recall": "higher"})


# ----------------------------------------------------------------- paired statistics


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


# ----------------------------------------------------------------- compare and modes


def _runs(shift: float, *, sd: float = 0.1, n: int = 300, seed: int = 2) -> tuple[RunResult, ...]:
    base, cur = noisy(n, shift, seed=seed, sd=sd)
    return make_run({"recall": base}), make_run({"recall": cur})


def test_significant_drop_regresses_with_the_documented_line() -> None:
    before, after = _runs(-0.05)
    comparison = compare(before, after, FAST)
    item = comparison.metrics[0]
    assert item.status == "regressed" and item.regressed and not comparison.passed
    assert item.n == 300 and item.p is not None and item.p < 0.001
    line = comparison.failure_lines[0]
    assert line.startswith(f"ragev: recall {item.current_mean:.3f} < baseline ")
    assert f"(Δ −{abs(item.delta or 0):.3f}, 90% CI [−" in line
    assert line.endswith(", p<0.001, n=300)")


def test_holm_adjusted_p_values() -> None:
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03})
    # sorted: a (x3) 0.03; c (x2) 0.06; b (x1) 0.04, raised to the running max 0.06
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.5, "b": 0.6}) == {"a": 1.0, "b": 1.0}
    assert holm({"only": 0.02}) == {"only": 0.02}
    assert holm({}) == {}


def _twelve(shift: float, seed: int) -> tuple[RunResult, RunResult]:
    # Twelve metrics that move together, as a run's metrics do (the same retrieval).
    base, cur = noisy(200, shift, seed=seed, sd=0.15)
    names = [f"m{i}" for i in range(12)]
    return make_run(dict.fromkeys(names, base)), make_run(dict.fromkeys(names, cur))


def test_holm_correction_across_the_metrics_of_a_run() -> None:
    # A small drop whose one-sided p is about 0.015 on each of twelve metrics: significant
    # for each metric alone, not once the twelve tests are corrected together.
    before, after = _twelve(-0.02, seed=4)
    alone = compare(before, after, GateRules(resamples=2000, correction="none"))
    corrected = compare(before, after, GateRules(resamples=2000, correction="holm"))
    assert {m.status for m in alone.metrics} == {"regressed"}
    assert {m.status for m in corrected.metrics} == {"not significant"}
    first = corrected.metrics[0]
    assert first.p_raw is not None and 0.01 < first.p_raw < 0.03
    assert first.p == pytest.approx(min(1.0, 12 * first.p_raw)) and first.family == 12
    assert alone.metrics[0].p == alone.metrics[0].p_raw and alone.metrics[0].family == 1
    # A large drop survives the correction, and the line says the p-value is adjusted.
    before, after = _twelve(-0.1, seed=4)
    strong = compare(before, after, GateRules(resamples=2000, correction="holm"))
    assert len(strong.failure_lines) == 12
    assert strong.failure_lines[0].endswith(", p=0.006 (Holm, 12 metrics), n=200)")


def test_maxt_keeps_the_power_holm_loses_on_metrics_that_move_together() -> None:
    before, after = _twelve(-0.02, seed=4)
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
    before, after = _twelve(-0.1, seed=4)
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
    before, after = _runs(-0.002, sd=0.2)
    item = compare(before, after, FAST).metrics[0]
    assert item.delta is not None and item.delta < 0
    assert item.status == "not significant" and not item.regressed and item.reason is None


def test_improvement_never_fails_in_any_mode() -> None:
    before, after = _runs(+0.05)
    for mode in ("significant", "tolerance", "any"):
        rules = GateRules(default=MetricRule(mode=mode), resamples=2000)  # type: ignore[arg-type]
        item = compare(before, after, rules).metrics[0]
        assert item.status == "improved" and not item.regressed, mode


def test_modes_differ_on_small_noisy_and_small_significant_drops() -> None:
    tolerant = {"max_drop": 0.03}
    # A drop of 0.01 with tiny noise: significant but within the 0.03 tolerance.
    small_sig = _runs(-0.01, sd=0.01)
    # A drop of 0.05 with huge noise over 20 questions: beyond tolerance, not significant.
    big_noisy = _runs(-0.05, sd=0.6, n=20, seed=4)
    verdicts = {}
    for mode in ("significant", "tolerance", "any"):
        rules = GateRules(default=MetricRule(mode=mode, **tolerant), resamples=2000)  # type: ignore[arg-type]
        verdicts[mode] = tuple(compare(b, a, rules).metrics[0].status for b, a in (small_sig, big_noisy))
    assert verdicts["significant"] == ("within tolerance", "not significant")
    assert verdicts["tolerance"] == ("within tolerance", "regressed")
    assert verdicts["any"] == ("regressed", "regressed")


def test_max_drop_pct_relative_to_baseline() -> None:
    before, after = _runs(-0.05, sd=0.01)
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
    before, after = _runs(-0.05)
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


# ----------------------------------------------------------------- per-question diffs


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


# ----------------------------------------------------------------- variants


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


def test_changed_knobs_walks_nested_tables() -> None:
    base = {"pipeline": {"top_k": 5, "chat": {"model": "a", "temperature": 0.0}}, "x": 1}
    variant = {"pipeline": {"top_k": 5, "chat": {"model": "b", "temperature": 0.0}, "rerank": True}}
    assert changed_keys(base, variant) == ["pipeline.chat.model", "pipeline.rerank", "x"]
    assert changed_keys(base, base) == []
