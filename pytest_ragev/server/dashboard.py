"""The dashboard's pages as HTML text: runs, one run, trends, and a compare view.

Pure functions of the rows the API answers with. Every page is self-contained: the
CSS is inline, the one script (progress polling) is served by the same server at
``/assets/dashboard.js``, and charts are inline SVG, so nothing loads from elsewhere.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from pytest_ragev.core import fmt
from pytest_ragev.core.results import RunResult
from pytest_ragev.core.tables import changed_keys
from pytest_ragev.core.types import METRIC_NAMES
from pytest_ragev.gate import GateRules, QuestionDiff, compare, top_regressions
from pytest_ragev.server.keys import Principal
from pytest_ragev.server.svg import Point, line_chart

#: The metrics the runs list shows.
KEY_METRICS = ("recall", "ndcg10", "mrr", "bleu4", "rougel")
STATUS_NAMES = {0: "pending", 1: "running", 2: "success", 3: "failed"}
#: How a running task's phase (``data.phase.name`` of the plugin's report) reads.
PHASE_NAMES = {"loading": "loading", "building_kb": "building the knowledge base",
               "answering": "answering", "scoring": "scoring", "gating": "gating",
               "writing_reports": "writing the reports"}

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI','Noto Sans CJK SC','PingFang SC',sans-serif;
margin:0;color:#1d2430;background:#f6f7f9;line-height:1.4}
header{background:#1d2430;color:#fff;padding:10px 24px;display:flex;gap:20px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}header .who{margin-left:auto;
font-size:13px;color:#c9d1dc}header form{margin:0}
main{max-width:1200px;margin:0 auto;padding:16px 24px}
.scroll{overflow-x:auto}
h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:22px 0 8px}
table{border-collapse:collapse;background:#fff;font-size:13px;width:100%}
th,td{border-bottom:1px solid #e3e6ea;padding:6px 8px;text-align:left;vertical-align:middle}
th{background:#eef1f4;font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;color:#fff;font-size:12px}
.s0{background:#7f8c8d}.s1{background:#2d6cdf}.s2{background:#2e8b57}.s3{background:#c0392b}
.s2x{background:#5d6d7e}.vpass{background:#2e8b57}.vfail{background:#c0392b}
td.config{overflow-wrap:anywhere;max-width:16em}.phase{display:block;font-size:12px;color:#555;white-space:normal}
.bar{width:90px;height:10px;background:#e3e6ea;border-radius:5px;overflow:hidden;
display:inline-block;vertical-align:middle}.bar span{display:block;height:100%;
background:#2d6cdf}.count{font-size:12px;color:#555;margin-left:6px}
td.when,td.progress,td.status{white-space:nowrap}td.task{font-size:12px}
.warn{background:#fff6e0;border:1px solid #f0d58c;color:#6b4e00;padding:8px 12px;
border-radius:4px;margin:10px 0}.warn ul{margin:0;padding-left:18px}
h3{font-size:14px;margin:16px 0 6px}
.err{background:#fdecea;border:1px solid #f5c6cb;color:#8a1f11;padding:8px 12px;
border-radius:4px;white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:12px}
.meta td:first-child{width:180px;color:#555}.muted{color:#777}
.filters{display:flex;gap:10px;margin:0 0 12px;align-items:end;flex-wrap:wrap}
.filters label{font-size:12px;color:#555;display:flex;flex-direction:column}
.grid{display:flex;flex-wrap:wrap;gap:8px}.card{background:#fff;border:1px solid #e3e6ea;
border-radius:4px;padding:4px}
svg.trend .t{font-size:11px;font-weight:600}svg.trend .tick{font-size:9px;fill:#777}
svg.trend .last{font-size:11px;fill:#2d6cdf}svg.trend .grid{stroke:#e3e6ea}
svg.trend .line{fill:none;stroke:#2d6cdf;stroke-width:1.5}svg.trend .dot{fill:#2d6cdf}
svg.trend .date{font-size:9px;fill:#555}
iframe{width:100%;height:900px;border:1px solid #e3e6ea;background:#fff}
tr.regressed td{background:#fdecea}tr.improved td{background:#eaf7ef}
.pager{margin:10px 0;font-size:13px}pre.log{max-height:300px;overflow:auto}
button,input[type=submit]{font:inherit;padding:3px 10px}
"""

