"""The self-contained HTML report: one file, inline CSS and SVG, no scripts, no assets.

Questions, answers, variant names and error messages are user data: every one of them
goes through :func:`html.escape` before it reaches the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from pytest_ragev.core import fmt
from pytest_ragev.core.results import RunResult
from pytest_ragev.gate import (
    Comparison,
    QuestionDiff,
    ThresholdResult,
    VariantCell,
    VariantTable,
)
from pytest_ragev.report import _format, _svg
from pytest_ragev.report.model import ReportModel

BASELINE_COLOR = "#9aa5b1"
CURRENT_COLOR = "#2f6fde"
VARIANT_COLORS = ("#e07b39", "#3aa675", "#a45ee5", "#d6467e", "#c9a227", "#2bb0c2")

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI','Noto Sans CJK SC','PingFang SC',
'Microsoft YaHei',sans-serif;margin:24px auto;max-width:1100px;
color:#1d2430;padding:0 16px;line-height:1.4}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e3e6ea;padding-bottom:4px}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;font-size:14px;
vertical-align:middle;margin-left:8px}.pass{background:#2e8b57}.fail{background:#c0392b}
.meta{color:#555;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #e3e6ea;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f7f9}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.regressed td{background:#fdecea}tr.improved td{background:#eaf7ef}
ul.failures li{color:#c0392b;font-family:ui-monospace,monospace;font-size:13px}
.notes li{color:#8a6d00;font-size:13px}
.grid{display:flex;flex-wrap:wrap;gap:10px}
.rel{color:#2e8b57;font-weight:700}.ids{font-family:ui-monospace,monospace;font-size:12px}
.answer{max-width:300px;font-size:12px;white-space:pre-wrap}
.q{max-width:280px}.sig-better{color:#2e8b57;font-weight:700}.sig-worse{color:#c0392b;font-weight:700}
.muted{color:#777}.change{white-space:nowrap}
.notcompared{color:#c0392b;font-size:14px}.qchanges{font-size:13px;color:#555}
.scroll{overflow-x:auto;max-width:100%}.fact{white-space:nowrap}
.regressions th:nth-child(n+5){min-width:220px}
.nochange{width:270px;height:150px;box-sizing:border-box;border:1px dashed #ccd;
padding:8px;font-size:12px;color:#555}.nochange b{display:block;color:#1d2430;margin-bottom:40px}
"""

