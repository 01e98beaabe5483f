"""The Markdown summary for CI (``$GITHUB_STEP_SUMMARY``) and ``--ragev-markdown``."""

from __future__ import annotations

import html
from collections.abc import Sequence

from pytest_ragev.core import fmt
from pytest_ragev.evaluation import LowestQuestions, Outcome, QuestionError, count_kinds
from pytest_ragev.gate import Comparison, QuestionDiff, ThresholdResult
from pytest_ragev.report import _format
from pytest_ragev.report._slices import shown_metrics, slice_rows, small_line
from pytest_ragev.report.terminal import variant_cell

_TEXT_LIMIT = 160


def cell(text: str, limit: int = _TEXT_LIMIT) -> str:
    """User text made safe for one table cell: one line, HTML and pipes escaped."""
    # GitHub renders inline HTML inside Markdown, so a question containing "<details>"
    # would restructure the page; a "|" would split the cell.
    return html.escape(fmt.shorten(text, limit), quote=False).replace("|", "\\|")


def code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _headline(outcome: Outcome) -> list[str]:
    mark = "❌" if outcome.failed else ("⏸️" if outcome.shard is not None else "✅")
    lines = [f"## {_format.TITLE}: {mark} {_format.verdict_word(outcome)}", ""]
    facts = _format.run_facts(outcome, value=code)
    if outcome.facts.start_time:
        facts.append(f"started {outcome.facts.start_time}")
    lines.append(" · ".join(facts))
    if outcome.baseline_shown:
        lines += ["", f"Baseline: {code(outcome.baseline_shown)}"]
    return lines


def _failures(outcome: Outcome) -> list[str]:
    if not outcome.verdict_failures():
        return []
    lines = ["", "### Failures", ""]
    lines += [f"- {code(line)}" for line in outcome.verdict_failures()]
    return lines


def _comparison_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    level = fmt.level(comparison.metrics[0].ci_level) if comparison.metrics else "90%"
    header = ["metric", "baseline", "current", "Δ", f"{level} CI", "p", "n", "status"]
    icons = {"regressed": "🔴 ", "improved": "🟢 "}
    rows = []
    for item in comparison.metrics:
        status = icons.get(item.status, "") + item.status
        if not item.rule.enabled:
            status += " (not gated)"
        rows.append([
            item.metric, fmt.num(item.baseline_mean), fmt.num(item.current_mean),
            fmt.num(item.delta, signed=True), fmt.ci(item.ci_low, item.ci_high),
            fmt.p_value(item.p), str(item.n), status,
        ])
    return header, rows


def _question_changes(comparison: Comparison) -> list[str]:
    """The questions left out of a comparison, by kind, with their ids."""
    kinds = _format.question_changes(comparison)
    if not kinds:
        return []
    parts = [f"{len(ids)} {kind} ({fmt.listed(ids, _format.IDS_SHOWN)})" for kind, ids in kinds]
    legend = "; ".join(f"{kind}: {_format.CHANGE_MEANINGS[kind]}" for kind, _ in kinds)
    return ["", f"Not compared: {', '.join(parts)}. ({legend}.)"]


def _metrics(outcome: Outcome) -> list[str]:
    lines = ["", "### Metrics", ""]
    if outcome.comparison is not None:
        header, rows = _comparison_rows(outcome.comparison)
        lines += _table(header, rows, "lrrrlrrl")
        lines += [
            "",
            "Means over the questions both runs share; Δ = current − baseline; p is the "
            "one-sided paired permutation p-value in the direction of the change."
            + _format.correction_note(outcome.comparison),
        ]
        tolerance = _format.tolerance_note(outcome.comparison)
        if tolerance is not None:
            lines += ["", tolerance[0].upper() + tolerance[1:] + "."]
        lines += _question_changes(outcome.comparison)
        return lines
    if outcome.gate.not_compared is not None:
        reason = cell(outcome.gate.not_compared, 400)
        lines += [f"**Gate not compared** with the baseline: {reason}", ""]
    base = outcome.base
    if base is None:
        return [*lines, "No run."]
    missing = _format.base_missing_note(outcome, value=code)
    if missing is not None:
        lines.append(missing)
        if outcome.variant_comparisons:
            return lines
        lines += ["", f"Means of variant {code(str(base.variant))}:", ""]
    rows = [[name, fmt.num(item.mean), str(item.n)] for name, item in base.summary.items()]
    return lines + _table(["metric", "mean", "n"], rows, "lrr")


def _variant_comparisons(comparisons: Sequence[Comparison]) -> list[str]:
    lines = []
    for comparison in comparisons:
        lines += ["", f"#### Variant {cell(str(comparison.variant))} against its baseline", ""]
        header, rows = _comparison_rows(comparison)
        lines += _table(header, rows, "lrrrlrrl")
        lines += _question_changes(comparison)
    return lines


def _thresholds(results: Sequence[ThresholdResult]) -> list[str]:
    if not results:
        return []
    rows = []
    for item in results:
        rule = ("≥ " if item.kind == "min" else "≤ ") + fmt.num(item.threshold)
        rows.append([
            (item.metric if item.variant is None else f"{item.metric} [{cell(item.variant)}]")
            + ("" if item.slice is None else f" (slice {cell(item.slice)})"),
            fmt.num(item.value), rule, str(item.n), "✅ met" if item.passed else "❌ unmet",
        ])
    return ["", "### Thresholds", "", *_table(["metric", "value", "threshold", "n", "result"],
                                             rows, "lrrrl")]


