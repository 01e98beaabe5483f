"""The self-contained HTML report: one file, inline CSS, SVG and one small script, no assets.

Questions, answers, variant names and error messages are user data: every one of them
goes through :func:`html.escape` before it reaches the page. The script (:data:`_JS`)
only sorts and filters the tables marked ``sortable``: without it the page reads the
same, unsorted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from pytest_ragev.core import fmt
from pytest_ragev.core.record import Record
from pytest_ragev.core.results import RunResult
from pytest_ragev.evaluation import LowestQuestions, Outcome, QuestionError, count_kinds
from pytest_ragev.evaluation.repeats import spread_cell
from pytest_ragev.gate import (
    Comparison,
    QuestionDiff,
    ThresholdResult,
    VariantCell,
    VariantTable,
)
from pytest_ragev.report import _format, _svg
from pytest_ragev.report._slices import shown_metrics, slice_rows, small_line

BASELINE_COLOR = "#9aa5b1"
CURRENT_COLOR = "#2f6fde"
VARIANT_COLORS = ("#e07b39", "#3aa675", "#a45ee5", "#d6467e", "#c9a227", "#2bb0c2")

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI','Noto Sans CJK SC','PingFang SC',
'Microsoft YaHei',sans-serif;margin:24px auto;max-width:1100px;
color:#1d2430;padding:0 16px;line-height:1.4}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e3e6ea;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;font-size:14px;
vertical-align:middle;margin-left:8px}.pass{background:#2e8b57}.fail{background:#c0392b}
.ungated{background:#6c757d}
.meta{color:#555;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #e3e6ea;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f7f9}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.regressed td,td.regressed{background:#fdecea}tr.improved td{background:#eaf7ef}
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
.nochange{font-size:13px;color:#555;margin:6px 0}
.warnings li{color:#8a4b00;font-size:13px}
.kinds span{display:inline-block;background:#fdecea;border-radius:10px;padding:1px 8px;
margin:0 6px 4px 0;font-size:13px}.err{font-family:ui-monospace,monospace,'Noto Sans CJK SC',
'PingFang SC','Microsoft YaHei',sans-serif;font-size:12px;
color:#c0392b;max-width:420px;word-break:break-word}
table.sortable th{cursor:pointer;user-select:none;white-space:nowrap}
table.sortable th[aria-sort=ascending]::after{content:" ▲";font-size:10px}
table.sortable th[aria-sort=descending]::after{content:" ▼";font-size:10px}
.filter{margin:6px 0;font-size:13px}.filter input[type=search]{width:320px;padding:3px 6px}
.passages{margin:0;padding-left:18px;font-size:12px;max-width:420px}
.passages li{margin-bottom:3px}details summary{cursor:pointer}details p.missing{margin:4px 0 2px}
td.why{text-decoration:underline dotted;cursor:help}
.missing{color:#999}
table.questions th,table.questions td{padding:3px 6px;font-size:12px}
table.questions .q{min-width:240px;max-width:360px}table.questions .err{min-width:220px}
table.questions tr[hidden]{display:none}
"""