#: Metric changes listed per question in the regressions table before "+N more".
_CHANGES_SHOWN = 4


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, numeric: Sequence[bool],
           row_classes: Sequence[str] | None = None, css: str = "") -> str:
    """A table in a horizontally scrolling box: a wide table never widens the page."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = []
    for index, row in enumerate(rows):
        row_css = f' class="{row_classes[index]}"' if row_classes and row_classes[index] else ""
        cells = "".join(
            f'<td class="num">{c}</td>' if num else f"<td>{c}</td>"
            for c, num in zip(row, numeric, strict=True)
        )
        body.append(f"<tr{row_css}>{cells}</tr>")
    table_css = f' class="{css}"' if css else ""
    return (f'<div class="scroll"><table{table_css}><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _header(model: ReportModel) -> str:
    badge = ('<span class="badge pass">passed</span>' if model.verdict.passed
             else '<span class="badge fail">failed</span>')
    facts = _format.run_facts(model, value=_e)
    if model.started_at:
        facts.append(f"started {_e(model.started_at)}")
    if model.baseline_path:
        facts.append(f"baseline {_e(model.baseline_path)}")
    # Each fact stays on one line ("3.5 s", "87 questions"); the list wraps between facts.
    shown = " · ".join(f'<span class="fact">{fact}</span>' for fact in facts)
    parts = [f"<h1>{_e(model.title)} {badge}</h1>", f'<p class="meta">{shown}</p>']
    if model.verdict.failures:
        items = "".join(f"<li>{_e(line)}</li>" for line in model.verdict.failures)
        parts.append(f'<ul class="failures">{items}</ul>')
    if model.notes:
        items = "".join(f"<li>{_e(line)}</li>" for line in model.notes)
        parts.append(f'<ul class="notes">{items}</ul>')
    return "".join(parts)


def _comparison_table(comparison: Comparison) -> str:
    level = fmt.level(comparison.metrics[0].ci_level) if comparison.metrics else "90%"
    header = ["metric", "baseline", "current", "Δ", f"{level} CI", "p", "n", "status"]
    rows, classes = [], []
    for item in comparison.metrics:
        status = item.status + ("" if item.rule.enabled else " (not gated)")
        rows.append([
            _e(item.metric), fmt.num(item.baseline_mean), fmt.num(item.current_mean),
            fmt.num(item.delta, signed=True), fmt.ci(item.ci_low, item.ci_high),
            _e(fmt.p_value(item.p)), str(item.n), _e(status),
        ])
        classes.append(item.status if item.status in ("regressed", "improved") else "")
    return _table(header, rows, numeric=[False, True, True, True, True, True, True, False],
                  row_classes=classes)


def _summary_table(run: RunResult) -> str:
    rows = [[_e(name), fmt.num(item.mean), str(item.n), _e(item.direction)]
            for name, item in run.summary.items()]
    return _table(["metric", "mean", "n", "better"], rows, numeric=[False, True, True, False])


def _question_changes(comparison: Comparison) -> str:
    """The questions left out of a comparison, by kind, with their ids."""
    kinds = _format.question_changes(comparison)
    if not kinds:
        return ""
    items = "".join(
        f'<li class="{kind}"><b>{len(ids)} {kind}</b> '
        f'<span class="muted">({_e(_format.CHANGE_MEANINGS[kind])})</span>: '
        f'<span class="ids">{_e(_format.id_text(ids))}</span></li>'
        for kind, ids in kinds
    )
    return f'<ul class="qchanges">Not compared: {items}</ul>'


def _metrics_section(model: ReportModel) -> str:
    parts = ["<h2>Metrics</h2>"]
    comparison = model.comparison
    if model.not_compared is not None:
        parts.append(f'<p class="notcompared"><b>Gate not compared</b> with the baseline: '
                     f"{_e(model.not_compared)}</p>")
    if comparison is not None:
        parts.append(
            f'<p class="meta">Against the baseline on {len(comparison.common_qids)} shared '
            f"questions ({len(comparison.added)} added, {len(comparison.removed)} removed, "
            f"{len(comparison.changed)} changed). "
            "Δ = current − baseline; p: one-sided paired permutation test in the direction "
            f"of the change.{_e(_format.correction_note(comparison))}</p>"
        )
        parts.append(_comparison_table(comparison))
        parts.append(_question_changes(comparison))
    elif model.base is not None:
        missing = _format.base_missing_note(model, value=_e)
        if missing is not None:
            parts.append(f'<p class="meta">{missing}</p>')
        if missing is None or not model.variant_comparisons:
            parts.append(_summary_table(model.base))
    for other in model.variant_comparisons:
        parts.append(f"<h3>Variant {_e(other.variant)} against its baseline</h3>")
        parts.append(_comparison_table(other))
        parts.append(_question_changes(other))
    return "".join(parts)


def _chart_section(model: ReportModel) -> str:
    base = model.base
    if base is None:
        return ""
    metrics = [m for m in base.summary]
    for run in model.variants:
        metrics += [m for m in run.summary if m not in metrics]
    series = []
    baseline = model.baseline
    if baseline is not None:
        series.append(_svg.Series("baseline", BASELINE_COLOR,
                                  {m: s.mean for m, s in baseline.summary.items()}))
    if not model.base_ran:
        label = str(base.variant)
    else:
        label = "current" if baseline is not None else "base"
    series.append(_svg.Series(label, CURRENT_COLOR, {m: s.mean for m, s in base.summary.items()}))
    for index, run in enumerate(model.variants):
        series.append(_svg.Series(str(run.variant), VARIANT_COLORS[index % len(VARIANT_COLORS)],
                                  {m: s.mean for m, s in run.summary.items()}))
    return "<h2>Means per metric</h2>" + _svg.bar_chart(metrics, series)


def _histogram_section(model: ReportModel) -> str:
    base, baseline = model.base, model.baseline
    if base is None or baseline is None:
        return ""
    charts = []
    # Only the compared questions: an edited question's change says nothing of the pipeline.
    compared = set(model.comparison.common_qids) if model.comparison is not None else None
    for name, summary in base.summary.items():
        before, after = baseline.scores(name), base.scores(name)
        shared = sorted(q for q in before.keys() & after.keys()
                        if compared is None or q in compared)
        if not shared:
            continue
        data = _svg.histogram([after[q] - before[q] for q in shared])
        if data.unchanged == data.total:
            # An empty chart reads as "no data"; say what it means.
            charts.append(
                f'<div class="nochange" data-metric="{_e(name)}"><b>{_e(name)}</b>'
                f"no change: all {data.total} shared questions have the same value</div>"
            )
            continue
        charts.append(_svg.histogram_chart(name, data,
                                           higher_is_better=summary.direction == "higher"))
    if not charts:
        return ""
    return ("<h2>Per-question changes against the baseline</h2>"
            '<p class="meta">Green: better, red: worse; unchanged questions are counted apart.'
            f'</p><div class="grid">{"".join(charts)}</div>')


def _thresholds_section(results: Sequence[ThresholdResult]) -> str:
    if not results:
        return ""
    rows, classes = [], []
    for item in results:
        label = item.metric if item.variant is None else f"{item.metric} [{item.variant}]"
        rule = ("≥ " if item.kind == "min" else "≤ ") + fmt.num(item.threshold)
        rows.append([_e(label), fmt.num(item.value), rule, str(item.n),
                     "met" if item.passed else "unmet"])
        classes.append("" if item.passed else "regressed")
    return "<h2>Thresholds</h2>" + _table(
        ["metric", "value", "threshold", "n", "result"], rows,
        numeric=[False, True, True, True, False], row_classes=classes,
    )


def _variant_cell(cell: VariantCell) -> str:
    if cell.delta is None:
        return fmt.num(cell.mean)
    css = ""
    if cell.marker:
        css = ' class="sig-better"' if cell.better else ' class="sig-worse"'
    tip = f' title="p={fmt.p_value(cell.p)}, n={cell.n}"'
    return (f"{fmt.num(cell.mean)}&nbsp;<span{css}{tip}>"
            f"{fmt.num(cell.delta, signed=True)}{cell.marker}</span>")


def _variants_section(variants: VariantTable | None) -> str:
    """Metrics as rows, runs as columns (as in the terminal), the changed knobs last.

    Twelve metrics as columns would push the table past the page; a handful of
    variants fits, and more scroll inside the table's own box.
    """
    if variants is None or not variants.rows:
        return ""
    header = ["metric", "(base)", *(_e(row.name) for row in variants.rows)]
    rows = []
    for metric in variants.metrics:
        rows.append([
            _e(metric),
            fmt.num(variants.base.cells[metric].mean),
            *(_variant_cell(row.cells[metric]) for row in variants.rows),
        ])
    knobs = [
        "<br>".join(_e(k) for k in row.changed_knobs) or '<span class="muted">none</span>'
        for row in variants.rows
    ]
    rows.append(['<span class="muted">changed knobs</span>', "", *knobs])
    numeric = [False, True, *([True] * len(variants.rows))]
    return ("<h2>Variants</h2>"
            '<p class="meta">Δ against the base run on shared questions; ▲/▼: significantly '
            "better/worse (paired permutation test, two-sided).</p>"
            + _table(header, rows, numeric=numeric, css="variants"))


def _ids_html(values: Sequence[int], relevant: frozenset[int], limit: int = 10) -> str:
    shown = [f'<span class="rel">{v}✓</span>' if v in relevant else str(v)
             for v in values[:limit]]
    if len(values) > limit:
        shown.append(f"… +{len(values) - limit}")
    return "[" + ", ".join(shown) + "]"


def _changes_html(diff: QuestionDiff) -> str:
    if diff.error_after is not None and diff.error_before is None:
        return f'<span class="sig-worse">error: {_e(fmt.shorten(diff.error_after, 120))}</span>'
    changed = sorted(((n, d) for n, d in diff.metrics.items() if d.delta),
                     key=lambda pair: -abs(pair[1].delta or 0.0))
    if not changed:
        return '<span class="muted">no metric changed</span>'
    # "… +1 more" would take the line the one metric needs.
    shown = changed if len(changed) <= _CHANGES_SHOWN + 1 else changed[:_CHANGES_SHOWN]
    lines = [
        f'<span class="change">{_e(n)} {fmt.num(d.delta, signed=True)} '
        f'<span class="muted">({fmt.num(d.before)} → {fmt.num(d.after)})</span></span>'
        for n, d in shown
    ]
    rest = changed[len(shown):]
    if rest:
        tip = ", ".join(f"{n} {fmt.num(d.delta, signed=True)}" for n, d in rest)
        lines.append(f'<span class="muted more" title="{_e(tip)}">… +{len(rest)} more</span>')
    return "<br>".join(lines)


def _regressions_section(diffs: Sequence[QuestionDiff]) -> str:
    if not diffs:
        return ""
    rows = []
    for diff in diffs:
        qid = str(diff.qid) if diff.variant is None else f"{diff.qid}<br>[{_e(diff.variant)}]"
        retrieved = (f'<div class="ids">{_ids_html(diff.retrieved_before, diff.relevant)}</div>'
                     f'<div class="ids">→ {_ids_html(diff.retrieved_after, diff.relevant)}</div>')
        rows.append([
            qid,
            f'<div class="q">{_e(diff.question)}</div>',
            _changes_html(diff),
            retrieved,
            f'<div class="answer">{_e(diff.answer_before)}</div>',
            '<span class="muted unchanged">unchanged</span>'
            if diff.answer_after == diff.answer_before
            else f'<div class="answer">{_e(diff.answer_after)}</div>',
        ])
    return (f"<h2>Most regressed questions ({len(diffs)})</h2>"
            '<p class="meta">✓ marks a relevant passage.</p>'
            + _table(["qid", "question", "Δ", "retrieved before → after", "answer before",
                      "answer after"], rows,
                     numeric=[True, False, False, False, False, False], css="regressions"))


def render_html(model: ReportModel) -> str:
    """The report as one HTML document (no scripts, no external resources)."""
    verdict = "passed" if model.verdict.passed else "failed"
    title = f"{model.title}: {verdict}"
    body = "".join([
        _header(model),
        _metrics_section(model),
        _chart_section(model),
        _histogram_section(model),
        _thresholds_section(model.thresholds),
        _variants_section(model.variant_table),
        _regressions_section(model.regressions),
    ])
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )
