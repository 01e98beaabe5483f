"""What every report shows, as one plain-data object the renderers read."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pytest_ragev.core.results import RunResult
from pytest_ragev.evaluation import LowestQuestions, Outcome, QuestionError
from pytest_ragev.gate import Comparison, QuestionDiff, ThresholdResult, VariantTable


@dataclass(frozen=True)
class Verdict:
    """Whether the session passed, and the ``ragev: ...`` lines that made it fail."""

    passed: bool
    failures: Sequence[str] = ()


@dataclass(frozen=True)
class ReportModel:
    """Everything a report renders.

    ``runs`` holds the base run first, then the variants (only variants when the base
    configuration did not run: see :attr:`base_ran`). ``comparisons`` are the runs
    compared with their baseline runs (``baseline_runs``, keyed by variant name, ``None``
    for the base configuration); ``regressions`` the most regressed questions of all
    compared runs (each :class:`QuestionDiff` names its variant). ``notes`` carries extra
    lines such as the questions added or removed since the baseline, ``warnings`` the
    run's warnings (dataset, unattributed chunks, unread knobs). ``started_at`` is
    ISO 8601 text, ``duration_s`` seconds. ``not_compared`` is the reason the baseline
    could not be used (``None`` when it was, or when there is none); ``new_variants``
    the variants the baseline has no run of (not compared). ``error_list`` names the
    questions that raised; ``lowest`` holds the base run's lowest-scoring questions and
    ``passages`` the texts of the passages the per-question views name.
    """

    runs: Sequence[RunResult]
    verdict: Verdict
    thresholds: Sequence[ThresholdResult] = ()
    comparisons: Sequence[Comparison] = ()
    baseline_runs: Mapping[str | None, RunResult] = field(default_factory=dict)
    variant_table: VariantTable | None = None
    regressions: Sequence[QuestionDiff] = ()
    errors: int = 0
    fallbacks: int = 0
    task_id: str | None = None
    started_at: str | None = None
    duration_s: float | None = None
    baseline_path: str | None = None
    notes: Sequence[str] = ()
    title: str = "pytest-ragev"
    not_compared: str | None = None
    new_variants: Sequence[str] = ()
    warnings: Sequence[str] = ()
    error_list: Sequence[QuestionError] = ()
    lowest: Sequence[LowestQuestions] = ()
    passages: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        *,
        runs: Sequence[RunResult],
        passed: bool,
        failures: Sequence[str] = (),
        thresholds: Sequence[ThresholdResult] = (),
        comparisons: Sequence[Comparison] = (),
        baseline_runs: Mapping[str | None, RunResult] | None = None,
        variant_table: VariantTable | None = None,
        regressions: Sequence[QuestionDiff] = (),
        errors: int = 0,
        fallbacks: int = 0,
        task_id: str | None = None,
        start_time: str | None = None,
        duration_s: float | None = None,
        baseline_path: str | os.PathLike[str] | None = None,
        notes: Sequence[str] = (),
        not_compared: str | None = None,
        new_variants: Sequence[str] = (),
        warnings: Sequence[str] = (),
        error_list: Sequence[QuestionError] = (),
        lowest: Sequence[LowestQuestions] = (),
        passages: Mapping[int, str] | None = None,
    ) -> ReportModel:
        """The model from the session's pieces (copies the sequences).

        Without ``duration_s`` the duration is the time since ``start_time`` (ISO 8601
        with a UTC offset), when that parses.
        """
        if duration_s is None and start_time:
            try:
                started = datetime.fromisoformat(start_time)
            except ValueError:
                started = None
            if started is not None and started.tzinfo is not None:
                duration_s = max(0.0, (datetime.now(UTC) - started).total_seconds())
        return cls(
            runs=list(runs),
            verdict=Verdict(passed=passed, failures=list(failures)),
            thresholds=list(thresholds),
            comparisons=list(comparisons),
            baseline_runs=dict(baseline_runs or {}),
            variant_table=variant_table,
            regressions=list(regressions),
            errors=errors,
            fallbacks=fallbacks,
            task_id=task_id or None,
            started_at=start_time,
            duration_s=duration_s,
            baseline_path=None if baseline_path is None else str(baseline_path),
            notes=list(notes),
            not_compared=not_compared,
            new_variants=list(new_variants),
            warnings=list(warnings),
            error_list=list(error_list),
            lowest=list(lowest),
            passages=dict(passages or {}),
        )

    @classmethod
    def from_outcome(cls, outcome: Outcome) -> ReportModel:
        """The model of a finished run."""
        gate = outcome.gate
        return cls.build(
            runs=outcome.runs,
            thresholds=outcome.thresholds,
            comparisons=gate.comparisons,
            baseline_runs=gate.baseline_runs,
            variant_table=gate.variant_table,
            regressions=gate.regressions,
            passed=not outcome.failed,
            failures=[outcome.relative(line) for line in outcome.verdict_failures()],
            errors=outcome.errors,
            fallbacks=outcome.fallbacks,
            task_id=outcome.facts.task_id,
            start_time=outcome.facts.start_time,
            baseline_path=outcome.baseline_shown,
            notes=[outcome.relative(line) for line in outcome.notes],
            warnings=[outcome.relative(line) for line in outcome.warnings],
            error_list=outcome.error_list,
            lowest=outcome.lowest,
            passages=outcome.passages,
            not_compared=gate.not_compared,
            new_variants=gate.new_variants,
        )

    @property
    def base(self) -> RunResult | None:
        """The first run, if any ran: the base configuration's when :attr:`base_ran`,
        else the first variant's (a session of ``--ragev-variant`` runs only)."""
        return self.runs[0] if self.runs else None

    @property
    def base_ran(self) -> bool:
        """Whether the base configuration ran (the first run is not a variant)."""
        return bool(self.runs) and self.runs[0].variant is None

    @property
    def variants(self) -> list[RunResult]:
        """The runs after the first, in configuration order: the variants when
        :attr:`base_ran`, else all variants but the first."""
        return list(self.runs[1:])

    @property
    def comparison(self) -> Comparison | None:
        """The base run's comparison with its baseline, if it was compared."""
        return next((c for c in self.comparisons if c.variant is None), None)

    @property
    def variant_comparisons(self) -> list[Comparison]:
        """The variants' comparisons with their own baseline runs."""
        return [c for c in self.comparisons if c.variant is not None]

    @property
    def baseline(self) -> RunResult | None:
        """The baseline's run of the base configuration."""
        return self.baseline_runs.get(None)