#: Sorts a ``table.sortable`` by the clicked column (``data-sort`` holds a cell's value;
#: empty ones sort last) and filters it with the search box naming it: words match the
#: row's text, ``recall < 0.5`` (``<``, ``<=``, ``>``, ``>=``, ``=``) a column's value.
_JS = r"""
(function () {
  function value(cell) {
    var v = cell.getAttribute("data-sort");
    if (v === null) { v = cell.textContent.trim(); }
    if (v === "") { return null; }
    var n = Number(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }
  function sortBy(table, col, th) {
    var asc = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {
      h.setAttribute("aria-sort", "none");
    });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a.cells[col]), y = value(b.cells[col]);
      if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
      if (typeof x !== typeof y) { x = String(x); y = String(y); }
      var c = x < y ? -1 : (x > y ? 1 : 0);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function columns(table) {
    var names = {};
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h, i) {
      names[h.getAttribute("data-key") || h.textContent.trim().toLowerCase()] = i;
    });
    return names;
  }
  function matcher(table, query) {
    var q = query.trim().toLowerCase();
    var m = q.match(/^([a-z0-9_.-]+)\s*(<=|>=|<|>|=)\s*(-?[0-9.]+)$/);
    var names = columns(table);
    if (m && m[1] in names) {
      var col = names[m[1]], op = m[2], limit = Number(m[3]);
      return function (row) {
        var v = value(row.cells[col]);
        if (typeof v !== "number") { return false; }
        if (op === "<") { return v < limit; }
        if (op === "<=") { return v <= limit; }
        if (op === ">") { return v > limit; }
        if (op === ">=") { return v >= limit; }
        return v === limit;
      };
    }
    var words = q.split(/\s+/).filter(Boolean);
    return function (row) {
      var text = row.textContent.toLowerCase();
      return words.every(function (w) { return text.indexOf(w) >= 0; });
    };
  }
  function filter(table, input, count) {
    var keep = matcher(table, input.value), shown = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      var ok = keep(row);
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    if (count) { count.textContent = shown + " of " + table.tBodies[0].rows.length + " shown"; }
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.tabIndex = 0;
      th.setAttribute("aria-sort", "none");
      th.title = "sort by this column";
      th.addEventListener("click", function () { sortBy(table, col, th); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, col, th); }
      });
    });
    var input = document.querySelector('input[data-filter="' + table.id + '"]');
    if (input) {
      var count = document.querySelector('[data-count="' + table.id + '"]');
      input.addEventListener("input", function () { filter(table, input, count); });
      filter(table, input, count);
    }
  });
})();
"""

#: Rows of the questions table at most (a 100,000-question run stays a readable file).
QUESTIONS_SHOWN = 5000
#: Rows of the errors table: a run where every question raised lists the first ones
#: (the counts per type above it cover all of them, the JSON report lists each).
ERRORS_SHOWN = 1000

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


def _header(outcome: Outcome) -> str:
    word = _e(_format.verdict_word(outcome))
    css = "fail" if outcome.failed else ("ungated" if outcome.shard is not None else "pass")
    badge = f'<span class="badge {css}">{word}</span>'
    facts = _format.run_facts(outcome, value=_e)
    if outcome.facts.start_time:
        facts.append(f"started {_e(outcome.facts.start_time)}")
    if outcome.baseline_shown:
        facts.append(f"baseline {_e(outcome.baseline_shown)}")
    # Each fact stays on one line ("3.5 s", "87 questions"); the list wraps between facts.
    shown = " · ".join(f'<span class="fact">{fact}</span>' for fact in facts)
    parts = [f"<h1>{_e(_format.TITLE)} {badge}</h1>", f'<p class="meta">{shown}</p>']
    if outcome.verdict_failures():
        items = "".join(f"<li>{_e(line)}</li>" for line in outcome.verdict_failures())
        parts.append(f'<ul class="failures">{items}</ul>')
    if outcome.warnings:
        items = "".join(f"<li>warning: {_e(line)}</li>" for line in outcome.warnings)
        parts.append(f'<ul class="warnings">{items}</ul>')
    if outcome.notes:
        items = "".join(f"<li>{_e(line)}</li>" for line in outcome.notes)
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
        f'<span class="ids">{_e(fmt.listed(ids, _format.IDS_SHOWN))}</span></li>'
        for kind, ids in kinds
    )
    return f'<ul class="qchanges">Not compared: {items}</ul>'


def _metrics_section(outcome: Outcome) -> str:
    parts = ["<h2>Metrics</h2>"]
    comparison = outcome.comparison
    if outcome.gate.not_compared is not None:
        parts.append(f'<p class="notcompared"><b>Gate not compared</b> with the baseline: '
                     f"{_e(outcome.gate.not_compared)}</p>")
    if comparison is not None:
        parts.append(
            f'<p class="meta">Against the baseline on {len(comparison.common_qids)} shared '
            f"questions ({len(comparison.added)} added, {len(comparison.removed)} removed, "
            f"{len(comparison.changed)} changed). "
            "Δ = current − baseline; p: one-sided paired permutation test in the direction "
            f"of the change.{_e(_format.correction_note(comparison))}</p>"
        )
        parts.append(_comparison_table(comparison))
        tolerance = _format.tolerance_note(comparison)
        if tolerance is not None:
            parts.append(f'<p class="meta">{_e(tolerance)}.</p>')
        parts.append(_question_changes(comparison))
    elif outcome.base is not None:
        missing = _format.base_missing_note(outcome, value=_e)
        if missing is not None:
            parts.append(f'<p class="meta">{missing}</p>')
        if missing is None or not outcome.variant_comparisons:
            parts.append(_summary_table(outcome.base))
    for other in outcome.variant_comparisons:
        parts.append(f"<h3>Variant {_e(other.variant)} against its baseline</h3>")
        parts.append(_comparison_table(other))
        parts.append(_question_changes(other))
    return "".join(parts)


