"""The controller's end of a run: score the records, decide the verdict, write reports.

Called from ``RagevSession.pytest_sessionfinish`` on the controller only (serial runs
or the xdist controller), so every side effect happens once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ragev.config import RagevConfig
from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.io import atomic_write_json, atomic_write_text
from pytest_ragev.core.redact import redact
from pytest_ragev.core.results import RunResult, SampleResult
from pytest_ragev.core.types import (
    GENERATION_METRICS,
    METRIC_NAMES,
    RETRIEVAL_METRICS,
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
    CustomMetric,
    MetricInput,
)

if TYPE_CHECKING:
    from pytest_ragev.gate import Comparison, QuestionDiff, ThresholdResult
    from pytest_ragev.plugin.session import RagevSession


@dataclass
class Evaluation:
    """What the controller decided at session end."""

    runs: list[RunResult]
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    thresholds: list[ThresholdResult] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    errors: int = 0
    fallbacks: int = 0
    #: Set when the run stopped early: says how far it got (it fails the verdict).
    interrupted: str | None = None

    @property
    def failed(self) -> bool:
        """A failed check, a question that raised, or a run that did not finish."""
        return bool(self.failures) or self.errors > 0 or self.interrupted is not None

    def verdict_failures(self) -> list[str]:
        """The failed checks, then the interruption line (errors have their own count)."""
        return [*self.failures, *([self.interrupted] if self.interrupted else [])]

    @property
    def base(self) -> RunResult | None:
        return self.runs[0] if self.runs else None


def validate_gate(ragev: RagevConfig, metric_names: Sequence[str]) -> None:
    """Reject a malformed ``[gate]`` table before any question runs."""
    if ragev.gate:
        from pytest_ragev.gate import GateRules

        GateRules.from_table(ragev.gate, source=str(ragev.source), metric_names=metric_names)


# ---------------------------------------------------------------------- scoring
def _inputs(records: Sequence[Mapping[str, Any]]) -> list[MetricInput]:
    return [
        MetricInput(
            retrieval_gt=[list(group) for group in record["retrieval_gt"]],
            retrieval_ids=list(record["retrieval_ids"]),
            generated_text=record["generated_text"],
            generated_gt=record["generated_gt"],
        )
        for record in records
    ]


def score_records(
    records: Sequence[Mapping[str, Any]],
    *,
    profile: str,
    custom: Sequence[CustomMetric] = (),
    tokenizer: Callable[[str], list[list[str]]] | None = None,
) -> list[dict[str, float]]:
    """Per-record metric dicts holding only the metrics that apply to each question."""
    from pytest_ragev.metrics import score

    ok = [r for r in records if not r.get("error")]
    inputs = _inputs(ok)
    grades = [
        {int(pid): float(grade) for pid, grade in r.get("grades", {}).items()} or None for r in ok
    ]
    rows = score(inputs, profile=profile, grades=grades, tokenizer=tokenizer) if inputs else []
    by_record: dict[int, dict[str, float]] = {}
    for record, metric_input, row in zip(ok, inputs, rows, strict=True):
        has_qrels = bool(record["retrieval_gt"])
        has_answer = bool(record.get("has_answer", True))
        kept = {
            name: float(row[name])
            for name in METRIC_NAMES
            if (name in RETRIEVAL_METRICS and has_qrels)
            or (name in GENERATION_METRICS and has_answer)
        }
        for metric in custom:
            applies = (
                metric.kind == "all"
                or (metric.kind == "retrieval" and has_qrels)
                or (metric.kind == "generation" and has_answer)
            )
            if applies:
                kept[metric.name] = _custom_value(metric, metric_input, record["qid"])
        by_record[id(record)] = kept
    return [by_record.get(id(r), {}) for r in records]


def _custom_value(metric: CustomMetric, metric_input: MetricInput, qid: int) -> float:
    value = metric.function(metric_input)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"custom metric {metric.name!r} returned {value!r} for q{qid}; return a float in [0, 1]"
        )
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ConfigError(
            f"custom metric {metric.name!r} returned {value!r} for q{qid}; return a float in [0, 1]"
        )
    return value


def build_run(session: RagevSession, variant: str | None) -> RunResult:
    """The :class:`RunResult` of one variant (``None``: the base config) from its records."""
    from pytest_ragev.metrics import aggregate
    from pytest_ragev.plugin.session import iter_records

    records = list(iter_records(session, variant))
    custom = session.custom_metrics()
    metric_rows = score_records(
        records,
        profile=session.profile,
        custom=custom,
        tokenizer=session.config.hook.pytest_ragev_tokenizer(),
    )
    samples = [
        SampleResult(
            qid=int(record["qid"]),
            question=record["question"],
            retrieval_gt=[list(g) for g in record["retrieval_gt"]],
            retrieval_ids=list(record["retrieval_ids"]),
            generated_text=record["generated_text"],
            generated_gt=record["generated_gt"],
            metrics=row,
            error=record.get("error"),
            variant=variant,
            meta=dict(record.get("meta") or {}),
        )
        for record, row in zip(records, metric_rows, strict=True)
    ]
    names = [*METRIC_NAMES, *(m.name for m in custom)]
    summary = aggregate(
        [s.metrics for s in samples if s.error is None],
        names=names,
        directions={m.name: m.direction for m in custom},
    )
    params = run_params(session, variant)
    return RunResult(
        dataset_id=session.dataset_id,
        fingerprint=session.dataset.fingerprint,
        dataset_stats=session.dataset.stats.to_json(),
        profile=session.profile,
        params=params,
        params_hash=sha256_json(params),
        samples=samples,
        summary=summary,
        variant=variant,
    )


def run_params(session: RagevSession, variant: str | None) -> dict[str, Any]:
    """The resolved, redacted settings snapshot recorded as the report's ``params``."""
    settings = session.pipeline_settings(variant)
    pipeline = {"name": settings.name, **session.builtin.snapshot(settings)}
    ragev = session.ragev
    params: dict[str, Any] = redact(
        {
            "dataset": {
                "id": session.dataset_id,
                "path": _portable_path(ragev.dataset_path, ragev.source.parent),
                "fingerprint": session.dataset.fingerprint,
                "limit": session.options.limit,
            },
            "pipeline": pipeline,
            "metrics": {"profile": session.profile},
            "thresholds": dict(ragev.thresholds),
        }
    )
    return params