#: Polls the running tasks shown on a page and reloads it when one finishes.
SCRIPT = """
(function () {
  // A login link (/login?next=/trends#key=...): the key stays in the fragment, which
  // browsers never send, so no server log sees it; it is posted once and dropped.
  if (location.pathname === '/login' && location.hash.indexOf('#key=') === 0) {
    var key = decodeURIComponent(location.hash.slice(5));
    history.replaceState(null, '', location.pathname + location.search);
    // Only a path of this server: resolved as the browser will resolve it (it reads
    // '/\\host' and '/<tab>/host' as '//host', another origin), then kept if it stays here.
    var next = new URLSearchParams(location.search).get('next') || '/';
    var target = null;
    try { target = new URL(next, location.origin); } catch (e) { target = null; }
    if (next.charAt(0) !== '/' || !target || target.origin !== location.origin) {
      next = '/';
    } else {
      next = target.pathname + target.search + target.hash;
    }
    fetch('/login', {method: 'POST', credentials: 'same-origin', redirect: 'manual',
                     headers: {'Content-Type': 'application/x-www-form-urlencoded'},
                     body: 'key=' + encodeURIComponent(key)})
      .then(function () { location.replace(next); });
    return;
  }
  var bars = document.querySelectorAll('[data-running]');
  if (!bars.length) { return; }
  // As pytest_ragev.core.fmt.num writes a figure: three decimals, a true minus sign.
  function figure(value) {
    return typeof value === 'number' && isFinite(value)
      ? value.toFixed(3).replace('-', '\u2212') : '\u2014';
  }
  // What a running task does now, as the pages write it (dashboard.phase_text).
  var PHASES = __PHASES__;
  function phaseText(phase) {
    if (!phase) { return ''; }
    var text = PHASES[phase.name] || phase.name;
    if (typeof phase.total === 'number') { text += ' ' + phase.done + '/' + phase.total; }
    return text;
  }
  // The parts of the page that show a running task: its questions row, its metrics.
  function refresh(id, task, metric, phase) {
    var blocks = metric || {};
    var means = Object.assign({}, blocks.retrieval_metrics || {},
                              blocks.generation_metrics || {}, blocks.quality_metrics || {},
                              blocks.custom_metrics || {});
    var counts = blocks.counts || {};
    document.querySelectorAll('[data-live]').forEach(function (scope) {
      if (scope.getAttribute('data-live') !== id) { return; }
      scope.querySelectorAll('[data-field="questions"]').forEach(function (cell) {
        cell.textContent = task.finished + '/' + task.total;
      });
      scope.querySelectorAll('[data-field="phase"]').forEach(function (cell) {
        cell.textContent = task.status < 2 ? phaseText(phase) : '';
      });
      scope.querySelectorAll('[data-metric]').forEach(function (cell) {
        cell.textContent = figure(means[cell.getAttribute('data-metric')]);
      });
      scope.querySelectorAll('[data-metric-n]').forEach(function (cell) {
        var n = counts[cell.getAttribute('data-metric-n')];
        cell.textContent = n === undefined ? '\u2014' : String(n);
      });
    });
  }
  function poll() {
    var pending = 0;
    bars.forEach(function (bar) {
      if (bar.getAttribute('data-running') !== '1') { return; }
      pending += 1;
      var id = bar.getAttribute('data-task');
      fetch('/api/v1/evaluation?task_id=' + encodeURIComponent(id),
            {credentials: 'same-origin', headers: {'Accept': 'application/json'}})
        .then(function (r) { return r.json(); })
        .then(function (body) {
          if (!body.success) { return; }
          var task = body.data.task;
          var share = task.total ? Math.min(100, 100 * task.finished / task.total) : 0;
          bar.querySelector('span').style.width = share.toFixed(1) + '%';
          var count = bar.parentNode.querySelector('.count');
          if (count) { count.textContent = task.finished + '/' + task.total; }
          refresh(id, task, body.data.metric, body.data.phase);
          if (task.status >= 2) { bar.setAttribute('data-running', '0'); location.reload(); }
        })
        .catch(function () {});
    });
    if (pending) { setTimeout(poll, 1000); }
  }
  setTimeout(poll, 1000);
})();
""".replace("__PHASES__", json.dumps(PHASE_NAMES))


def _page(title: str, body: str, principal: Principal | None = None) -> str:
    nav = ""
    if principal is not None:
        nav = (
            '<a href="/">Runs</a><a href="/trends">Trends</a>'
            f'<span class="who">tenant {principal.tenant} · key {escape(principal.key_id)} '
            f"({escape(principal.role)})</span>"
            '<form method="post" action="/logout"><button type="submit">Log out</button></form>'
        )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(title)} · pytest-ragev</title><style>{_CSS}</style></head><body>"
        f"<header><strong>pytest-ragev</strong>{nav}</header><main>{body}</main>"
        '<script src="/assets/dashboard.js"></script></body></html>\n'
    )


def _badge(status: int, verdict: Mapping[str, Any] | None = None) -> str:
    """The status badge; a task that ran to its end (status 2) but whose verdict failed is
    not green: the verdict badge beside it says why."""
    css = "s2x" if status == 2 and verdict and verdict.get("passed") is False else f"s{status}"
    return f'<span class="badge {css}">{STATUS_NAMES.get(status, str(status))}</span>'


def _verdict(verdict: Mapping[str, Any] | None) -> str:
    """The gate's verdict as a badge (its failures in the title), or a dash."""
    if not verdict or verdict.get("passed") is None:
        return _MISSING
    if verdict["passed"]:
        return '<span class="badge vpass" data-verdict="passed">passed</span>'
    failures = [str(f) for f in verdict.get("failures") or []]
    title = escape("; ".join(failures)[:500], quote=True)
    return f'<span class="badge vfail" data-verdict="failed" title="{title}">failed</span>'


def phase_text(phase: Mapping[str, Any] | None) -> str:
    """``building the knowledge base 120/400``: what a running task does."""
    if not phase:
        return ""
    name = str(phase.get("name", ""))
    text = PHASE_NAMES.get(name, name)
    if isinstance(phase.get("total"), int):
        text += f" {phase.get('done')}/{phase['total']}"
    return text


_MISSING = '<span class="muted">—</span>'


def _figure(value: Any) -> str:
    """A metric value as every report writes it (:func:`core.fmt.num`), else a dash."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return escape(fmt.num(float(value)))
    return _MISSING


#: The blocks of a report's ``metric`` that hold means, in the order pages show them.
_MEAN_BLOCKS = ("retrieval_metrics", "generation_metrics", "quality_metrics", "custom_metrics")


def _metric(metric: Mapping[str, Any] | None, name: str) -> Any:
    if not metric:
        return None
    for block in _MEAN_BLOCKS:
        means = metric.get(block)
        if isinstance(means, Mapping) and name in means:
            return means[name]
    return None


def metric_names(metrics: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """The twelve metrics, then every other metric (similarity, judged, custom) that one
    of ``metrics`` has a mean for, in the order they come."""
    names = list(METRIC_NAMES)
    for metric in metrics:
        for block in _MEAN_BLOCKS[2:]:
            means = (metric or {}).get(block)
            if isinstance(means, Mapping):
                names += [str(name) for name in means if str(name) not in names]
    return names


def _progress(task: Mapping[str, Any], phase: Mapping[str, Any] | None = None) -> str:
    total, finished = int(task["total"] or 0), int(task["finished"] or 0)
    share = min(100.0, 100.0 * finished / total) if total else 0.0
    running = "1" if task["status"] in (0, 1) else "0"
    doing = escape(phase_text(phase)) if running == "1" else ""
    return (
        f'<span class="bar" data-task="{escape(task["id"])}" data-running="{running}">'
        f'<span style="width:{share:.1f}%"></span></span>'
        f'<span class="count">{finished}/{total}</span>'
        f'<span class="phase" data-field="phase">{doing}</span>'
    )


def _when(text: str | None, *, seconds: bool = True) -> str:
    """``2026-12-05 11:14:33`` (UTC, as stored); without ``seconds`` ``2026-12-05 11:14``."""
    if not text:
        return _MISSING
    shown = text.replace("T", " ")[:19 if seconds else 16]
    return f'<time datetime="{escape(text)}" title="{escape(text)}">{escape(shown)}</time>'


def _instant(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _breakable(name: str) -> str:
    """``name`` escaped, with line-break chances after ``/``, ``-`` and ``_`` (a long
    config name wraps in its cell at those, not anywhere)."""
    shown = escape(name)
    for mark in ("/", "-", "_"):
        shown = shown.replace(mark, f"{mark}<wbr>")
    return shown


def _run_link(task_id: str) -> str:
    # A long id may break after its underscores, never inside its time or its hex.
    shown = escape(task_id).replace("_", "_<wbr>")
    return f'<a href="/runs/{quote(task_id, safe="")}">{shown}</a>'


def runs_page(
    rows: Sequence[Mapping[str, Any]],
    *,
    total: int,
    page: int,
    page_size: int,
    principal: Principal,
    filters: Mapping[str, Any],
    series: Sequence[tuple[str, str, int | None]] = (),
) -> str:
    """The runs list: newest first, the status with the gate's verdict beside it, a
    progress bar per running task (and what it does), and compare pickers."""
    datasets = sorted({d for d, _, _ in series})
    configs = sorted({c for _, c, _ in series})

    def options(values: Sequence[str], chosen: Any) -> str:
        out = ['<option value="">all</option>']
        for value in values:
            mark = " selected" if value == chosen else ""
            out.append(f'<option value="{escape(value)}"{mark}>{escape(value)}</option>')
        return "".join(out)

    status_options = ['<option value="">all</option>'] + [
        f'<option value="{code}"{" selected" if filters.get("status") == code else ""}>'
        f"{name}</option>" for code, name in STATUS_NAMES.items()
    ]
    head = (
        '<form class="filters" method="get" action="/">'
        f'<label>dataset<select name="dataset_id">{options(datasets, filters.get("dataset_id"))}'
        "</select></label>"
        f'<label>config<select name="config">{options(configs, filters.get("config"))}'
        "</select></label>"
        f'<label>status<select name="status">{"".join(status_options)}</select></label>'
        '<input type="submit" value="Filter"></form>'
    )
    cells = "".join(f'<th class="num">{name}</th>' for name in KEY_METRICS)
    lines = [
        '<form method="get" action="/compare"><div class="scroll">',
        f"<table class=\"runs\"><thead><tr><th>status</th><th>verdict</th><th>task</th>"
        f"<th>dataset</th>"
        f"<th>config</th><th>started</th><th class=\"num\">duration</th><th>progress</th>"
        f"{cells}<th>A</th><th>B</th></tr></thead><tbody>",
    ]
    for row in rows:
        task, request = row["task"], row["request"]
        metrics = "".join(
            f'<td class="num" data-metric="{name}">{_figure(_metric(row["metric"], name))}</td>'
            for name in KEY_METRICS)
        tid = escape(task["id"])
        pick = task["status"] in (2, 3)
        duration = fmt.seconds(task["duration"]) if task["duration"] is not None else "—"
        radio_a = f'<input type="radio" name="a" value="{tid}" aria-label="A">' if pick else ""
        radio_b = f'<input type="radio" name="b" value="{tid}" aria-label="B">' if pick else ""
        lines.append(
            f'<tr data-status="{task["status"]}" data-live="{tid}">'
            f'<td class="status">{_badge(task["status"], row.get("verdict"))}</td>'
            f'<td class="verdict">{_verdict(row.get("verdict"))}</td>'
            f'<td class="task">{_run_link(task["id"])}</td><td>{escape(task["dataset_id"])}</td>'
            f'<td class="config">{_breakable(request["config"])}</td>'
            f'<td class="when">{_when(task["start_time"], seconds=False)}</td>'
            f'<td class="num">{escape(duration)}</td>'
            f'<td class="progress">{_progress(task, row.get("phase"))}</td>{metrics}'
            f"<td>{radio_a}</td><td>{radio_b}</td></tr>"
        )
    if not rows:
        lines.append(f'<tr><td colspan="{10 + len(KEY_METRICS)}" class="muted">No evaluation '
                     "tasks yet: POST /api/v1/evaluation creates one.</td></tr>")
    lines.append('</tbody></table></div><p><input type="submit" value="Compare A with B"></p>'
                 "</form>")
    pages = max(1, math.ceil(total / page_size))
    plural = "" if total == 1 else "s"
    pager = [f'<div class="pager">{total} task{plural} · page {page} of {pages}']
    query = {k: v for k, v in filters.items() if v not in (None, "")}
    if page > 1:
        pager.append(f' · <a href="/?{escape(urlencode({**query, "page": page - 1}))}">newer</a>')
    if page < pages:
        pager.append(f' · <a href="/?{escape(urlencode({**query, "page": page + 1}))}">older</a>')
    pager.append("</div>")
    body = "<h1>Evaluation runs</h1>" + head + "".join(lines) + "".join(pager)
    return _page("Runs", body, principal)


def run_page(
    row: Mapping[str, Any],
    *,
    params: Mapping[str, Any] | None,
    has_report: bool,
    log_tail: str | None,
    previous: str | None,
    principal: Principal | None = None,
) -> str:
    """One run: its state, settings and metrics, errors, and the plugin's HTML report."""
    task, request, metric = row["task"], row["request"], row["metric"]
    quoted = quote(task["id"], safe="")
    verdict = row.get("verdict") or {}
    shown = f" verdict {_verdict(verdict)}" if verdict else ""
    parts = [f"<h1>{escape(task['id'])} {_badge(task['status'], verdict)}{shown}</h1>"]
    if task["status"] in (0, 1):
        parts.append(f'<p data-live="{escape(task["id"])}">{_progress(task, row.get("phase"))}'
                     "</p>")
    if task["err_msg"]:
        parts.append(f'<div class="err">{escape(task["err_msg"])}</div>')
    pipeline = (params or {}).get("pipeline") or {}
    meta = [
        ("dataset", task["dataset_id"]), ("config", request["config"]),
        ("knowledge base", request["knowledge_base_id"]), ("pipeline", pipeline.get("name")),
        ("embedding model", request.get("embedding_id") or "(the config's)"),
        ("chat model", request["chat_id"] or "(the config's)"),
        ("rerank model", request["rerank_id"] or "(the config's)"),
        ("judge", request.get("judge_id") or "(the config's)"),
        ("variants", ", ".join(request["variant"]) or "all"),
        ("limit", request["limit"] or "none"),
        ("profile", request["profile"] or ((params or {}).get("metrics") or {}).get("profile")),
        ("started", _when(task["start_time"])), ("ended", _when(task["end_time"])),
        ("duration", fmt.seconds(task["duration"]) if task["duration"] is not None else "—"),
        ("questions", f"{task['finished']}/{task['total']}"),
    ]
    # While it runs, the page's script keeps the questions row and the metrics current.
    parts.append(f'<div data-live="{escape(task["id"])}"><table class="meta"><tbody>')
    for name, value in meta:
        if name in ("started", "ended"):
            cell = value
        else:
            cell = _MISSING if value is None else escape(str(value))
        field = ' data-field="questions"' if name == "questions" else ""
        parts.append(f"<tr><td>{name}</td><td{field}>{cell}</td></tr>")
    parts.append("</tbody></table>")
    running = " (running mean)" if task["status"] == 1 else ""
    parts.append(f"<h2>Metrics{running}</h2>")
    counts = (metric or {}).get("counts") or {}
    parts.append('<table><thead><tr><th>metric</th><th class="num">mean</th>'
                 '<th class="num">n</th></tr></thead><tbody>')
    for name in metric_names([metric]):
        shown = escape(name)
        parts.append(
            f'<tr><td>{shown}</td><td class="num" data-metric="{shown}">'
            f"{_figure(_metric(metric, name))}</td>"
            f'<td class="num" data-metric-n="{shown}">{escape(str(counts.get(name, "—")))}</td>'
            "</tr>")
    parts.append("</tbody></table></div>")
    if verdict.get("failures"):
        items = "".join(f"<li>{escape(str(f))}</li>" for f in verdict["failures"])
        parts.append(f"<h2>Verdict: failed</h2><ul>{items}</ul>")
    elif verdict:
        parts.append("<h2>Verdict: passed</h2>")
    links = [f'<a href="/api/v1/evaluation/samples?task_id={quoted}">samples (JSON)</a>']
    if previous is not None and task["status"] == 2:
        links.append(
            f'<a href="/compare?{escape(urlencode({"a": previous, "b": task["id"]}))}">'
            "compare with the previous run</a>")
    parts.append(f"<p>{' · '.join(links)}</p>")
    if log_tail:
        parts.append(f'<h2>Log (last lines)</h2><pre class="err log">{escape(log_tail)}</pre>')
    if has_report:
        # Scripts on (the report's table sorts and filters), but no allow-same-origin:
        # the report runs in an origin of its own, away from the dashboard's session.
        parts.append(f'<h2>Report</h2><iframe title="HTML report" sandbox="allow-scripts" '
                     f'src="/runs/{quoted}/report.html"></iframe>')
    return _page(task["id"], "".join(parts), principal)


