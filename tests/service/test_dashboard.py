"""The dashboard's HTML: runs listed, trend SVG, run page, compare view; and a real browser."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import Server, create, finished, wait_for

#: Each module starts a real `ragev serve` (seconds), and its tests wait for evaluations.
pytestmark = pytest.mark.slow

ASSET = re.compile(r"""(?:src|href|action)=["']([^"']+)["']""")


@pytest.fixture(scope="module")
def two_runs(shared_server: Server) -> tuple[str, str]:
    admin = shared_server.client(shared_server.keys.admin)
    first = create(admin, config="slow", variant="base", limit=12)
    wait_for(admin, first["id"], finished)
    second = create(admin, config="slow", variant="faster", limit=12)
    wait_for(admin, second["id"], finished)
    return str(first["id"]), str(second["id"])


def _logged_in(server: Server, key: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=30)
    response = client.post("/login", data={"key": key, "next": "/"})
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert key not in cookie  # a session token, never the key
    return client


def _no_external_assets(page: str) -> None:
    for target in ASSET.findall(page):
        assert target.startswith(("/", "#")), target
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


def test_pages_need_a_login(shared_server: Server) -> None:
    response = httpx.get(f"{shared_server.url}/trends", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Ftrends"
    bad = httpx.post(f"{shared_server.url}/login", data={"key": "rgv_nope"})
    assert bad.status_code == 401 and "not valid" in bad.text


def test_runs_list_trends_run_page_and_compare(shared_server: Server,
                                               two_runs: tuple[str, str]) -> None:
    client = _logged_in(shared_server, shared_server.keys.viewer)
    first, second = two_runs
    home = client.get("/")
    assert home.status_code == 200
    assert first in home.text and second in home.text
    assert home.text.index(second) < home.text.index(first)  # newest first
    assert 'class="badge s2"' in home.text and 'data-task="' in home.text
    assert "Content-Security-Policy" in home.headers
    _no_external_assets(home.text)

    trends = client.get("/trends").text
    # Both runs ran the first 12 questions: a line of their own, apart from full runs.
    assert 'data-series="multi/slow/limit=12"' in trends and "the first 12 questions" in trends
    assert trends.count("<svg") >= 12 and "<polyline" in trends
    _no_external_assets(trends)

    run = client.get(f"/runs/{second}").text
    assert f'src="/runs/{second}/report.html"' in run and "rougel" in run
    assert "compare with the previous run" in run
    # The report's own script may run (its table sorts and filters), sandboxed in an
    # origin of its own: no allow-same-origin in the frame, nothing but its script by hash.
    assert '<iframe title="HTML report" sandbox="allow-scripts" ' in run
    assert "allow-same-origin" not in run
    report = client.get(f"/runs/{second}/report.html")
    assert report.status_code == 200 and "<svg" in report.text
    policy = report.headers["content-security-policy"]
    assert policy.endswith("sandbox allow-scripts") and "allow-same-origin" not in policy
    script_src = re.search(r"script-src ([^;]+);", policy)
    assert script_src is not None
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", script_src.group(1))  # one, no inline
    assert "connect-src" not in policy and "default-src 'none'" in policy

    compare = client.get("/compare", params={"a": first, "b": second}).text
    assert "12 shared questions" in compare
    assert compare.count("<tr") >= 13 and "ndcg10" in compare
    _no_external_assets(compare)

    other = _logged_in(shared_server, shared_server.keys.other)
    assert other.get(f"/runs/{second}").status_code == 404
    assert first not in other.get("/").text

    script = client.get("/assets/dashboard.js")
    assert script.status_code == 200 and "fetch(" in script.text
    client.post("/logout")
    assert client.get("/", follow_redirects=False).status_code == 303


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_dashboard_in_headless_chromium(shared_server: Server, two_runs: tuple[str, str],
                                        tmp_path: Path) -> None:
    """Log in with a login link, let the page's script run, and check the DOM it shows."""
    assert CHROMIUM is not None
    first, second = two_runs
    shots = Path(os.environ.get("RAGEV_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    for name, target in (("runs", "/"), ("trends", "/trends"), ("run", f"/runs/{second}"),
                         ("report", f"/runs/{second}/report.html"),
                         ("compare", f"/compare?a={first}%26b={second}")):
        url = (f"{shared_server.url}/login?next={target}#key={shared_server.keys.viewer}")
        common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  f"--user-data-dir={tmp_path / ('profile-' + name)}",
                  "--virtual-time-budget=8000", "--window-size=1280,900"]
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True,
                             timeout=90).stdout
        subprocess.run([*common, f"--screenshot={shots / (name + '.png')}", url],
                       capture_output=True, timeout=90)
        assert (shots / f"{name}.png").stat().st_size > 5000
        assert "Log in</h1>" not in dom, dom[:500]  # the login link worked
        if name == "runs":
            assert second in dom and 'class="badge s2"' in dom
        elif name == "trends":
            assert "<polyline" in dom
        elif name == "run":
            assert "report.html" in dom
        elif name == "report":
            # The report's script ran under the served policy: it marks the headers
            # sortable and counts the rows the filter shows.
            assert 'aria-sort="none"' in dom and re.search(r"\d+ of \d+ shown", dom), dom[-3000:]
        else:
            assert "shared questions" in dom


