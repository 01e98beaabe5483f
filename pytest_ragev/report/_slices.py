"""The slices table every report shows: one row per language or tag slice of a run.

Each renderer (terminal, Markdown, HTML, JSON, JUnit) formats the same rows: the slice,
its questions, each metric's mean over them and, when the run was gated with ``[gate]
slices``, the slice's change against the baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragev.core import fmt
from pytest_ragev.evaluation import Outcome
from pytest_ragev.evaluation.slices import RunSlices, SliceSummary
from pytest_ragev.gate.compare import Comparison, MetricComparison, SliceComparison

#: The metrics the terminal's slices table shows first, when the run has them.
TERMINAL_METRICS = ("recall", "ndcg10", "rougel")
#: At most this many metric columns in the terminal (the other reports show every one).
TERMINAL_COLUMNS = 4


@dataclass(frozen=True)
class SliceRow:
    """One slice of one run, with its comparison when the gate tested it."""

    item: SliceSummary
    compared: SliceComparison | None = None

    def metric(self, name: str) -> MetricComparison | None:
        """The slice's comparison of ``name``, if the gate tested it."""
        return None if self.compared is None else self.compared.get(name)

    def cell(self, name: str) -> str:
        """``0.812``, or ``0.812 (−0.051)`` when compared, ``—`` without a value."""
        summary = self.item.summary.get(name)
        mean = fmt.num(None if summary is None else summary.mean, missing="—")
        compared = self.metric(name)
        if compared is None or compared.delta is None:
            return mean
        mark = " ▼" if compared.regressed else ""
        return f"{mean} ({fmt.num(compared.delta, signed=True)}){mark}"


def slice_rows(outcome: Outcome, variant: str | None = None) -> list[SliceRow]:
    """The rows of the run of ``variant``'s slices (none when it has nothing to show: a
    single language slice says no more than the run's own means)."""
    found = outcome.slices_of(variant)
    if found is None or not found.worth_showing:
        return []
    comparison = next((c for c in outcome.gate.comparisons if c.variant == variant), None)
    tested = {item.key: item for item in comparison.slices} if comparison else {}
    return [SliceRow(item=item, compared=tested.get(item.key)) for item in found.slices]


def shown_metrics(outcome: Outcome, rows: Sequence[SliceRow], *, limit: int | None) -> list[str]:
    """The metric columns: every metric of the run, or (``limit``) the regressed ones
    first, then :data:`TERMINAL_METRICS`, then the run's order."""
    names: list[str] = []
    for row in rows:
        for name in row.item.summary:
            if name not in names:
                names.append(name)
    if limit is None:
        return names
    first = [name for name in names if any(
        (m := row.metric(name)) is not None and m.regressed for row in rows)]
    first += [name for name in TERMINAL_METRICS if name in names and name not in first]
    first += [name for name in names if name not in first]
    return first[:limit]


def small_line(slices: RunSlices | None) -> str | None:
    """The line naming the slices left out for their size, or ``None``."""
    if slices is None or not slices.small:
        return None
    listed = ", ".join(f"{key} ({count})" for key, count in slices.small[:8])
    more = f" and {len(slices.small) - 8} more" if len(slices.small) > 8 else ""
    return (f"{len(slices.small)} slice(s) under {slices.min_size} questions left out: "
            f"{listed}{more}")


def slices_json(slices: RunSlices | None) -> dict[str, Any]:
    """``data.slices``: per slice key, its questions and each metric's mean and n."""
    if slices is None:
        return {}
    return {
        item.key: {
            "questions": item.questions,
            "metrics": {name: summary.mean for name, summary in item.summary.items()},
            "counts": {name: summary.n for name, summary in item.summary.items()},
        }
        for item in slices.slices
    }


def comparison_slices_json(comparison: Comparison) -> dict[str, Any]:
    """A comparison's tested slices: per slice key, its n and each metric's change."""
    return {
        item.key: {
            "n": item.n,
            "metrics": {
                m.metric: {"baseline": m.baseline_mean, "current": m.current_mean,
                           "delta": m.delta, "p": m.p, "p_raw": m.p_raw, "n": m.n,
                           "status": m.status}
                for m in item.metrics
            },
        }
        for item in comparison.slices
    }


def render_slices(outcome: Outcome) -> list[str]:
    """The terminal's slices table of the base run (or the first run)."""
    variant = outcome.runs[0].variant if outcome.runs else None
    rows = slice_rows(outcome, variant)
    if not rows:
        return []
    names = shown_metrics(outcome, rows, limit=TERMINAL_COLUMNS)
    header = ["slice", "questions", *names]
    body = [[row.item.key, str(row.item.questions), *(row.cell(name) for name in names)]
            for row in rows]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    lines = [f"ragev: slices ({len(rows)}; by language and tag):"]
    for line in (header, *body):
        cells = [line[0].ljust(widths[0]),
                 *(text.rjust(width) for text, width in zip(line[1:], widths[1:], strict=True))]
        lines.append("  " + "  ".join(cells))
    small = small_line(outcome.slices_of(variant))
    if small is not None:
        lines.append(f"  {small}")
    return lines