def trends_page(
    series: Sequence[tuple[str, str, int | None, Sequence[Mapping[str, Any]]]],
    principal: Principal | None = None,
) -> str:
    """Per dataset, config and question limit, each metric's mean over the finished runs,
    oldest left: the runs of the first N questions are a line of their own, never points
    on the line of the full runs."""
    parts = ["<h1>Trends</h1>"]
    if not series:
        parts.append('<p class="muted">No finished runs yet.</p>')
    for dataset_id, config, limit, rows in series:
        query = urlencode({"dataset_id": dataset_id, "config": config, "status": 2})
        key = f"{dataset_id}/{config}" + ("" if limit is None else f"/limit={limit}")
        scope = "all questions" if limit is None else (
            f"the first {limit} question{'' if limit == 1 else 's'}")
        parts.append(
            f'<h2 data-series="{escape(key)}">dataset '
            f"{escape(dataset_id)} · config {escape(config)} · {scope} · "
            f'<a href="/?{escape(query)}">{len(rows)} run{"" if len(rows) == 1 else "s"}</a>'
            '</h2><div class="grid">')
        for name in metric_names(row["metric"] for row in rows):
            points = [Point(f"{row['id']} ({(row['start_time'] or '').replace('T', ' ')[:19]})",
                            _metric(row["metric"], name), at=_instant(row["start_time"]))
                      for row in rows]
            parts.append(f'<div class="card">{line_chart(points, title=name)}</div>')
        parts.append("</div>")
    return _page("Trends", "".join(parts), principal)