def _variants(outcome: Outcome) -> list[str]:
    """Metric x configuration, as in the terminal and the HTML report: twelve metric
    columns would make GitHub scroll the step summary sideways."""
    variants = outcome.gate.variant_table
    if variants is None or not variants.rows:
        return []
    header = ["metric", "(base)", *(cell(str(row.name)) for row in variants.rows)]
    rows = []
    for metric in variants.metrics:
        cells = [variant_cell(variants.base.cells[metric].mean, None, "")]
        for row in variants.rows:
            item = row.cells[metric]
            cells.append(variant_cell(item.mean, item.delta, item.marker))
        rows.append([cell(metric), *cells])
    rows.append([
        "changed knobs", "",
        *(", ".join(code(k) for k in row.changed_knobs) or "none" for row in variants.rows),
    ])  # fmt: skip
    align = "l" + "r" * (len(header) - 1)
    return [
        "", "### Variants", "", *_table(header, rows, align), "",
        "Δ against the base run on shared questions; ▲/▼ = significantly better/worse "
        "(paired permutation test, two-sided).",
    ]


def _diff_changes(diff: QuestionDiff) -> str:
    if diff.error_after is not None and diff.error_before is None:
        return "error: " + cell(diff.error_after, 80)
    changed = sorted(
        ((n, d) for n, d in diff.metrics.items() if d.delta),
        key=lambda pair: -abs(pair[1].delta or 0.0),
    )
    return "<br>".join(f"{n} {fmt.num(d.delta, signed=True)}" for n, d in changed[:4]) or "—"


def _regressions(diffs: Sequence[QuestionDiff]) -> list[str]:
    if not diffs:
        return []
    rows = []
    for diff in diffs:
        before = fmt.ids(diff.retrieved_before, diff.relevant, mark="✓")
        after = fmt.ids(diff.retrieved_after, diff.relevant, mark="✓")
        answer = (
            "unchanged" if not diff.answer_changed
            else f"{cell(diff.answer_before, 80)} → {cell(diff.answer_after, 80)}"
        )
        rows.append([
            str(diff.qid) if diff.variant is None else f"{diff.qid} [{cell(diff.variant)}]",
            cell(diff.question, 100), _diff_changes(diff),
            f"{before} → {after}", answer,
        ])
    return [
        "", f"### Most regressed questions ({len(diffs)})", "",
        *_table(["qid", "question", "Δ", "retrieved (✓ relevant)", "answer"], rows, "rllll"),
    ]


def _notes(notes: Sequence[str], warnings: Sequence[str] = ()) -> list[str]:
    if not notes and not warnings:
        return []
    return ["", *(f"> ⚠️ {cell(line, 400)}  " for line in warnings),
            *(f"> {cell(note, 400)}  " for note in notes)]


def _errors(errors: Sequence[QuestionError]) -> list[str]:
    """Every question that raised, with its error line, after the count per type."""
    if not errors:
        return []
    kinds = " · ".join(f"{code(kind)} {count}" for kind, count in count_kinds(errors))
    # Not a code span: inside a table a "|" would still split the cell.
    rows = [[cell(e.label), cell(e.question, 100), cell(e.error, 200)] for e in errors]
    return ["", f"### Errors ({len(errors)})", "", kinds, "",
            *_table(["qid", "question", "error"], rows, "lll")]


def _lowest(views: Sequence[LowestQuestions]) -> list[str]:
    """Without a baseline: per metric, the lowest-scoring questions of the base run."""
    lines: list[str] = []
    for view in views:
        lines += ["", f"### Lowest-scoring questions by {view.metric}", ""]
        if not view.samples:
            lines.append(f"Every one of the {view.n} questions scores 1 on {view.metric}.")
            continue
        rows = [
            [str(s.qid), fmt.num(s.metrics[view.metric]), cell(s.question, 100),
             cell(s.generated_gt, 100), fmt.ids(s.retrieval_ids, s.relevant, mark="✓"),
             cell(s.shown_answer, 100)]
            for s in view.samples
        ]
        lines += _table(["qid", view.metric, "question", "reference answer",
                         "retrieved (✓ relevant)", "generated answer"], rows, "rrllll")
    return lines


def _slices(outcome: Outcome) -> list[str]:
    """Each language's and tag's means (and changes, when the gate tested slices)."""
    variant = outcome.runs[0].variant if outcome.runs else None
    rows = slice_rows(outcome, variant)
    if not rows:
        return []
    names = shown_metrics(outcome, rows, limit=None)
    lines = ["", "### Slices", ""]
    lines += _table(["slice", "questions", *names],
                    [[code(row.item.key), str(row.item.questions),
                      *(row.cell(name) for name in names)] for row in rows],
                    "lr" + "r" * len(names))
    small = small_line(outcome.slices_of(variant))
    if small is not None:
        lines += ["", small]
    return lines


def render_markdown(outcome: Outcome) -> str:
    """The whole summary as GitHub-flavoured Markdown (ends with a newline)."""
    lines = [
        *_headline(outcome),
        *_failures(outcome),
        *_errors(outcome.error_list),
        *_notes(outcome.notes, outcome.warnings),
        *_metrics(outcome),
        *_slices(outcome),
        *_variant_comparisons(outcome.variant_comparisons),
        *_thresholds(outcome.thresholds),
        *_variants(outcome),
        *_regressions(outcome.gate.regressions),
        *(_lowest(outcome.lowest) if not outcome.gate.comparisons else []),
    ]
    return "\n".join(lines) + "\n"