def _chart_section(outcome: Outcome) -> str:
    base = outcome.base
    if base is None:
        return ""
    metrics = [m for m in base.summary]
    for run in outcome.variants:
        metrics += [m for m in run.summary if m not in metrics]
    series = []
    baseline = outcome.baseline
    if baseline is not None:
        series.append(_svg.Series("baseline", BASELINE_COLOR,
                                  {m: s.mean for m, s in baseline.summary.items()}))
    if not outcome.base_ran:
        label = str(base.variant)
    else:
        label = "current" if baseline is not None else "base"
    series.append(_svg.Series(label, CURRENT_COLOR, {m: s.mean for m, s in base.summary.items()}))
    for index, run in enumerate(outcome.variants):
        series.append(_svg.Series(str(run.variant), VARIANT_COLORS[index % len(VARIANT_COLORS)],
                                  {m: s.mean for m, s in run.summary.items()}))
    return "<h2>Means per metric</h2>" + _svg.bar_chart(metrics, series)


def _histogram_section(outcome: Outcome) -> str:
    base, baseline = outcome.base, outcome.baseline
    if base is None or baseline is None:
        return ""
    charts = []
    # Only the compared questions: an edited question's change says nothing of the pipeline.
    compared = set(outcome.comparison.common_qids) if outcome.comparison is not None else None
    unchanged: dict[int, list[str]] = {}  # shared questions -> metrics none of them moved on
    for name, summary in base.summary.items():
        before, after = baseline.scores(name), base.scores(name)
        shared = sorted(q for q in before.keys() & after.keys()
                        if compared is None or q in compared)
        if not shared:
            continue
        data = _svg.histogram([after[q] - before[q] for q in shared])
        if data.unchanged == data.total:
            # An empty chart reads as "no data", and a box per metric fills the page
            # with nothing: one line names them all.
            unchanged.setdefault(data.total, []).append(name)
            continue
        charts.append(_svg.histogram_chart(name, data,
                                           higher_is_better=summary.direction == "higher"))
    if not charts and not unchanged:
        return ""
    lines = "".join(
        f'<p class="nochange" data-metrics="{_e(" ".join(names))}">No change on '
        f"{', '.join(f'<b>{_e(n)}</b>' for n in names)}: all {total} shared questions "
        "have the same value.</p>"
        for total, names in unchanged.items()
    )
    grid = f'<div class="grid">{"".join(charts)}</div>' if charts else ""
    return ("<h2>Per-question changes against the baseline</h2>"
            '<p class="meta">Green: better, red: worse; unchanged questions are counted apart.'
            f"</p>{grid}{lines}")


def _thresholds_section(results: Sequence[ThresholdResult]) -> str:
    if not results:
        return ""
    rows, classes = [], []
    for item in results:
        label = item.metric if item.variant is None else f"{item.metric} [{item.variant}]"
        if item.slice is not None:
            label += f" (slice {item.slice})"
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
            if not diff.answer_changed
            else f'<div class="answer">{_e(diff.answer_after)}</div>',
        ])
    return (f"<h2>Most regressed questions ({len(diffs)})</h2>"
            '<p class="meta">✓ marks a relevant passage.</p>'
            + _table(["qid", "question", "Δ", "retrieved before → after", "answer before",
                      "answer after"], rows,
                     numeric=[True, False, False, False, False, False], css="regressions"))


def _errors_section(errors: Sequence[QuestionError]) -> str:
    """Every question that raised: the count per error type, then one row each (the
    first :data:`ERRORS_SHOWN`, saying so)."""
    if not errors:
        return ""
    kinds = "".join(f"<span>{_e(kind)} <b>{count}</b></span>"
                    for kind, count in count_kinds(errors))
    rows = [[_e(e.label), f'<div class="q">{_e(e.question)}</div>', _e(e.kind),
             f'<div class="err">{_e(e.error)}</div>'] for e in errors[:ERRORS_SHOWN]]
    more = (f'<p class="meta">The first {ERRORS_SHOWN} of {len(errors)} are listed; the JSON '
            "report (--ragev-report) lists every one.</p>" if len(errors) > ERRORS_SHOWN else "")
    return (f"<h2>Errors ({len(errors)})</h2>"
            f'<p class="kinds">{kinds}</p>{more}'
            + _table(["qid", "question", "type", "error"], rows,
                     numeric=[False, False, False, False], css="errors"))