#: How many questions the compare view lists per regressed metric, and overall.
PER_METRIC = 5
OVERALL = 10


def _run_title(row: Mapping[str, Any], run: RunResult) -> str:
    """``slow [faster], 2026-12-05 11:14:33``: the config, the variant shown, the start."""
    variant = f" [{escape(run.variant)}]" if run.variant else ""
    return f"{escape(row['request']['config'])}{variant}, {_when(row['task']['start_time'])}"


def comparability(a: Mapping[str, Any], b: Mapping[str, Any], before: RunResult,
                  after: RunResult) -> list[str]:
    """What makes run B's figures differ from A's for reasons other than the pipeline's
    answers, one line each: another profile, tokenizer, dataset or config, and the
    settings that differ."""
    lines = []
    if before.profile != after.profile:
        lines.append(f"A was scored with the {before.profile} profile, B with {after.profile}: "
                     "the metrics are defined differently, so part of each Δ is the profile's.")
    if before.tokenizer and after.tokenizer and before.tokenizer != after.tokenizer:
        lines.append(f"the text metrics' tokenizers differ (A {before.tokenizer}, B "
                     f"{after.tokenizer}): generation figures are not comparable.")
    limits = [(run.params.get("dataset") or {}).get("limit") for run in (before, after)]
    if before.dataset_id == after.dataset_id and limits[0] != limits[1]:
        ran = ["all questions" if n is None else f"the first {n} questions" for n in limits]
        lines.append(f"A ran {ran[0]} of {before.dataset_id}, B {ran[1]}: only the "
                     "questions both ran are compared.")
    elif before.dataset_id != after.dataset_id or before.fingerprint != after.fingerprint:
        lines.append(f"the datasets differ (A {before.dataset_id} {before.fingerprint[:12]}, "
                     f"B {after.dataset_id} {after.fingerprint[:12]}): questions are paired "
                     "by qid, so a qid that holds another question in each compares two "
                     "different questions.")
    config_a, config_b = a["request"]["config"], b["request"]["config"]
    if config_a != config_b:
        lines.append(f"A ran config {config_a}, B config {config_b}.")
    settings = [key for key in changed_keys(before.params, after.params)
                if not key.startswith(("dataset.", "metrics."))]
    if settings:
        shown = ", ".join(settings[:12]) + (f" and {len(settings) - 12} more"
                                            if len(settings) > 12 else "")
        lines.append(f"their settings differ in {shown}.")
    return lines


