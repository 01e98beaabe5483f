"""The session's side of the baseline gate: which runs to compare, what to write, what to say.

The decisions themselves live in :mod:`pytest_ragev.gate` and
:mod:`pytest_ragev.gate.baseline`; this module wires them to the settings and collects
their lines into the :class:`~pytest_ragev.evaluation.Evaluation`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest_ragev
from pytest_ragev.core.results import RunResult
from pytest_ragev.core.types import METRIC_NAMES

if TYPE_CHECKING:
    from pytest_ragev.evaluation import Evaluation
    from pytest_ragev.gate import Comparison, GateRules, QuestionDiff, VariantTable
    from pytest_ragev.plugin.session import RagevSession
    from pytest_ragev.report import ReportModel


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
    """``[gate]``'s rules; ``top_regressions`` falls back to ``[report]``'s (default 10)."""
    from pytest_ragev.gate import GateRules

    names = [*METRIC_NAMES, *(m.name for m in session.custom_metrics())]
    gate = session.ragev.gate or {}
    rules = (
        GateRules.from_table(gate, source=str(session.ragev.source), metric_names=names)
        if gate
        else GateRules()
    )
    if "top_regressions" not in gate:
        rules = replace(rules, top_regressions=session.ragev.top_regressions)
    return rules


def baseline_path(session: RagevSession) -> Path | None:
    return session.options.baseline or session.ragev.baseline_path


def _name(variant: str | None) -> str:
    return "base" if variant is None else variant


def _label(variant: str | None) -> str:
    return "the base configuration" if variant is None else f"variant {variant!r}"


def _comparable_runs(session: RagevSession, runs: Sequence[RunResult]) -> list[RunResult]:
    """The runs as the baseline sees them: a ``--ragev-limit`` run carries its parent's fingerprint.

    ``Dataset.limit`` gives the limited dataset a fingerprint of its own (answer caches
    and reports must not mix it up with the full one) and remembers the full dataset's as
    ``source_fingerprint``. Against a baseline the limited run is the full dataset with
    questions left out: the overlap logic lists them instead of refusing the comparison.
    """
    source = session.dataset.source_fingerprint
    if source is None:
        return list(runs)
    return [
        run if run.fingerprint == source else replace(run, fingerprint=source) for run in runs
    ]


def _subset_notes(session: RagevSession, runs: Sequence[RunResult], path: Path) -> list[str]:
    """Warnings when the written baseline holds fewer questions than the dataset has."""
    from pytest_ragev.gate.baseline import id_list

    notes = []
    every = [pair.qid for pair in session.cases()]
    for run in runs:
        ran = {sample.qid for sample in run.samples}
        missing = [qid for qid in every if qid not in ran]
        if missing:
            notes.append(
                f"ragev: warning: {path} now holds {len(ran)} of {len(every)} questions for "
                f"{_label(run.variant)} (the others were deselected or not run, and are not "
                f"gated until recorded): {id_list(missing)}"
            )
    limit = session.options.limit
    if limit and session.dataset.source_fingerprint is not None:
        notes.append(
            f"ragev: warning: --ragev-limit {limit}: {path} holds only the first {limit} "
            "questions; rerun without the limit to record the whole dataset"
        )
    return notes


def _remove_stale(path: Path, evaluation: Evaluation) -> None:
    from pytest_ragev.gate.baseline import obtained_path

    obtained = obtained_path(path)
    try:
        obtained.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        evaluation.notes.append(f"ragev: could not remove the stale {obtained}: {exc}")
        return
    evaluation.notes.append(f"ragev: removed the stale {obtained} (this run passed)")


def apply(
    session: RagevSession,
    evaluation: Evaluation,
    *,
    interrupted: bool,
) -> GateState:
    """Run the baseline workflow and the variant comparison; add lines to ``evaluation``.

    Every run of ``evaluation.runs`` is compared with its own recorded run (the base
    configuration with the base run, each variant with its variant run), whichever of
    them were selected. A session that ran only some configurations (``--ragev-variant``, ``-k``)
    compares those, and ``--ragev-update-baseline`` merges them into the file, keeping
    the recorded runs of the configurations that did not run.
    """
    from pytest_ragev.core.errors import BaselineError
    from pytest_ragev.gate import compare, compare_variants, top_regressions
    from pytest_ragev.gate.baseline import (
        Snapshot,
        check_compatible,
        load_snapshot,
        merge_snapshot,
        obtained_path,
        write_snapshot,
    )

    rules = _rules(session)
    state = GateState(rules=rules)
    session.gate_state = state
    runs = evaluation.runs
    if len(runs) > 1 and runs[0].variant is None:
        state.variant_table = compare_variants(runs[0], runs[1:], rules)

    update = session.options.update_baseline
    path = baseline_path(session)
    if path is None:
        if update:
            evaluation.failures.append(
                "ragev: --ragev-update-baseline needs a baseline path; set [baseline] path "
                "in the config or pass --ragev-baseline PATH"
            )
        return state
    state.baseline_path = path
    if not runs:
        if update:
            evaluation.failures.append(
                f"ragev: --ragev-update-baseline: no question ran, so {path} was left "
                "untouched; check -k, --ragev-variant and the node ids you selected"
            )
        return state
    if interrupted:
        evaluation.notes.append(f"ragev: run interrupted: baseline {path} left untouched")
        return state

    runs = _comparable_runs(session, runs)
    version = pytest_ragev.__version__
    configured: list[str | None] = [None, *(v.name for v in session.ragev.variants)]
    ran = {run.variant for run in runs}
    complete = all(name in ran for name in configured)
    if update:
        # A complete session replaces the file (even a damaged one); a partial one must
        # read it to keep the configurations that did not run.
        existing = None
        if not complete and path.exists():
            try:
                existing = load_snapshot(path)
            except BaselineError as exc:
                raise BaselineError(
                    f"{exc} (a partial update keeps the file's other runs, so it must read "
                    "the file: run --ragev-update-baseline without --ragev-variant or -k to "
                    "replace it)"
                ) from None
        merged = merge_snapshot(existing, runs, plugin_version=version, keep=configured)
        write_snapshot(path, merged.snapshot)
        message = f"ragev: baseline written to {path}"
        if not complete:
            written = ", ".join(_name(run.variant) for run in runs)
            kept = ", ".join(_name(v) for v in merged.kept) or "nothing"
            message += f" (updated: {written}; kept from the previous file: {kept})"
        evaluation.notes.append(message)
        if merged.dropped and existing is not None:
            evaluation.notes.append(
                f"ragev: dropped from {path}: {', '.join(_name(v) for v in merged.dropped)} "
                "(no longer configured, or recorded on another dataset or metric profile)"
            )
        evaluation.notes.extend(_subset_notes(session, runs, path))
        _remove_stale(path, evaluation)
        return state

    if not path.exists():
        if None not in ran:
            evaluation.failures.append(
                f"ragev: baseline {path} not found, and the base configuration did not run "
                "(only variants were selected); run without --ragev-variant to create it"
            )
            return state
        write_snapshot(path, Snapshot.from_runs(runs, plugin_version=version))
        evaluation.notes.extend(_subset_notes(session, runs, path))
        evaluation.failures.append(
            f"ragev: baseline not found, created {path}; commit it and rerun"
        )
        return state

    baseline = load_snapshot(path)
    overlaps = [check_compatible(baseline, run) for run in runs]  # BaselineError: exit 4
    if all(o == overlaps[0] for o in overlaps):
        evaluation.notes.extend(overlaps[0].lines())
    else:
        for run, overlap in zip(runs, overlaps, strict=True):
            evaluation.notes.extend(overlap.lines(_label(run.variant)))
    for run in runs:
        before = baseline.run_for(run.variant)
        assert before is not None
        state.baseline_runs[run.variant] = before
        comparison = compare(before, run, rules)
        state.comparisons.append(comparison)
        evaluation.failures.extend(comparison.failure_lines)
        state.regressions.extend(top_regressions(before, run, rules.top_regressions))
    if any(not c.passed for c in state.comparisons):
        obtained = obtained_path(path)
        merged = merge_snapshot(baseline, runs, plugin_version=version, keep=configured)
        write_snapshot(obtained, merged.snapshot)
        evaluation.notes.append(
            f"ragev: this run's snapshot written to {obtained}; diff it against {path}"
        )
    else:
        _remove_stale(path, evaluation)
    return state


def verbose_lines(session: RagevSession, evaluation: Evaluation) -> Iterator[str]:
    """Comparison tables and per-question diffs, for ``-v``."""
    from pytest_ragev.report.terminal import render_comparison, render_question_diffs

    state: GateState | None = getattr(session, "gate_state", None)
    if state is None:
        return
    for comparison in state.comparisons:
        yield from render_comparison(comparison)
    if state.regressions:
        yield from render_question_diffs(state.regressions)


def summary_lines(session: RagevSession) -> Iterator[str]:
    """The variant table and the baseline comparison, shown at every verbosity."""
    from pytest_ragev.report.terminal import render_comparison, render_variant_table

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
        failures=evaluation.verdict_failures(),
        errors=evaluation.errors,
        fallbacks=evaluation.fallbacks,
        task_id=session.task_id or "",
        start_time=session.progress.start_time,
        baseline_path=state.baseline_path if state else None,
        notes=evaluation.notes,
    )
