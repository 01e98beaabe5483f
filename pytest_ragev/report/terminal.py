"""The terminal summary: the metrics tables, the comparison, the diffs, the verdict lines.

Pure functions of an :class:`~pytest_ragev.evaluation.Outcome`; the plugin shell writes
the lines with their markup (``{"red": True}``) through pytest's terminal reporter.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence

from pytest_ragev.config import Pricing
from pytest_ragev.core import fmt
from pytest_ragev.core.results import RunResult
from pytest_ragev.evaluation import (
    LowestQuestions,
    Outcome,
    QuestionError,
    chunk_share,
    count_kinds,
    usage,
)
from pytest_ragev.gate import Comparison, QuestionDiff, VariantTable
from pytest_ragev.report._format import pipeline_label, tolerance_note
from pytest_ragev.report._slices import render_slices


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
    note = tolerance_note(comparison, [item.metric for item in items])
    if note is not None:
        lines.append(f"  ({note})")
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
        if diff.answer_changed:
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

#: Questions the Errors section lists without ``-v``.
ERRORS_SHOWN = 10
#: Regressed questions the summary shows without ``-v``.
REGRESSIONS_SHOWN = 3
#: Weakest questions the summary names without ``-v`` (no baseline to compare with).
WEAKEST_NAMED = 5


def render_errors(errors: Sequence[QuestionError], *, limit: int | None = ERRORS_SHOWN,
                  text_limit: int = 160) -> list[str]:
    """The Errors section: the count per error type, then per question its id, its text
    and the error line (``limit`` questions; ``None``: all)."""
    if not errors:
        return []
    kinds = ", ".join(f"{kind} {count}" for kind, count in count_kinds(errors))
    lines = [f"ragev: errors: {len(errors)} question(s) raised ({kinds}):"]
    shown = errors if limit is None else errors[:limit]
    for error in shown:
        lines.append(f"  {error.label}  {fmt.shorten(error.question, text_limit)}")
        lines.append(f"      {fmt.shorten(error.error, text_limit)}")
    if len(shown) < len(errors):
        lines.append(f"  … {len(errors) - len(shown)} more (-v lists all; every one is in "
                     "the JSON report's data.errors)")
    return lines


#: Characters of a judge's reason a ``-v`` line shows.
REASON_CHARS = 160


def render_verdicts(runs: Sequence[RunResult]) -> list[str]:
    """``-v``: every judged score with the judge's reason (and a custom metric's reason),
    question by question: ``  q3 correctness 0.75 — 6 of 7 facts of the reference``."""
    lines: list[str] = []
    for run in runs:
        rows = [(sample, verdict) for sample in run.samples for verdict in sample.verdicts
                if verdict.reason or verdict.error]
        if not rows:
            continue
        where = "" if run.variant is None else f" [{run.variant}]"
        lines.append(f"ragev: verdicts{where} ({len(rows)}, the judge's reasons):")
        for sample, verdict in rows:
            score = fmt.num(verdict.score, digits=2, missing="error")
            why = verdict.error if verdict.error is not None else verdict.reason
            replayed = " (replayed)" if verdict.replayed else ""
            lines.append(f"  q{sample.qid} {verdict.metric} {score}{replayed} — "
                         f"{fmt.shorten(why, REASON_CHARS)}")
    return lines


def run_details(run: RunResult, pricing: Pricing | None = None) -> list[str]:
    """Below a run's metrics table: which code answered, and the latency and tokens
    the pipeline reported in ``Answer.meta``, what judging cost, and (``pricing``) what
    both cost."""
    lines = []
    label = pipeline_label(run)
    if label:
        lines.append(f"  pipeline: {label}")
    figures = usage(run.samples, pricing)
    if figures.reported:
        lines.append(f"  {figures.text()}")
    return lines


def drill_down(outcome: Outcome, *, verbose: int) -> list[str]:
    """After a regression without ``-v``: the top questions and where the rest are."""
    regressions = outcome.gate.regressions
    regressed = any(c.regressions for c in outcome.gate.comparisons)
    if verbose > 0 or not regressions or not regressed:
        return []
    lines = render_question_diffs(regressions[:REGRESSIONS_SHOWN])
    where = [f"-v lists {len(regressions)}" if len(regressions) > REGRESSIONS_SHOWN
             else "-v shows them with every run's tables"]
    where.append(f"the HTML report {outcome.report_html} shows each question"
                 if outcome.report_html else "--ragev-html PATH shows each question")
    lines.append(f"ragev: per-question details: {'; '.join(where)}")
    return lines


def weakest_pointer(outcome: Outcome) -> list[str]:
    """Without ``-v`` and without a comparison: one line naming the weakest questions
    and where they are shown (none when every question scores perfectly)."""
    weak = [view for view in outcome.lowest if view.samples]
    if not weak:
        return []
    labels = list(dict.fromkeys(
        f"q{s.qid}" if s.variant is None else f"q{s.qid} [{s.variant}]"
        for view in weak for s in view.samples))
    names = ", ".join(labels[:WEAKEST_NAMED])
    if len(labels) > WEAKEST_NAMED:
        names += f" and {len(labels) - WEAKEST_NAMED} more"
    html = (f"the HTML report {outcome.report_html} shows each question" if outcome.report_html
            else "--ragev-html PATH shows each question")
    by = " and ".join(view.metric for view in weak)
    return [f"ragev: weakest questions by {by}: {names}; -v shows them with their "
            f"answers, {html}"]


def render_lowest(views: Sequence[LowestQuestions], *, text_limit: int = 100,
                  passages_shown: int = 5) -> list[str]:
    """Per metric, the lowest-scoring questions: the question, the reference answer, the
    retrieved ids (relevant ones marked ``*``) and the generated answer."""
    lines = []
    for view in views:
        if not view.samples:
            lines.append(f"ragev: no question scores below 1 on {view.metric} (n={view.n})")
            continue
        lines.append(f"ragev: {len(view.samples)} lowest-scoring question(s) by {view.metric} "
                     f"of {view.n} (* = relevant passage):")
        for sample in view.samples:
            lines.append(f"  q{sample.qid}  {view.metric} {fmt.num(sample.metrics[view.metric])}"
                         f"  {fmt.shorten(sample.question, text_limit)}")
            lines.append(f"      retrieved {fmt.ids(sample.retrieval_ids, sample.relevant)}"
                         f"  relevant {fmt.ids(sorted(sample.relevant), sample.relevant)}")
            lines.append(f"      reference {fmt.shorten(sample.generated_gt, text_limit)!r}")
            lines.append(f"      answer    {fmt.shorten(sample.shown_answer, text_limit)!r}")
    return lines


def terminal_lines(
    outcome: Outcome, *, verbose: int, full: bool = False, slices: bool = False
) -> Iterator[tuple[str, Markup]]:
    """The summary the terminal shows: a metrics table per run, counts, the variants
    table and the comparison (with ``-v``: the comparison tables and per-question
    diffs), warnings and notes, then one red line per failure and the verdict (none
    for a shard, ``--ragev-shard``: its note says it was not gated).

    Short (the default, ``full=False``, ``--ragev-summary=short``): a variant's own
    metrics table is left out when the variants table shows its means, and a
    comparison in which no metric changed is one line. The slices table (languages,
    tags) is shown with ``slices`` (``--ragev-slices``) or when a slice regressed."""
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
        # Custom metrics may have long names and large values (tokens, milliseconds).
        wide = max([12, *(len(name) for name in run.summary)])
        tall = max([7, *(len(fmt.num(item.mean, missing="—")) for item in run.summary.values())])
        yield f"  {'metric':<{wide}} {'mean':>{tall}} {'n':>6} {'threshold':>10}  verdict", {}
        # The run's own thresholds; a slice's ([thresholds.slice.<name>]) are its lines.
        results = {t.metric: t for t in thresholds
                   if t.variant == run.variant and t.slice is None}
        for name, item in run.summary.items():
            result = results.get(name)
            verdict = "" if result is None else ("ok" if result.passed else "FAIL")
            threshold = "" if result is None else fmt.num(result.threshold)
            markup: Markup = {"red": True} if verdict == "FAIL" else {}
            mean = fmt.num(item.mean, missing="—")
            yield (f"  {name:<{wide}} {mean:>{tall}} {item.n:>6} {threshold:>10}  {verdict}",
                   markup)
        for line in run_details(run, outcome.pricing):
            yield line, {}
    facts = outcome.facts
    counts = [f"errors {outcome.errors}", f"fallback answers {outcome.fallbacks}"]
    chunks = chunk_share([s for run in outcome.runs for s in run.samples])
    if chunks.chunks:
        counts.append(f"unattributed chunks {chunks.unattributed}/{chunks.chunks} "
                      f"({fmt.percent(chunks.share)})")
    if facts.cache_hits or facts.cache_misses:
        counts.append(f"answer cache {facts.cache_hits} hits / {facts.cache_misses} misses")
    yield "ragev: " + ", ".join(counts), {}
    for line in render_errors(outcome.error_list, limit=None if verbose > 0 else ERRORS_SHOWN):
        yield line, {"red": True} if line.startswith("ragev:") else {}
    gate = outcome.gate
    if gate.variant_table is not None:
        for line in render_variant_table(gate.variant_table):
            yield line, {}
    for comparison in gate.comparisons:
        for line in render_comparison(comparison, full=full):
            yield line, {}
    if slices or outcome.slice_regressed:
        for line in render_slices(outcome):
            yield line, {}
    if verbose > 0 and gate.regressions:
        for line in render_question_diffs(gate.regressions):
            yield line, {}
    for line in drill_down(outcome, verbose=verbose):
        yield line, {}
    if verbose > 0:
        for line in render_verdicts(outcome.runs):
            yield line, {}
    if verbose > 0 and not gate.comparisons:
        for line in render_lowest(outcome.lowest):
            yield line, {}
    elif not gate.comparisons:
        for line in weakest_pointer(outcome):
            yield line, {}
    for warning in outcome.warnings:
        yield f"ragev: warning: {warning}", {"yellow": True}
    for note in outcome.notes:
        yield note, {"yellow": True}
    for failure in outcome.verdict_failures():
        yield failure, {"red": True, "bold": True}
    if outcome.shard is not None:
        # A shard is not gated: its note said so in one line, and the merged run has the
        # verdict. Its own errors (its exit status) are the red lines above.
        return
    if not outcome.failed:
        yield "ragev: verdict passed", {"green": True, "bold": True}
        return
    reasons = []
    # The not-compared line is a failure too, but it is not a check that failed.
    checks = len(outcome.failures) - (gate.not_compared is not None)
    if checks:
        reasons.append(f"{checks} check{'' if checks == 1 else 's'}")
    if gate.not_compared is not None:
        reasons.append("gate not compared, exit status 4")
    if outcome.errors:
        reasons.append(f"{outcome.errors} error{'' if outcome.errors == 1 else 's'}")
    if facts.interrupted:
        reasons.append(facts.interrupted)
    yield f"ragev: verdict FAILED ({', '.join(reasons)})", {"red": True, "bold": True}
