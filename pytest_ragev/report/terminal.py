"""The terminal summary: the metrics tables, the comparison, the diffs, the verdict lines.

Pure functions of an :class:`~pytest_ragev.evaluation.Outcome`; the plugin shell writes
the lines with their markup (``{"red": True}``) through pytest's terminal reporter.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence

from pytest_ragev.core import fmt
from pytest_ragev.evaluation import Outcome
from pytest_ragev.gate import Comparison, QuestionDiff, VariantTable


def _width(text: str) -> int:
    # Wide (CJK) characters take two terminal columns; combining marks none.
    total = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        total += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return total


def _pad(text: str, width: int, *, right: bool) -> str:
    gap = " " * max(0, width - _width(text))
    return gap + text if right else text + gap


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[bool]
) -> list[str]:
    """Aligned columns separated by two spaces; ``right`` per column."""
    widths = [_width(h) for h in header]
    for row in rows:
        widths = [max(w, _width(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = []
    for row in (header, *rows):
        cells = [
            _pad(cell, width, right=align)
            for cell, width, align in zip(row, widths, right, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def question_counts(comparison: Comparison) -> str:
    """`` (2 added, 0 removed, 1 changed)`` when the questions moved since the baseline."""
    if not (comparison.added or comparison.removed or comparison.changed):
        return ""
    return (f" ({len(comparison.added)} added, {len(comparison.removed)} removed, "
            f"{len(comparison.changed)} changed)")


def render_comparison(comparison: Comparison, *, full: bool = True) -> list[str]:
    """The metrics table: baseline, current, Δ, CI, p, n and status per metric.

    Short (``full=False``): one line when no metric changed, else the metrics that did.
    """
    what = "base configuration" if comparison.variant is None else f"variant {comparison.variant}"
    title = (f"ragev: {what} against the baseline, {len(comparison.common_qids)} shared "
             f"questions{question_counts(comparison)}")
    if not full and comparison.unchanged:
        return [title + ": no metric changed"]
    level = fmt.level(comparison.metrics[0].ci_level) if comparison.metrics else "90%"
    header = ["metric", "baseline", "current", "Δ", f"{level} CI", "p", "n", "status"]
    rows = []
    items = comparison.metrics if full else [
        m for m in comparison.metrics if m.status not in ("unchanged", "no data")
    ]
    for item in items:
        status = item.status if item.rule.enabled else f"{item.status} (not gated)"
        rows.append([
            item.metric,
            fmt.num(item.baseline_mean),
            fmt.num(item.current_mean),
            fmt.num(item.delta, signed=True),
            fmt.ci(item.ci_low, item.ci_high),
            fmt.p_value(item.p),
            str(item.n),
            status,
        ])
    body = table(header, rows, right=[False, True, True, True, False, True, True, False])
    lines = [title + ":", *("  " + line for line in body)]
    hidden = len(comparison.metrics) - len(items)
    if hidden:
        lines.append(f"  ({hidden} more metrics unchanged; --ragev-summary=full shows them)")
    return lines


def _metric_changes(diff: QuestionDiff, limit: int) -> str:
    changed = [
        (name, item) for name, item in diff.metrics.items()
        if item.delta is not None and item.delta != 0
    ]
    # Largest changes first; the rest would only repeat the story.
    changed.sort(key=lambda pair: -abs(pair[1].delta or 0.0))
    parts = [
        f"{name} {fmt.num(item.delta, signed=True)} "
        f"({fmt.num(item.before)} → {fmt.num(item.after)})"
        for name, item in changed[:limit]
    ]
    if len(changed) > limit:
        parts.append(f"… {len(changed) - limit} more")
    return ", ".join(parts) if parts else "no metric changed"


def render_question_diffs(diffs: Sequence[QuestionDiff], *, text_limit: int = 100) -> list[str]:
    """Lines for ``-v``: per question the metric changes, retrieval and answer before → after.

    Relevant passage ids are marked with ``*``.
    """
    if not diffs:
        return []
    lines = [f"ragev: {len(diffs)} most regressed question(s) (* = relevant passage):"]
    for diff in diffs:
        label = f"q{diff.qid}" if diff.variant is None else f"q{diff.qid} [{diff.variant}]"
        lines.append(f"  {label}  {fmt.shorten(diff.question, text_limit)}")
        if diff.error_after is not None and diff.error_before is None:
            lines.append(f"      error now: {fmt.shorten(diff.error_after, text_limit)}")
        else:
            lines.append(f"      {_metric_changes(diff, 4)}")
        lines.append(
            f"      retrieved {fmt.ids(diff.retrieved_before, diff.relevant)} → "
            f"{fmt.ids(diff.retrieved_after, diff.relevant)}"
        )
        if diff.answer_before != diff.answer_after:
            lines.append(
                f"      answer    {fmt.shorten(diff.answer_before, text_limit // 2)!r} → "
                f"{fmt.shorten(diff.answer_after, text_limit // 2)!r}"
            )
        else:
            lines.append("      answer    unchanged")
    return lines


def variant_cell(mean: float | None, delta: float | None, marker: str) -> str:
    """``0.650 +0.038▲`` (or just the mean for the base row)."""
    if delta is None:
        return fmt.num(mean)
    return f"{fmt.num(mean)} {fmt.num(delta, signed=True)}{marker}"


def render_variant_table(variants: VariantTable) -> list[str]:
    """Metric x variant with Δ against the base run; ▲/▼ mark significant changes.

    Metrics are rows and configurations columns: twelve metrics stay readable in a
    terminal where twelve metric columns would not.
    """
    header = ["metric", "(base)", *(str(row.name) for row in variants.rows)]
    rows = []
    for metric in variants.metrics:
        cells = [variant_cell(variants.base.cells[metric].mean, None, "")]
        for row in variants.rows:
            cell = row.cells[metric]
            # A blank where the marker would be keeps right-aligned figures in line.
            cells.append(variant_cell(cell.mean, cell.delta, cell.marker or " "))
        rows.append([metric, *cells])
    right = [False, *([True] * (len(header) - 1))]
    lines = ["ragev: variants against the base configuration:"]
    lines += ["  " + line for line in table(header, rows, right=right)]
    for row in variants.rows:
        lines.append(f"  {row.name} changes: {', '.join(row.changed_knobs) or 'nothing'}")
    lines.append("  ▲/▼: significantly better/worse than the base run (paired test, two-sided)")
    return lines


#: Terminal markup of one line: ``{"red": True, "bold": True}``.
Markup = dict[str, bool]


def terminal_lines(
    outcome: Outcome, *, verbose: int, full: bool = False
) -> Iterator[tuple[str, Markup]]:
    """The summary the terminal shows: a metrics table per run, counts, the variants
    table and the comparison (with ``-v``: the comparison tables and per-question
    diffs), warnings and notes, then one red line per failure and the verdict.

    Short (the default, ``full=False``, ``--ragev-summary=short``): a variant's own
    metrics table is left out when the variants table shows its means, and a
    comparison in which no metric changed is one line."""
    yield "", {}
    thresholds = outcome.thresholds
    gate = outcome.gate
    shown_in_table = (
        set() if full or gate.variant_table is None
        else {row.name for row in gate.variant_table.rows}
    )
    for run in outcome.runs:
        if run.variant is not None and run.variant in shown_in_table and not any(
            t.variant == run.variant for t in thresholds
        ):
            continue
        label = f"variant {run.variant}" if run.variant else "base configuration"
        yield (
            f"ragev: {run.dataset_id} ({label}), {len(run.samples)} questions, "
            f"profile {run.profile}", {"bold": True},
        )
        yield f"  {'metric':<12} {'mean':>7} {'n':>6} {'threshold':>10}  verdict", {}
        results = {t.metric: t for t in thresholds if t.variant == run.variant}
        for name, item in run.summary.items():
            result = results.get(name)
            verdict = "" if result is None else ("ok" if result.passed else "FAIL")
            threshold = "" if result is None else fmt.num(result.threshold)
            markup: Markup = {"red": True} if verdict == "FAIL" else {}
            mean = fmt.num(item.mean, missing="—")
            yield f"  {name:<12} {mean:>7} {item.n:>6} {threshold:>10}  {verdict}", markup
    facts = outcome.facts
    counts = [f"errors {outcome.errors}", f"fallback answers {outcome.fallbacks}"]
    if facts.cache_hits or facts.cache_misses:
        counts.append(f"answer cache {facts.cache_hits} hits / {facts.cache_misses} misses")
    yield "ragev: " + ", ".join(counts), {}
    if gate.variant_table is not None:
        for line in render_variant_table(gate.variant_table):
            yield line, {}
    for comparison in gate.comparisons:
        for line in render_comparison(comparison, full=full):
            yield line, {}
    if verbose > 0 and gate.regressions:
        for line in render_question_diffs(gate.regressions):
            yield line, {}
    for warning in outcome.warnings:
        yield f"ragev: warning: {warning}", {"yellow": True}
    for note in outcome.notes:
        yield note, {"yellow": True}
    for failure in outcome.verdict_failures():
        yield failure, {"red": True, "bold": True}
    if not outcome.failed:
        yield "ragev: verdict passed", {"green": True, "bold": True}
        return
    reasons = []
    # The not-compared line is a failure too, but it is not a check that failed.
    checks = len(outcome.failures) - (gate.not_compared is not None)
    if checks:
        reasons.append(f"{checks} checks")
    if gate.not_compared is not None:
        reasons.append("gate not compared, exit status 4")
    if outcome.errors:
        reasons.append(f"{outcome.errors} errors")
    if facts.interrupted:
        reasons.append(facts.interrupted)
    yield f"ragev: verdict FAILED ({', '.join(reasons)})", {"red": True, "bold": True}
