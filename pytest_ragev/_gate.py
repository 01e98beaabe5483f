"""The session's side of the baseline gate: which runs to compare, what to write, what to say.

The decisions themselves live in :mod:`pytest_ragev.checks` and
:mod:`pytest_ragev.baseline`; this module wires them to the settings and collects
their lines into the :class:`~pytest_ragev.evaluate.Evaluation`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest_ragev
from pytest_ragev._types import METRIC_NAMES
from pytest_ragev.results import RunResult

if TYPE_CHECKING:
    from pytest_ragev.checks import Comparison, GateRules, QuestionDiff, VariantTable
    from pytest_ragev.evaluate import Evaluation
    from pytest_ragev.report import ReportModel
    from pytest_ragev.session import RagevSession


@dataclass
class GateState:
    """What the gate found, kept for the terminal and the reports."""

    rules: GateRules
    baseline_path: Path | None = None
    baseline_runs: dict[str | None, RunResult] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    regressions: list[QuestionDiff] = field(default_factory=list)
    variant_table: VariantTable | None = None


def _rules(session: RagevSession) -> GateRules:
    from pytest_ragev.checks import GateRules

    names = [*METRIC_NAMES, *(m.name for m in session.custom_metrics())]
    if not session.ragev.gate:
        return GateRules()
    return GateRules.from_table(session.ragev.gate, source=str(session.ragev.source),
                                metric_names=names)


def baseline_path(session: RagevSession) -> Path | None:
    return session.options.baseline or session.ragev.baseline_path


def apply(
    session: RagevSession,
    evaluation: Evaluation,
    gated: Sequence[RunResult],
    *,
    interrupted: bool,
) -> GateState:
    """Run the baseline workflow and the variant comparison; add lines to ``evaluation``."""
    from pytest_ragev.baseline import (
        Snapshot,
        check_compatible,
        obtained_path,
        resolve_baseline,
        write_snapshot,
    )
    from pytest_ragev.checks import compare, compare_variants, top_regressions

    rules = _rules(session)
    state = GateState(rules=rules)
    session.gate_state = state
    runs = evaluation.runs
    if len(runs) > 1 and runs[0].variant is None:
        state.variant_table = compare_variants(runs[0], runs[1:], rules)

    path = baseline_path(session)
    if path is None or not runs:
        if session.options.update_baseline:
            evaluation.failures.append(
                "ragev: --ragev-update-baseline needs a baseline path; set [baseline] path "
                "in the config or pass --ragev-baseline PATH"
            )
        return state
    state.baseline_path = path
    if interrupted:
        evaluation.notes.append(f"ragev: run interrupted: baseline {path} left untouched")
        return state
    current = Snapshot.from_runs(runs, plugin_version=pytest_ragev.__version__)
    outcome = resolve_baseline(
        path, current, update=session.options.update_baseline, gating=True
    )
    if outcome.message:
        evaluation.notes.append(outcome.message)
    if outcome.failure:
        evaluation.failures.append(outcome.failure)
    if outcome.action != "loaded" or outcome.snapshot is None:
        return state

    baseline = outcome.snapshot
    for run in gated:
        overlap = check_compatible(baseline, run)  # BaselineError: a usage error, exit 4
        evaluation.notes.extend(overlap.lines())
        before = baseline.run_for(run.variant)
        assert before is not None
        state.baseline_runs[run.variant] = before
        comparison = compare(before, run, rules)
        state.comparisons.append(comparison)
        evaluation.failures.extend(comparison.failure_lines)
        state.regressions.extend(top_regressions(before, run, rules.top_regressions))
    if any(not c.passed for c in state.comparisons):
        obtained = obtained_path(path)
        write_snapshot(obtained, current)
        evaluation.notes.append(
            f"ragev: this run's snapshot written to {obtained}; diff it against {path}"
        )
    return state


def verbose_lines(session: RagevSession, evaluation: Evaluation) -> Iterator[str]:
    """Comparison tables and per-question diffs, for ``-v``."""
    from pytest_ragev.checks import render_comparison, render_question_diffs

    state: GateState | None = getattr(session, "gate_state", None)
    if state is None:
        return
    for comparison in state.comparisons:
        yield from render_comparison(comparison)
    if state.regressions:
        yield from render_question_diffs(state.regressions)


def summary_lines(session: RagevSession) -> Iterator[str]:
    """The variant table and the baseline comparison, shown at every verbosity."""
    from pytest_ragev.checks import render_comparison, render_variant_table

    state: GateState | None = getattr(session, "gate_state", None)
    if state is None:
        return
    if state.variant_table is not None:
        yield from render_variant_table(state.variant_table)
    if session.config.option.verbose <= 0:
        for comparison in state.comparisons:
            yield from render_comparison(comparison)


def report_model(session: RagevSession, evaluation: Evaluation) -> ReportModel:
    """The :class:`~pytest_ragev.report.ReportModel` the Markdown and HTML renderers read."""
    from pytest_ragev.report import ReportModel

    state: GateState | None = getattr(session, "gate_state", None)
    return ReportModel.build(
        runs=evaluation.runs,
        thresholds=evaluation.thresholds,
        comparisons=state.comparisons if state else [],
        baseline_runs=state.baseline_runs if state else {},
        variant_table=state.variant_table if state else None,
        regressions=state.regressions if state else [],
        passed=not evaluation.failed,
        failures=evaluation.failures,
        errors=evaluation.errors,
        fallbacks=evaluation.fallbacks,
        task_id=session.task_id or "",
        start_time=session.progress.start_time,
        baseline_path=state.baseline_path if state else None,
        notes=evaluation.notes,
    )
