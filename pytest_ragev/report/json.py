"""The JSON report in WeKnora's ``EvaluationDetail`` shape: while a run goes, and at its end.

``{"success": ..., "data": {"task": {...}, "params": {...}, "metric": {...}, ...}}``:
``task`` has the seed's fields (``status`` 0 pending, 1 running, 2 success, 3 failed,
``total``/``finished`` counted in questions), ``metric`` the means of the base run in the
seed's two groups; beyond the seed, ``samples``, ``verdict``, ``errors``, ``attribution``,
``usage``, ``lowest``, ``passages``, ``baseline``, ``variants`` and ``warnings``. Pure
functions: the shell writes the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_ragev.config import Pricing
from pytest_ragev.core.record import Record
from pytest_ragev.core.results import MetricSummary, RunResult
from pytest_ragev.core.types import (
    BUILTIN_METRICS,
    GENERATION_METRICS,
    QUALITY_METRICS,
    RETRIEVAL_METRICS,
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
)
from pytest_ragev.evaluation import (
    LowestQuestions,
    Outcome,
    QuestionError,
    RunFacts,
    ShardPart,
    chunk_share,
    count_kinds,
    usage,
)
from pytest_ragev.evaluation.slices import RunSlices
from pytest_ragev.gate import Comparison, QuestionDiff
from pytest_ragev.report._slices import comparison_slices_json, slices_json

#: ``data.schema_version`` of the reports this version writes. Raised when a key changes
#: meaning or goes away (adding keys does not): ``ragev report`` then refuses a report
#: newer than it reads, instead of misreading it.
REPORT_SCHEMA_VERSION = 1

#: The per-question lists of the report, written one question per line
#: (``pytest_ragev.core.io.dumps_json(..., records=REPORT_RECORDS)``).
REPORT_RECORDS = ("samples", "questions", "regressions")


def metric_block(run: RunResult | None) -> dict[str, Any]:
    """``{"retrieval_metrics": {...}, "generation_metrics": {...}, "counts": {...}}``.

    Custom metrics add ``custom_metrics`` (their means) and ``directions`` (``"higher"``
    or ``"lower"`` is better), so a saved report can be gated later (``ragev report
    compare``) with each metric judged in its own direction.
    """
    return summary_block(None if run is None else run.summary)


def summary_block(summary: Mapping[str, MetricSummary] | None) -> dict[str, Any]:
    """:func:`metric_block` of a metric summary (``None``: every mean ``None``)."""
    def means(names: Sequence[str]) -> dict[str, float | None]:
        if summary is None:
            return {name: None for name in names}
        return {name: (summary[name].mean if name in summary else None) for name in names}

    block: dict[str, Any] = {
        "retrieval_metrics": means(RETRIEVAL_METRICS),
        "generation_metrics": means(GENERATION_METRICS),
    }
    if summary is not None:
        quality = [name for name in QUALITY_METRICS if name in summary]
        if quality:
            block["quality_metrics"] = means(quality)
        custom = [name for name in summary if name not in BUILTIN_METRICS]
        if custom:
            block["custom_metrics"] = means(custom)
            block["directions"] = {name: summary[name].direction for name in custom}
        block["counts"] = {name: item.n for name, item in summary.items()}
    return block


def _task(facts: RunFacts, dataset_id: str, *, status: int, err_msg: str) -> dict[str, Any]:
    return {
        "id": facts.task_id,
        "dataset_id": dataset_id,
        "start_time": facts.start_time,
        "status": status,
        "err_msg": err_msg,
        "total": facts.total,
        "finished": facts.finished,
    }


def progress_report(
    facts: RunFacts, *, dataset_id: str, params: Mapping[str, Any],
    status: int = STATUS_RUNNING, err_msg: str = "",
    running: Mapping[str, MetricSummary] | None = None,
) -> dict[str, Any]:
    """The report before the first item (status 0), while the run goes (1), or after a
    usage error (3). ``params`` is the base configuration's settings snapshot;
    ``running`` the means of its questions answered so far, which ``metric`` shows while
    the run goes, as the original's task detail does (``null`` before the first one)."""
    return {
        "success": status != STATUS_FAILED,
        "data": {
            "task": _task(facts, dataset_id, status=status, err_msg=err_msg),
            "params": dict(params),
            "metric": None if not running else summary_block(running),
        },
    }


