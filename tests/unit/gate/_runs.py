"""Runs with chosen per-question scores, for the gate's unit tests."""

from __future__ import annotations

import random
from collections.abc import Mapping

from pytest_ragev.core.results import Direction, MetricSummary, RunResult, SampleResult
from pytest_ragev.gate import (
    GateRules,
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
METRICS = ["recall", "ndcg10", "bleu4"]


def runs(shift: float, *, sd: float = 0.1, n: int = 300, seed: int = 2) -> tuple[RunResult, ...]:
    base, cur = noisy(n, shift, seed=seed, sd=sd)
    return make_run({"recall": base}), make_run({"recall": cur})


def twelve(shift: float, seed: int) -> tuple[RunResult, RunResult]:
    # Twelve metrics that move together, as a run's metrics do (the same retrieval).
    base, cur = noisy(200, shift, seed=seed, sd=0.15)
    names = [f"m{i}" for i in range(12)]
    return make_run(dict.fromkeys(names, base)), make_run(dict.fromkeys(names, cur))