def test_compare_lists_the_questions_behind_a_regressed_metric(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    runs = [create(admin, config="tradeoff", variant=variant)["id"] for variant in ("base", "b")]
    for task_id in runs:  # the two run side by side (--max-parallel 2)
        assert wait_for(admin, task_id, finished)["task"]["status"] == 2
    client = _logged_in(shared_server, shared_server.keys.viewer)
    page = client.get("/compare", params={"a": runs[0], "b": runs[1]}).text
    # B ranks a wrong passage first on odd questions but answers every one right:
    # summed over all metrics no question got worse, per retrieval metric five did.
    assert page.count('<td class="num">−0.250</td>') >= 3  # precision, mrr, map means
    assert 'data-regressed="precision, ndcg3, ndcg10, mrr, map"' in page
    section = page[page.index("data-regressed="):]
    assert re.findall(r"<tr><td>(\d+)</td>", section) == ["1", "3", "5", "7", "9"]
    assert "Over all metrics" not in page
    assert "their settings differ in pipeline.mode." in page


#: Stands in for the server while a page's script polls: a running task further along
#: than the page showed when it was served.
FETCH_STUB = """
window.fetch = function () {
  var detail = {success: true, data: {
    task: {id: "TASK", status: 1, finished: 17, total: 48},
    phase: {name: "building_kb", done: 120, total: 400},
    metric: {retrieval_metrics: {recall: 0.625, ndcg10: 0.5}, generation_metrics: {rougel: 0.75},
             counts: {recall: 17, ndcg10: 17, rougel: 16}}}};
  return Promise.resolve({json: function () { return Promise.resolve(detail); }});
};
"""

#: Reads what the page shows once its script polled, and how the runs table is laid out.
LAYOUT_PROBE = """
setTimeout(function () {
  function lines(cell) {
    var range = document.createRange();
    range.selectNodeContents(cell);
    var tops = {};
    Array.prototype.forEach.call(range.getClientRects(), function (r) { tops[Math.round(r.top)] = 1; });
    return Object.keys(tops).length;
  }
  var out = {}, main = document.querySelector("main");
  var style = getComputedStyle(main);
  out.overflow = Math.round(document.querySelector("table").getBoundingClientRect().right
    - (main.getBoundingClientRect().right - parseFloat(style.paddingRight)));
  var row = document.querySelector('tr[data-live="TASK"]');
  if (row) {
    var progress = row.querySelector("td.progress");
    out.started_lines = lines(row.querySelector("td.when"));
    var bar = progress.querySelector(".bar").getBoundingClientRect();
    var count = progress.querySelector(".count").getBoundingClientRect();
    out.count_beside_bar = count.left >= bar.right && count.top < bar.bottom;
    out.row_count = count.width ? progress.querySelector(".count").textContent : null;
    out.row_recall = row.querySelector('td[data-metric="recall"]').textContent.trim();
    out.row_phase = progress.querySelector('[data-field="phase"]').textContent;
  }
  var questions = document.querySelector('[data-field="questions"]');
  out.questions = questions ? questions.textContent : null;
  var phase = document.querySelector('[data-field="phase"]');
  out.phase = phase ? phase.textContent : null;
  var recall = Array.prototype.filter.call(document.querySelectorAll("table tr"), function (r) {
    return r.cells.length === 3 && r.cells[0].textContent === "recall";
  })[0];
  out.metric_recall = recall ? [recall.cells[1].textContent, recall.cells[2].textContent] : null;
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 4000);
"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_running_task_stays_current_and_the_runs_table_fits(
    shared_server: Server, two_runs: tuple[str, str], tmp_path: Path,
) -> None:
    """The pages as served, their script fed a task further along than when they were
    served: the progress, what it does, the questions row and the metrics follow; and
    the runs table fits its column with one-line dates, the count beside the bar, and a
    long config name wrapped in its cell instead of pushing the columns off the table."""
    assert CHROMIUM is not None
    admin = shared_server.client(shared_server.keys.admin)
    long_name = "team-retrieval-experiments/chunking_and_reranking-ablation-2026-12-05-v3"
    (shared_server.configs / long_name).parent.mkdir(parents=True, exist_ok=True)
    # Its pipeline module beside it: "module:callable" is imported from the config's
    # folder (without it the task fails at once, and the pages no longer show it running).
    shutil.copyfile(shared_server.configs / "slowpipe.py",
                    (shared_server.configs / long_name).parent / "slowpipe.py")
    (shared_server.configs / f"{long_name}.toml").write_text(
        (shared_server.configs / "slow-long.toml").read_text(encoding="utf-8").replace(
            'path = "data/multi"', 'path = "../data/multi"'), encoding="utf-8")
    task = create(admin, config=long_name, limit=20)
    try:
        client = _logged_in(shared_server, shared_server.keys.viewer)
        script = client.get("/assets/dashboard.js").text
        seen = {}
        for name, path in (("runs", "/"), ("run", f"/runs/{task['id']}")):
            page = client.get(path).text
            assert 'data-running="1"' in page  # served while the task waits or runs
            scripts = "".join(f"<script>{text.replace('TASK', task['id'])}</script>"
                              for text in (FETCH_STUB, script, LAYOUT_PROBE))
            local = tmp_path / f"{name}.html"
            local.write_text(page.replace('<script src="/assets/dashboard.js"></script>',
                                          scripts), encoding="utf-8")
            dom = subprocess.run(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", f"--user-data-dir={tmp_path / name}",
                 "--virtual-time-budget=8000", "--window-size=1280,900", "--dump-dom",
                 local.as_uri()], capture_output=True, text=True, timeout=90).stdout
            found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
            assert found, dom[-2000:]
            seen[name] = json.loads(html.unescape(found.group(1)))
    finally:
        admin.post("/api/v1/evaluation/cancel", json={"task_id": task["id"]})
    runs, run = seen["runs"], seen["run"]
    assert runs["overflow"] <= 0, runs  # the table ends inside main's content box
    assert runs["started_lines"] == 1 and runs["count_beside_bar"] is True, runs
    assert runs["row_count"] == "17/48" and runs["row_recall"] == "0.625", runs
    assert runs["row_phase"] == "building the knowledge base 120/400", runs
    assert run["questions"] == "17/48", run  # no longer what the page was served with
    assert run["phase"] == "building the knowledge base 120/400", run
    assert run["metric_recall"] == ["0.625", "17"], run