def _worse_table(diffs: Sequence[QuestionDiff], metrics: Sequence[str]) -> str:
    """Questions with their change in each of ``metrics`` (every changed metric when
    ``metrics`` is empty) and what they retrieved before and after."""
    heads = "".join(f'<th class="num">Δ {escape(name)}</th>' for name in metrics)
    heads = heads or "<th>changed metrics</th>"
    rows = [f"<table><thead><tr><th>qid</th><th>question</th>{heads}"
            "<th>retrieved A → B</th></tr></thead><tbody>"]
    for diff in diffs:
        if metrics:
            cells = ""
            for name in metrics:
                delta = diff.metrics[name].delta if name in diff.metrics else None
                cells += f'<td class="num">{escape(fmt.num(delta, signed=True, missing=""))}</td>'
        else:
            change = ", ".join(
                f"{name} {fmt.num(d.delta, signed=True)}" for name, d in diff.metrics.items()
                if d.delta is not None and d.delta != 0)
            cells = f"<td>{escape(change or (diff.error_after or ''))}</td>"
        rows.append(
            f"<tr><td>{diff.qid}</td><td>{escape(fmt.shorten(diff.question, 90))}</td>{cells}"
            f"<td>{escape(fmt.ids(diff.retrieved_before, diff.relevant))} → "
            f"{escape(fmt.ids(diff.retrieved_after, diff.relevant))}</td></tr>")
    rows.append("</tbody></table>")
    return "".join(rows)


def _fell_most(before: RunResult, after: RunResult,
               regressed: Mapping[str, str]) -> list[QuestionDiff]:
    """The questions that fell most in any regressed metric (name -> direction): each
    metric's worst :data:`PER_METRIC`, together, worst first over those metrics."""
    found: dict[int, QuestionDiff] = {}
    for name in regressed:
        for diff in top_regressions(before, after, PER_METRIC, metric=name):
            found.setdefault(diff.qid, diff)

    def fall(diff: QuestionDiff) -> float:
        total = 0.0
        for name, direction in regressed.items():
            delta = diff.metrics[name].delta if name in diff.metrics else None
            if delta is not None:
                total += -delta if direction == "higher" else delta
        return total

    return sorted(found.values(), key=lambda d: (-fall(d), d.qid))


#: The metrics the compare page's slices table shows, when the runs have them.
_SLICE_METRICS = ("recall", "ndcg10", "rougel")