def _portable_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` in posix form when it lies under it, else absolute.

    Keeps machine paths out of committed baselines and ``settings_hash`` the same on
    every checkout.
    """
    try:
        return path.relative_to(base).as_posix() or "."
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------- verdict
def evaluate(session: RagevSession, *, interrupted: bool) -> Evaluation:
    """Score, check thresholds and the baseline, write the reports; return the decision."""
    from pytest_ragev.plugin.session import variants_with_records

    variants = [v for v in session.selected_variants() if v in variants_with_records(session)]
    runs = [build_run(session, variant) for variant in variants]
    evaluation = Evaluation(runs=runs)
    if interrupted:
        progress = session.progress
        evaluation.interrupted = (
            f"ragev: run {session.interrupt_reason}: {progress.finished} of "
            f"{progress.total} questions answered"
        )
    for run in runs:
        evaluation.errors += sum(1 for s in run.samples if s.error)
        evaluation.fallbacks += sum(1 for s in run.samples if s.meta.get("fallback"))
    gated = runs[:1] if runs and runs[0].variant is None else runs
    _check_thresholds(session, gated, evaluation)
    if session.duplicates:
        evaluation.notes.append(
            f"ragev: {session.duplicates} duplicate records for the same question were ignored "
            "(the first one counts)"
        )
    from pytest_ragev.gate import workflow as _gate

    _gate.apply(session, evaluation, interrupted=interrupted)
    evaluation.report = final_report(session, evaluation, interrupted=interrupted)
    session.config.hook.pytest_ragev_report(report=evaluation.report)
    _write_reports(session, evaluation)
    return evaluation


def _check_thresholds(
    session: RagevSession, runs: Sequence[RunResult], evaluation: Evaluation
) -> None:
    from pytest_ragev.gate import check_thresholds, thresholds_from_table

    if not session.ragev.thresholds:
        return
    directions = {name: "higher" for name in METRIC_NAMES}
    directions.update({m.name: m.direction for m in session.custom_metrics()})
    checks = thresholds_from_table(
        session.ragev.thresholds, source=str(session.ragev.source), directions=directions
    )
    for run in runs:
        for result in check_thresholds(run, checks):
            evaluation.thresholds.append(result)
            if result.reason is not None:
                evaluation.failures.append(result.reason)


# ---------------------------------------------------------------------- reports
def _metric_block(run: RunResult | None) -> dict[str, Any]:
    def means(names: Sequence[str]) -> dict[str, float | None]:
        if run is None:
            return {name: None for name in names}
        return {
            name: (run.summary[name].mean if name in run.summary else None) for name in names
        }

    block: dict[str, Any] = {
        "retrieval_metrics": means(RETRIEVAL_METRICS),
        "generation_metrics": means(GENERATION_METRICS),
    }
    if run is not None:
        custom = [name for name in run.summary if name not in METRIC_NAMES]
        if custom:
            block["custom_metrics"] = means(custom)
        block["counts"] = {name: item.n for name, item in run.summary.items()}
    return block


def _task(
    session: RagevSession, *, status: int, err_msg: str, finished: int | None = None
) -> dict[str, Any]:
    progress = session.progress
    return {
        "id": session.task_id or "",
        "dataset_id": session.dataset_id,
        "start_time": progress.start_time,
        "status": status,
        "err_msg": err_msg,
        "total": progress.total,
        "finished": progress.finished if finished is None else finished,
    }


def progress_report(
    session: RagevSession, *, status: int = STATUS_RUNNING, err_msg: str = ""
) -> dict[str, Any]:
    """The report before the first item (status 0), while the run goes (1), or after a
    usage error (3)."""
    return {
        "success": status != STATUS_FAILED,
        "data": {
            "task": _task(session, status=status, err_msg=err_msg),
            "params": run_params(session, None),
            "metric": None,
        },
    }


def final_report(
    session: RagevSession, evaluation: Evaluation, *, interrupted: bool
) -> dict[str, Any]:
    """The JSON report in WeKnora's ``EvaluationDetail`` shape, plus samples and verdict."""
    base = evaluation.base
    if interrupted:
        status = STATUS_FAILED
        err_msg = f"{session.interrupt_reason} before every question was answered"
    else:
        status, err_msg = STATUS_SUCCESS, ""
    data: dict[str, Any] = {
        "task": _task(session, status=status, err_msg=err_msg),
        "params": base.params if base is not None else run_params(session, None),
        "metric": _metric_block(base),
        "samples": [s.to_json() for s in base.samples] if base is not None else [],
        "verdict": {
            "passed": not evaluation.failed,
            "failures": evaluation.verdict_failures(),
            "errors": evaluation.errors,
            "fallbacks": evaluation.fallbacks,
        },
    }
    if session.dataset.warnings:
        data["warnings"] = list(session.dataset.warnings)
    state = session.gate_state
    if state is not None and state.comparisons:
        data["baseline"] = {
            "path": str(state.baseline_path),
            "comparisons": [_comparison_json(c) for c in state.comparisons],
            "regressions": [_diff_json(d) for d in state.regressions],
        }
    variants = [run for run in evaluation.runs if run.variant is not None]
    if variants:
        data["variants"] = {
            run.variant: {
                "params": run.params,
                "metric": _metric_block(run),
                "samples": [s.to_json() for s in run.samples],
            }
            for run in variants
        }
    return {"success": not interrupted, "data": data}


def _finite(value: float | None) -> float | None:
    # JSON has no inf/NaN: an error that appeared counts as the largest worsening.
    return value if value is None or math.isfinite(value) else None


def _comparison_json(comparison: Comparison) -> dict[str, Any]:
    return {
        "variant": comparison.variant,
        "common_questions": len(comparison.common_qids),
        "added": list(comparison.added),
        "removed": list(comparison.removed),
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
            }
            for m in comparison.metrics
        },
    }


def _diff_json(diff: QuestionDiff) -> dict[str, Any]:
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
        "error_before": diff.error_before,
        "error_after": diff.error_after,
    }


def _write_reports(session: RagevSession, evaluation: Evaluation) -> None:
    path = session.report_path
    if path is not None:
        atomic_write_json(path, evaluation.report)
    md_path = session.options.report_markdown or session.ragev.report_markdown
    summary_env = os.environ.get("GITHUB_STEP_SUMMARY")
    html_path = session.options.report_html or session.ragev.report_html
    junit = _junit_xml(session)
    if md_path is None and not summary_env and html_path is None and junit is None:
        return
    from pytest_ragev.gate import workflow as _gate
    from pytest_ragev.report import junit_properties, render_html, render_markdown

    model = _gate.report_model(session, evaluation)
    if md_path is not None or summary_env:
        markdown = render_markdown(model)
        if md_path is not None:
            atomic_write_text(md_path, markdown)
        if summary_env:
            # GitHub's step summary is appended to, by design, across steps.
            with open(summary_env, "a", encoding="utf-8") as handle:
                handle.write(markdown + "\n")
    if html_path is not None:
        atomic_write_text(html_path, render_html(model))
    if junit is not None:
        for name, value in junit_properties(model):
            junit.add_global_property(name, value)


def _junit_xml(session: RagevSession) -> Any:
    # The LogXML of --junitxml, whose suite-level properties CI dashboards read.
    from _pytest.junitxml import xml_key

    return session.config.stash.get(xml_key, None)
# ---------------------------------------------------------------------- terminal
Markup = dict[str, bool]


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def terminal_lines(session: RagevSession, *, verbose: int) -> Iterator[tuple[str, Markup]]:
    """The summary the terminal shows: a metrics table, counts, then one red line per failure."""
    evaluation = session.evaluation
    if evaluation is None:
        return
    yield "", {}
    for run in evaluation.runs:
        label = f"variant {run.variant}" if run.variant else "base configuration"
        yield (
            f"ragev: {run.dataset_id} ({label}), {len(run.samples)} questions, "
            f"profile {run.profile}", {"bold": True},
        )
        yield f"  {'metric':<12} {'mean':>7} {'n':>6} {'threshold':>10}  verdict", {}
        results = {t.metric: t for t in evaluation.thresholds if t.variant == run.variant}
        for name, item in run.summary.items():
            result = results.get(name)
            verdict = "" if result is None else ("ok" if result.passed else "FAIL")
            threshold = "" if result is None else f"{result.threshold:.3f}"
            markup: Markup = {"red": True} if verdict == "FAIL" else {}
            yield (
                f"  {name:<12} {_fmt(item.mean):>7} {item.n:>6} {threshold:>10}  {verdict}",
                markup,
            )
    counts = [f"errors {evaluation.errors}", f"fallback answers {evaluation.fallbacks}"]
    if session.cache_hits or session.cache_misses:
        counts.append(f"answer cache {session.cache_hits} hits / {session.cache_misses} misses")
    yield "ragev: " + ", ".join(counts), {}
    from pytest_ragev.gate import workflow as _gate

    for line in _gate.summary_lines(session):
        yield line, {}
    if verbose > 0:
        for line in _gate.verbose_lines(session, evaluation):
            yield line, {}
    for warning in session.dataset.warnings:
        yield f"ragev: warning: {warning}", {"yellow": True}
    for note in evaluation.notes:
        yield note, {"yellow": True}
    for failure in evaluation.verdict_failures():
        yield failure, {"red": True, "bold": True}
    if not evaluation.failed:
        yield "ragev: verdict passed", {"green": True, "bold": True}
        return
    reasons = []
    if evaluation.failures:
        reasons.append(f"{len(evaluation.failures)} checks")
    if evaluation.errors:
        reasons.append(f"{evaluation.errors} errors")
    if evaluation.interrupted:
        reasons.append(session.interrupt_reason)
    yield f"ragev: verdict FAILED ({', '.join(reasons)})", {"red": True, "bold": True}