def final_report(
    outcome: Outcome, *, dataset_id: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """The report at the end of a run. ``params``: the base configuration's settings,
    reported when the base configuration did not run."""
    facts = outcome.facts
    base = outcome.base
    interrupted = facts.interrupted is not None
    gate = outcome.gate
    if interrupted:
        status = STATUS_FAILED
        err_msg = f"{facts.interrupted} before every question was answered"
    elif gate.not_compared is not None:
        # The metrics are all there, but the run's job (gating) could not be done.
        status, err_msg = STATUS_FAILED, f"gate not compared: {gate.not_compared}"
    elif gate.write_error is not None:
        status, err_msg = STATUS_FAILED, gate.write_error.removeprefix("ragev: ")
    else:
        status, err_msg = STATUS_SUCCESS, ""
    data: dict[str, Any] = {
        "task": _task(facts, dataset_id, status=status, err_msg=err_msg),
        "params": base.params if base is not None else dict(params),
        "metric": metric_block(base),
        "samples": (_samples(base, outcome.question_hashes, outcome.slices_of(base.variant),
                             part=outcome.shard is not None)
                    if base is not None else []),
        "verdict": {
            "passed": not outcome.failed,
            "failures": outcome.verdict_failures(),
            "errors": outcome.errors,
            "fallbacks": outcome.fallbacks,
        },
        "errors": errors_json(outcome.error_list),
        **run_figures(base, outcome.pricing),
        "lowest": lowest_json(outcome.lowest),
        # After the seed's keys and ours that every report has: the seed's order first.
        "schema_version": REPORT_SCHEMA_VERSION,
    }
    slices = slices_json(outcome.slices_of(base.variant) if base is not None else None)
    if slices:
        # Per language and tag slice: its questions, each metric's mean and n.
        data["slices"] = slices
        data["slice_min_size"] = outcome.slices[0].min_size
    if outcome.passages:
        # The texts of the passages the per-question views name (a few dozen, shortened),
        # so a saved report renders them again (``ragev report html``).
        data["passages"] = {str(pid): text for pid, text in sorted(outcome.passages.items())}
    if outcome.warnings:
        data["warnings"] = list(outcome.warnings)
    if gate.comparisons or gate.not_compared is not None or gate.new_variants:
        change = gate.corpus_change
        data["baseline"] = {
            "path": outcome.baseline_shown,
            "compared": gate.not_compared is None,
            "not_compared": gate.not_compared,
            "new_variants": list(gate.new_variants),
            "corpus_changed": None if change is None else {
                "passages_before": change.passages_before,
                "passages_after": change.passages_after,
            },
            "comparisons": [comparison_json(c) for c in gate.comparisons],
            "regressions": [diff_json(d) for d in gate.regressions],
        }
    variants = [run for run in outcome.runs if run.variant is not None]
    if variants:
        data["variants"] = {
            run.variant: {
                "params": run.params,
                "metric": metric_block(run),
                **run_figures(run, outcome.pricing),
                "samples": _samples(run, outcome.question_hashes,
                                    outcome.slices_of(run.variant),
                                    part=outcome.shard is not None),
                **({"slices": slices_json(outcome.slices_of(run.variant))}
                   if slices_json(outcome.slices_of(run.variant)) else {}),
            }
            for run in variants
        }
    if outcome.shard is not None:
        data["shard"] = shard_json(outcome.shard, facts)
    return {"success": status != STATUS_FAILED, "data": data}


def shard_json(shard: ShardPart, facts: RunFacts) -> dict[str, Any]:
    """``data.shard`` of a partial report: which shard of how many, the questions it
    owns, how they were assigned, and what ``ragev report merge`` needs beyond the
    samples to rebuild the run's end (the shell's warnings and counts, the custom
    metrics' definitions, the configurations that ran, the plugin version)."""
    return {
        "index": shard.spec.index,
        "total": shard.spec.total,
        "questions": list(shard.questions),
        "dataset_questions": shard.dataset_questions,
        "assignment": shard.assignment,
        "configurations": list(shard.configurations),
        "plugin_version": shard.plugin_version,
        "config": shard.config,
        "custom_metrics": [dict(metric) for metric in shard.custom_metrics],
        "run": {
            "warnings": list(facts.warnings),
            "duplicates": facts.duplicates,
            "cache_hits": facts.cache_hits,
            "cache_misses": facts.cache_misses,
            "interrupted": facts.interrupted,
        },
    }


def _samples(run: RunResult, hashes: Mapping[int, str], slices: RunSlices | None = None,
             *, part: bool = False) -> list[dict[str, Any]]:
    """The run's records as ``data.samples`` holds them, each with its question's content
    ``hash`` when known: a saved report then pairs questions after a dataset edit. Each
    names its ``slices`` only when the run's slices say more than its means (``slices``
    worth showing) or the run sets slice thresholds: a one-language set without tags
    keeps WeKnora's sample keys (and a ``--ragev-samples`` line, written before the
    run's slices are known, has none). A
    partial report (``part``) writes each record in the form a merge reads back whole
    (:meth:`~pytest_ragev.core.record.Record.to_part_json`)."""
    # A run that sets [thresholds.slice.<name>] keeps them too: a saved report checks
    # those thresholds again on the slice keys its samples carry.
    keep_slices = slices is not None and (slices.worth_showing
                                          or "slice_thresholds" in run.params)
    samples = []
    for sample in run.samples:
        item = sample.to_part_json() if part else sample.to_report_json()
        if keep_slices and sample.slices:
            item["slices"] = list(sample.slices)
        content = hashes.get(sample.qid)
        if content is not None:
            item["hash"] = content
        samples.append(item)
    return samples


def errors_json(errors: Sequence[QuestionError]) -> dict[str, Any]:
    """``{"total": 3, "by_type": {"TimeoutError": 2, ...}, "questions": [...]}``."""
    return {
        "total": len(errors),
        "by_type": dict(count_kinds(errors)),
        "questions": [
            {"qid": e.qid, "variant": e.variant, "question": e.question, "type": e.kind,
             "error": e.error}
            for e in errors
        ],
    }


def run_figures(run: RunResult | None, pricing: Pricing | None = None) -> dict[str, Any]:
    """A run's ``attribution`` (retrieved chunk texts that matched no corpus passage)
    and ``usage`` (latency percentiles and token totals from ``Answer.meta``)."""
    samples = run.samples if run is not None else []
    share = chunk_share(samples)
    return {
        "attribution": {"chunks": share.chunks, "unattributed": share.unattributed,
                        "share": share.share, "first": share.first},
        "usage": usage(samples, pricing).to_json(),
    }


def _view_sample(sample: Record, metric: str) -> dict[str, Any]:
    return {
        "qid": sample.qid,
        "question": sample.question,
        "value": sample.metrics[metric],
        "reference": sample.generated_gt,
        "retrieval_ids": list(sample.retrieval_ids),
        "relevant": sorted(sample.relevant),
        "generated_text": sample.generated_text,
    }


def lowest_json(views: Sequence[LowestQuestions]) -> dict[str, Any]:
    """The lowest-scoring questions of the base run, per metric (``recall``, ``rougel``)."""
    return {view.metric: [_view_sample(s, view.metric) for s in view.samples] for view in views}


def _finite(value: float | None) -> float | None:
    # JSON has no inf/NaN: an error that appeared counts as the largest worsening.
    return value if value is None or math.isfinite(value) else None


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """One run's comparison with its baseline run, per metric."""
    return {
        "variant": comparison.variant,
        "common_questions": len(comparison.common_qids),
        "added": list(comparison.added),
        "removed": list(comparison.removed),
        "changed": list(comparison.changed),
        "metrics": {
            m.metric: {
                "baseline": m.baseline_mean,
                "current": m.current_mean,
                "delta": m.delta,
                "ci": [m.ci_low, m.ci_high],
                "ci_level": m.ci_level,
                "p": m.p,
                "p_raw": m.p_raw,
                "correction": m.correction,
                "family": m.family,
                "n": m.n,
                "status": m.status,
                "gated": m.rule.enabled,
                # How the verdict read it ("tolerance": the p column is not read).
                "mode": m.rule.mode,
            }
            for m in comparison.metrics
        },
        # [gate] slices: each tested slice's change (its failure lines name it).
        **({"slices": comparison_slices_json(comparison)} if comparison.slices else {}),
    }


def diff_json(diff: QuestionDiff) -> dict[str, Any]:
    """One regressed question: its metric changes, retrieval and answer before and after."""
    return {
        "qid": diff.qid,
        "variant": diff.variant,
        "question": diff.question,
        "worsening": _finite(diff.worsening),
        "metrics": {
            name: {"before": d.before, "after": d.after, "delta": d.delta}
            for name, d in diff.metrics.items()
        },
        "retrieved_before": diff.retrieved_before,
        "retrieved_after": diff.retrieved_after,
        "relevant": sorted(diff.relevant),
        "answer_before": diff.answer_before,
        "answer_after": diff.answer_after,
        "answer_changed": diff.answer_changed,
        "error_before": diff.error_before,
        "error_after": diff.error_after,
    }
