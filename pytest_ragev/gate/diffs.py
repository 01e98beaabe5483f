"""Per-question diffs (the most regressed questions) and the variants table."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from pytest_ragev.core.record import same_answer
from pytest_ragev.core.results import Direction, RunResult, SampleResult
from pytest_ragev.core.tables import changed_keys
from pytest_ragev.gate.compare import PairedTable, metric_direction, metric_order
from pytest_ragev.gate.rules import DEFAULT_TOP, GateRules
from pytest_ragev.gate.stats import decision_band, paired_stats


@dataclass(frozen=True)
class MetricDelta:
    """One metric of one question before and after (``None`` where it did not apply)."""

    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        """``after - before`` when both exist."""
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


@dataclass(frozen=True)
class QuestionDiff:
    """What changed for one question between the baseline and the current run.

    ``worsening`` ranks the diffs: the sum over shared metrics of the change in each
    metric's worse direction (``inf`` when the question newly failed with an error).
    ``relevant`` holds the relevant passage ids, so renderers can mark them.
    ``answer_before``/``answer_after`` are the answers as shown (one a baseline keeps in
    part ends in "…"); ``answer_changed`` tells whether the whole answers differ.
    """

    qid: int
    question: str
    worsening: float
    metrics: dict[str, MetricDelta]
    retrieved_before: list[int]
    retrieved_after: list[int]
    relevant: frozenset[int]
    answer_before: str
    answer_after: str
    answer_changed: bool
    error_before: str | None = None
    error_after: str | None = None
    variant: str | None = None


def _relevant(sample: SampleResult) -> frozenset[int]:
    return frozenset(pid for group in sample.retrieval_gt for pid in group)


def question_diff(
    before: SampleResult,
    after: SampleResult,
    directions: Mapping[str, Direction],
    *,
    metric: str | None = None,
) -> QuestionDiff:
    """The diff of one question (``metric`` restricts the ranking score to one metric)."""
    names = [m for m in after.metrics if m in before.metrics or m in after.metrics]
    names += [m for m in before.metrics if m not in names]
    deltas = {m: MetricDelta(before.metrics.get(m), after.metrics.get(m)) for m in names}
    if after.error is not None and before.error is None:
        worsening = math.inf
    else:
        worsening = 0.0
        for name, item in deltas.items():
            if metric is not None and name != metric:
                continue
            change = item.delta
            if change is None:
                continue
            worsening += -change if directions.get(name, "higher") == "higher" else change
    return QuestionDiff(
        qid=after.qid,
        question=after.question or before.question,
        worsening=worsening,
        metrics=deltas,
        retrieved_before=list(before.retrieval_ids),
        retrieved_after=list(after.retrieval_ids),
        relevant=_relevant(after) | _relevant(before),
        answer_before=before.shown_answer,
        answer_after=after.shown_answer,
        answer_changed=not same_answer(before, after),
        error_before=before.error,
        error_after=after.error,
        variant=after.variant,
    )


def top_regressions(
    baseline_run: RunResult,
    current_run: RunResult,
    n: int = DEFAULT_TOP,
    metric: str | None = None,
    *,
    skip: Collection[int] = (),
    table: PairedTable | None = None,
) -> list[QuestionDiff]:
    """The ``n`` shared questions that got worst, worst first (ties by qid).

    Only questions that actually got worse are listed. With ``metric`` the ranking uses
    that metric alone; otherwise the sum of all metrics' worse-direction changes.
    A question that newly raised an error ranks first. ``skip`` holds questions edited
    since the baseline (not comparable, so never listed).

    The ranking is computed for every shared question at once (arrays); the diffs
    themselves are built only for the ``n`` listed. ``table`` (built with the same
    ``skip``, :func:`~pytest_ragev.gate.compare.paired_table`) saves pairing the runs again.
    """
    if n <= 0:
        return []
    import numpy as np

    names = metric_order(current_run, baseline_run)
    if metric is not None:
        names = [metric] if metric in names else []
    directions = {name: metric_direction(name, current_run, baseline_run) for name in names}
    if table is None or table.names != names:
        table = PairedTable(baseline_run, current_run, names, skip=skip)
    before = {s.qid: s for s in baseline_run.samples}
    after = {s.qid: s for s in current_run.samples}
    # The change in each metric's worse direction, where both runs have a finite value.
    worse = np.array([1.0 if directions[m] == "higher" else -1.0 for m in names])
    change = np.where(table.paired, (table.before - table.after) * worse, 0.0)
    worsening = change.sum(axis=1)
    newly_failed = np.fromiter(
        (after[q].error is not None and before[q].error is None for q in table.qids.tolist()),
        dtype=bool, count=len(table.qids))
    worsening = np.where(newly_failed, math.inf, worsening)
    listed = np.flatnonzero(worsening > 1e-12)
    # Worst first, ties by qid (the table is in qid order, so a stable sort keeps it).
    ranked = listed[np.argsort(-worsening[listed], kind="stable")][:n]
    directions_all = {
        name: metric_direction(name, current_run, baseline_run)
        for name in metric_order(current_run, baseline_run)
    }
    return [
        question_diff(before[q], after[q], directions_all, metric=metric)
        for q in table.qids[ranked].tolist()
    ]


# --------------------------------------------------------------------------- variants


@dataclass(frozen=True)
class VariantCell:
    """One metric of one variant: its mean, and its paired change against the base run."""

    mean: float | None
    n: int
    delta: float | None
    p: float | None
    significant: bool
    better: bool | None

    @property
    def marker(self) -> str:
        """``▲``/``▼`` for a significant improvement/worsening, empty otherwise."""
        if not self.significant or self.better is None:
            return ""
        return "▲" if self.better else "▼"


@dataclass(frozen=True)
class VariantRow:
    """One row of the variant table (``name`` is ``None`` for the base configuration)."""

    name: str | None
    cells: dict[str, VariantCell]
    changed_knobs: list[str]


@dataclass(frozen=True)
class VariantTable:
    """Variant x metric: means, changes against the base run, significance markers."""

    metrics: list[str]
    base: VariantRow
    rows: list[VariantRow]


def compare_variants(
    base: RunResult, variants: Sequence[RunResult], rules: GateRules | None = None
) -> VariantTable:
    """The variants table: each variant's paired comparison with the base run.

    The test is two-sided here (a variant may be better or worse, and neither is a
    failure): a cell is marked when either one-sided p-value is below half the metric's
    significance.
    """
    rules = rules or GateRules()
    names = metric_order(base, *variants)
    base_cells = {
        name: VariantCell(
            mean=base.summary_of(name).mean, n=base.summary_of(name).n, delta=None, p=None,
            significant=False, better=None,
        )
        for name in names
    }
    base_row = VariantRow(name=None, cells=base_cells, changed_knobs=[])
    rows = []
    for variant in variants:
        table = PairedTable(base, variant, names)
        pairs = {name: table.pair(name) for name in names}
        stats = paired_stats(
            pairs,
            alphas={name: rules.rule_for(name).significance for name in names},
            resamples=rules.resamples,
            seed=rules.seed,
            # A cell is marked when either one-sided p is below half the significance.
            decide={name: decision_band(rules.rule_for(name).significance, two_sided=True)
                    for name in names},
        )
        cells = {}
        for name in names:
            summary = variant.summary_of(name)
            item = stats.get(name)
            if item is None:
                cells[name] = VariantCell(
                    mean=summary.mean, n=summary.n, delta=None, p=None,
                    significant=False, better=None,
                )
                continue
            direction = metric_direction(name, variant, base)
            p = min(1.0, 2.0 * min(item.p_lower, item.p_higher))
            better = None if item.delta == 0 else (item.delta > 0) == (direction == "higher")
            cells[name] = VariantCell(
                mean=summary.mean, n=summary.n, delta=item.delta, p=p,
                significant=p < rules.rule_for(name).significance and item.delta != 0,
                better=better,
            )
        rows.append(
            VariantRow(
                name=variant.variant or "?",
                cells=cells,
                changed_knobs=changed_keys(base.params, variant.params),
            )
        )
    return VariantTable(metrics=names, base=base_row, rows=rows)