def _passages_html(sample: Record, passages: Mapping[int, str]) -> str:
    """The retrieved ids (relevant ones marked), and on demand each passage's text."""
    summary = _ids_html(sample.retrieval_ids, sample.relevant)
    if not sample.retrieval_ids:
        return f'<div class="ids">{summary}</div>'
    items = []
    for pid in sample.retrieval_ids[:10]:
        mark = f'<span class="rel">{pid}✓</span>' if pid in sample.relevant else str(pid)
        text = passages.get(pid)
        body = (_e(text) if text is not None
                else '<span class="missing">not in the corpus (an unattributed chunk)</span>')
        items.append(f"<li>{mark}: {body}</li>")
    # Relevant passages the pipeline missed, apart: the numbered list is the ranking.
    missed = [
        f'<li><span class="rel">{pid}✓</span>: {_e(passages.get(pid, ""))}</li>'
        for pid in sorted(sample.relevant) if pid not in sample.retrieval_ids
    ][:5]
    extra = (f'<p class="missing">relevant, not retrieved:</p><ul class="passages">'
             f'{"".join(missed)}</ul>' if missed else "")
    return (f'<details><summary class="ids">{summary}</summary>'
            f'<ol class="passages">{"".join(items)}</ol>{extra}</details>')


def _lowest_section(views: Sequence[LowestQuestions], passages: Mapping[int, str]) -> str:
    """Without a baseline: per metric, the base run's lowest-scoring questions."""
    parts = []
    for view in views:
        parts.append(f"<h3>Lowest-scoring questions by {_e(view.metric)}</h3>")
        if not view.samples:
            parts.append(f'<p class="meta">Every one of the {view.n} questions scores 1 on '
                         f"{_e(view.metric)}.</p>")
            continue
        rows = [[
            str(s.qid), fmt.num(s.metrics[view.metric]),
            f'<div class="q">{_e(s.question)}</div>',
            f'<div class="answer">{_e(s.generated_gt)}</div>',
            _passages_html(s, passages),
            f'<div class="answer">{_e(s.shown_answer)}</div>',
        ] for s in view.samples]
        parts.append(_table(
            ["qid", _e(view.metric), "question", "reference answer",
             "retrieved (✓ relevant; open for the texts)", "generated answer"],
            rows, numeric=[True, True, False, False, False, False], css="lowest"))
    if not parts:
        return ""
    return ("<h2>Weakest questions</h2>"
            '<p class="meta">No baseline to compare with: the questions that score lowest. '
            "Open a retrieved list to read its passages.</p>" + "".join(parts))


