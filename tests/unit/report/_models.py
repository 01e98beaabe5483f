"""A report model with every section filled, for the renderers' unit tests."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.evaluation import (
    LowestQuestions,
    Outcome,
    QuestionError,
    RunFacts,
)
from pytest_ragev.gate import (
    Comparison,
    GateOutcome,
    GateRules,
    QuestionDiff,
    ThresholdResult,
    VariantTable,
    check_thresholds,
    compare,
    compare_variants,
    thresholds_from_table,
    top_regressions,
)

METRICS = ("recall", "ndcg10", "bleu4")
EVIL = "<script>alert('x')</script> | pipe & “quotes”"


def make_run(
    seed: int, *, shift: float = 0.0, variant: str | None = None, top_k: int = 5, n: int = 60
) -> RunResult:
    rng = random.Random(seed)
    level = random.Random(0)
    samples = []
    for qid in range(1, n + 1):
        base = level.random()
        # Questions 1-8 are the ones a bad change breaks; the others only jitter.
        broken = shift < 0 and qid <= 8
        values = {
            m: min(1.0, max(0.0, base + (shift * 4 if broken else 0.0) + rng.gauss(0, 0.01)))
            for m in METRICS
        }
        question = f"问题 {qid}: {EVIL}" if qid == 1 else f"问题 {qid}：什么是检索增强生成？"
        samples.append(SampleResult(
            qid=qid,
            question=question,
            retrieval_gt=[[qid * 10, qid * 10 + 1]],
            retrieval_ids=[qid * 10 + 5, qid * 10] if broken else [qid * 10, qid * 10 + 1, 7],
            generated_text=f"answer {qid} {EVIL}" if broken else f"answer {qid}",
            generated_gt="ref",
            metrics=values,
            variant=variant,
        ))
    summary = {
        m: MetricSummary(m, sum(s.metrics[m] for s in samples) / n, n) for m in METRICS
    }
    return RunResult(
        dataset_id="samples", fingerprint="0123456789abcdef" * 4, dataset_stats={},
        profile="weknora-0.9", params={"pipeline": {"top_k": top_k}}, params_hash="x",
        samples=samples, summary=summary, variant=variant,
    )


RULES = GateRules(resamples=2000, correction="holm")


def report_outcome(
    *,
    runs: Sequence[RunResult],
    failures: Sequence[str] = (),
    thresholds: Sequence[ThresholdResult] = (),
    comparisons: Sequence[Comparison] = (),
    baseline_runs: Mapping[str | None, RunResult] | None = None,
    variant_table: VariantTable | None = None,
    regressions: Sequence[QuestionDiff] = (),
    errors: int = 0,
    fallbacks: int = 0,
    task_id: str = "",
    start_time: str = "",
    duration_s: float | None = None,
    baseline_path: str | None = None,
    notes: Sequence[str] = (),
    not_compared: str | None = None,
    new_variants: Sequence[str] = (),
    warnings: Sequence[str] = (),
    error_list: Sequence[QuestionError] = (),
    lowest: Sequence[LowestQuestions] = (),
    passages: Mapping[int, str] | None = None,
) -> Outcome:
    """An outcome with the given sections, as evaluate() would make it."""
    gate = GateOutcome(rules=RULES, comparisons=tuple(comparisons),
                       baseline_runs=dict(baseline_runs or {}), variant_table=variant_table,
                       regressions=tuple(regressions), not_compared=not_compared,
                       new_variants=tuple(new_variants))
    return Outcome(
        runs=tuple(runs),
        facts=RunFacts(task_id=task_id, start_time=start_time, duration_s=duration_s),
        thresholds=tuple(thresholds), gate=gate, failures=tuple(failures), notes=tuple(notes),
        warnings=tuple(warnings), errors=errors, fallbacks=fallbacks,
        error_list=tuple(error_list), lowest=tuple(lowest), passages=dict(passages or {}),
        baseline_shown=baseline_path,
    )


def full_model() -> Outcome:
    baseline = make_run(1)
    current = make_run(2, shift=-0.1)
    variants = [make_run(3, shift=0.02, variant="k10", top_k=10),
                make_run(4, variant=f"v{EVIL}", top_k=3)]
    comparison = compare(baseline, current, RULES)
    checks = thresholds_from_table({"recall": 0.9, "bleu4": 0.1}, source="ragev.toml",
                                   directions=dict.fromkeys(METRICS, "higher"))
    thresholds = check_thresholds(current, checks)
    failures = [*(t.reason for t in thresholds if t.reason), *comparison.failure_lines]
    return report_outcome(
        runs=[current, *variants],
        failures=failures,
        thresholds=thresholds,
        comparisons=[comparison],
        baseline_runs={None: baseline},
        variant_table=compare_variants(current, variants, RULES),
        regressions=top_regressions(baseline, current, 10),
        errors=2,
        fallbacks=1,
        task_id="evaluation_ci_1_abcd_samples",
        start_time="2026-01-02T03:04:05.000+00:00",
        duration_s=12.5,
        baseline_path="ragev-baseline.json",
        notes=["ragev: 2 question(s) not in the baseline (added, not compared): 61, 62"],
    )