def _slices_section(before: RunResult, after: RunResult) -> str:
    """Each language's and tag's change from A to B (runs that record slices): the
    gate's slice test, one max-T family over the slices and metrics (docs/slices.md)."""
    if not any(sample.slices for sample in after.samples):
        return ""
    try:
        tested = compare(before, after, GateRules(slices=("lang", "tag"))).slices
    except Exception:  # BaselineError: no shared question (said above)
        return ""
    if not tested:
        return ""
    names = [n for n in _SLICE_METRICS if tested[0].get(n) is not None] or [
        m.metric for m in tested[0].metrics[:3]]
    head = "".join(f'<th class="num">{escape(n)} Δ (B − A)</th>' for n in names)
    rows = []
    for item in tested:
        cells = []
        for name in names:
            m = item.get(name)
            css = " regressed" if m is not None and m.status == "regressed" else ""
            text = "—" if m is None else f"{fmt.num(m.delta, signed=True)} ({m.status})"
            cells.append(f'<td class="num{css}">{escape(text)}</td>')
        rows.append(f"<tr><td>{escape(item.key)}</td><td class=\"num\">{item.n}</td>"
                    f"{''.join(cells)}</tr>")
    return ('<h2>Slices</h2><p>Each language and tag over the questions both runs share, '
            "p adjusted over every slice and metric together.</p>"
            '<div class="scroll"><table class="compare" data-slices><thead><tr><th>slice</th>'
            f'<th class="num">n</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></div>")


def compare_page(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    before: RunResult,
    after: RunResult,
    principal: Principal | None = None,
) -> str:
    """Run B against run A with the gate's paired comparison over their shared questions:
    what makes them hard to compare, each metric's change, and per regressed metric the
    questions that fell most."""
    ta, tb = a["task"], b["task"]
    parts = [f"<h1>Compare</h1><p>A: {_run_link(ta['id'])} ({_run_title(a, before)})<br>"
             f"B: {_run_link(tb['id'])} ({_run_title(b, after)})</p>"]
    caveats = comparability(a, b, before, after)
    if caveats:
        items = "".join(f"<li>{escape(line)}</li>" for line in caveats)
        parts.append(f'<div class="warn" data-caveats="{len(caveats)}"><strong>Read with '
                     f"care:</strong><ul>{items}</ul></div>")
    try:
        comparison = compare(before, after, GateRules())
    except Exception as exc:  # BaselineError: no shared question
        parts.append(f'<div class="err">{escape(str(exc))}</div>')
        return _page("Compare", "".join(parts), principal)
    parts.append(
        f"<p>{len(comparison.common_qids)} shared questions; "
        f"{len(comparison.added)} only in B, {len(comparison.removed)} only in A. "
        "Paired bootstrap over the shared questions, one-sided p adjusted over the metrics "
        "(the gate's defaults).</p>")
    parts.append('<div class="scroll"><table class="compare"><thead><tr><th>metric</th>'
                 '<th class="num">A</th><th class="num">B</th><th class="num">Δ (B − A)</th>'
                 '<th>CI</th><th class="num">p</th><th class="num">n</th><th>status</th>'
                 "</tr></thead><tbody>")
    for item in comparison.metrics:
        css = {"regressed": "regressed", "improved": "improved"}.get(item.status, "")
        parts.append(
            f'<tr class="{css}"><td>{escape(item.metric)}</td>'
            f'<td class="num">{fmt.num(item.baseline_mean)}</td>'
            f'<td class="num">{fmt.num(item.current_mean)}</td>'
            f'<td class="num">{fmt.num(item.delta, signed=True)}</td>'
            f"<td>{escape(fmt.ci(item.ci_low, item.ci_high))}</td>"
            f'<td class="num">{fmt.p_value(item.p)}</td><td class="num">{item.n}</td>'
            f"<td>{escape(item.status)}</td></tr>")
    parts.append("</tbody></table></div>")
    parts.append(_slices_section(before, after))
    # Per regressed metric: a ranking by the sum over all metrics hides a retrieval
    # regression behind a generation gain on the same questions.
    sections = []
    regressed = {item.metric: item.direction for item in comparison.metrics
                 if item.status == "regressed"}
    fell = _fell_most(before, after, regressed) if regressed else []
    if fell:
        names = ", ".join(regressed)
        sections.append(f'<h3 data-regressed="{escape(names)}">In the regressed metrics '
                        f"({escape(names)}): up to {PER_METRIC} questions each that fell most"
                        "</h3>" + _worse_table(fell, list(regressed)))
    overall = top_regressions(before, after, OVERALL)
    if overall:
        sections.append("<h3>Over all metrics (the sum of each metric's change)</h3>"
                        + _worse_table(overall, ()))
    if sections:
        parts.append("<h2>Questions that got worse</h2>" + "".join(sections))
    return _page("Compare", "".join(parts), principal)


def safe_next(path: str | None) -> str:
    """Where to go after logging in: a path on this server, else ``/``.

    Browsers read a backslash as a slash and drop tabs and line breaks in a URL, so
    ``/\\host`` and ``/<tab>/host`` go to ``//host``, another origin: a path with a
    backslash, a control character or white space is refused, as one starting ``//``.
    """
    if not path or not path.startswith("/") or path.startswith("//"):
        return "/"
    if any(ch == "\\" or ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        return "/"
    return path


def login_page(message: str | None = None, next_path: str | None = None) -> str:
    """The key form: the dashboard needs a viewer (or admin) key, kept in a session cookie."""
    note = f'<div class="err">{escape(message)}</div>' if message else ""
    body = (
        "<h1>Log in</h1>" + note +
        '<form method="post" action="/login">'
        f'<input type="hidden" name="next" value="{escape(safe_next(next_path))}">'
        '<p><label>API key (viewer or admin)<br>'
        '<input type="password" name="key" size="70" autocomplete="off" required></label></p>'
        '<p><input type="submit" value="Log in"></p></form>'
        '<p class="muted">Create a key with <code>ragev serve keys create --role viewer'
        "</code>. The page keeps a session cookie, never the key.</p>"
    )
    return _page("Log in", body)


def not_found(message: str) -> str:
    """A page for a run that does not exist (or belongs to another tenant)."""
    return _page("Not found", f'<h1>Not found</h1><p>{escape(message)}</p><p><a href="/">'
                              "All runs</a></p>")