def _slices_section(outcome: Outcome) -> str:
    """Each language's and tag's means in a sortable table (and their changes, when the
    gate tested slices)."""
    variant = outcome.runs[0].variant if outcome.runs else None
    rows = slice_rows(outcome, variant)
    if not rows:
        return ""
    names = shown_metrics(outcome, rows, limit=None)
    header = ['<th data-key="slice">slice</th>', '<th data-key="questions">questions</th>',
              *(f'<th data-key="{_e(name)}">{_e(name)}</th>' for name in names)]
    body = []
    for row in rows:
        cells = [f"<td>{_e(row.item.key)}</td>",
                 f'<td class="num" data-sort="{row.item.questions}">{row.item.questions}</td>']
        for name in names:
            summary = row.item.summary.get(name)
            mean = None if summary is None else summary.mean
            compared = row.metric(name)
            css = " regressed" if compared is not None and compared.regressed else ""
            cells.append(f'<td class="num{css}" data-sort="{"" if mean is None else repr(mean)}">'
                         f"{_e(row.cell(name))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    small = small_line(outcome.slices_of(variant))
    note = f'<p class="meta">{_e(small)}</p>' if small else ""
    return (
        f"<h2>Slices ({len(rows)})</h2>"
        '<p class="meta">Each language and tag: its questions and each metric\'s mean over '
        "them (with its change against the baseline when [gate] slices tested it; ▼ "
        "regressed). Click a column to sort.</p>"
        '<div class="scroll"><table id="slices" class="sortable"><thead><tr>'
        f"{''.join(header)}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{note}"
    )


def _spread(sample: Record) -> tuple[str, float | None]:
    """A repeated question's most unstable metric as a cell, and its sd to sort by."""
    spreads = sample.spread
    if not spreads:
        return "", None
    metric = max(spreads, key=lambda name: (spreads[name].sd, name))
    if spreads[metric].sd <= 0:
        return "alike", 0.0
    return f"{metric} {spread_cell(sample, metric)}", spreads[metric].sd


def _questions_section(run: RunResult | None) -> str:
    """Every question of the base run in one sortable, filterable table."""
    if run is None or not run.samples:
        return ""
    metrics = [name for name, item in run.summary.items() if item.n]
    errors = any(s.error for s in run.samples)
    repeated = any(s.repeats for s in run.samples)
    header = ['<th data-key="qid">qid</th>', '<th data-key="question">question</th>',
              *(['<th data-key="error">error</th>'] if errors else []),
              *(f'<th data-key="{_e(m)}">{_e(m)}</th>' for m in metrics),
              *(['<th data-key="spread">spread</th>'] if repeated else []),
              '<th data-key="retrieved">retrieved</th>']
    body = []
    samples = run.samples[:QUESTIONS_SHOWN]
    for sample in samples:
        cells = [f'<td class="num" data-sort="{sample.qid}">{sample.qid}</td>',
                 f'<td><div class="q" title="{_e(sample.shown_answer)}">'
                 f"{_e(fmt.shorten(sample.question, 200))}</div></td>"]
        if errors:
            cells.append(f'<td><div class="err">{_e(sample.error or "")}</div></td>')
        for metric in metrics:
            value = sample.metrics.get(metric)
            verdict = sample.verdict(metric)
            why = "" if verdict is None else (verdict.error or verdict.reason)
            tip = f' title="{_e(why)}"' if why else ""
            shown = fmt.num(value, missing="error" if verdict is not None and
                            verdict.error else "—")
            cells.append(f'<td class="num{" why" if why else ""}"{tip} data-sort="'
                         f'{"" if value is None else repr(value)}">{shown}</td>')
        if repeated:
            text, sd = _spread(sample)
            cells.append(f'<td data-sort="{"" if sd is None else repr(sd)}">{_e(text)}</td>')
        cells.append(f'<td class="ids">{_ids_html(sample.retrieval_ids, sample.relevant, 5)}'
                     "</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = (f" The first {QUESTIONS_SHOWN} of {len(run.samples)} questions are listed."
            if len(run.samples) > QUESTIONS_SHOWN else "")
    return (
        f"<h2>Questions ({len(run.samples)})</h2>"
        '<p class="meta">Click a column to sort; type words, or a rule such as '
        "<code>recall &lt; 1</code>, to filter. Hover a question for its answer, a judged "
        "score (dotted) for the judge's reason; ✓ marks a relevant passage; — : the metric "
        "does not apply."
        + (" With several answers per question a value is the mean of its answers' and "
           "spread names the metric they disagree on most (sd, or how many answers "
           "differ)." if repeated else "") + f"{more}</p>"
        '<p class="filter"><input type="search" data-filter="questions" '
        'placeholder="filter: words, or recall &lt; 0.5" aria-label="filter the questions"> '
        '<span class="muted" data-count="questions"></span></p>'
        '<div class="scroll"><table id="questions" class="sortable questions"><thead><tr>'
        f"{''.join(header)}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def render_html(outcome: Outcome) -> str:
    """The report as one HTML document (inline CSS and script, no external resources)."""
    title = f"{_format.TITLE}: {_format.verdict_word(outcome)}"
    body = "".join([
        _header(outcome),
        _errors_section(outcome.error_list),
        _metrics_section(outcome),
        _slices_section(outcome),
        _chart_section(outcome),
        _histogram_section(outcome),
        _thresholds_section(outcome.thresholds),
        _variants_section(outcome.gate.variant_table),
        _regressions_section(outcome.gate.regressions),
        "" if outcome.gate.comparisons else _lowest_section(outcome.lowest, outcome.passages),
        _questions_section(outcome.base),
    ])
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f"<body>{body}<script>{_JS}</script></body></html>\n"
    )
