"""End to end in a real browser: the HTML report's questions table sorts and filters.

Runs headless Chromium (Debian's ``chromium``) when it is installed, skipped otherwise. The
report is loaded from a file, offline, in a fresh profile; a script added after the
report's own clicks the headers and types into the filter, then writes what it saw into
the page, which ``--dump-dom`` prints.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.plugin.test_report_drilldown import WEAK

Project = Callable[..., Path]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PROBE = textwrap.dedent(
    """
    <script>
    window.__errors = [];
    window.addEventListener("error", function (e) { window.__errors.push(String(e.message)); });
    window.addEventListener("load", function () {
      var table = document.getElementById("questions");
      function shown() {
        return Array.prototype.filter.call(table.tBodies[0].rows, function (r) { return !r.hidden; })
          .map(function (r) { return r.cells[0].textContent.trim(); });
      }
      function type(text) {
        var input = document.querySelector('input[data-filter="questions"]');
        input.value = text;
        input.dispatchEvent(new Event("input"));
        return shown();
      }
      var out = {initial: shown()};
      var recall = table.querySelector('th[data-key="recall"]');
      recall.click(); out.recall_up = shown(); out.sort_up = recall.getAttribute("aria-sort");
      recall.click(); out.recall_down = shown(); out.sort_down = recall.getAttribute("aria-sort");
      table.querySelector('th[data-key="question"]').click(); out.by_question = shown();
      out.below_one = type("recall < 1");
      out.count = document.querySelector('[data-count="questions"]').textContent;
      out.words = type("eiffel tower");
      out.errors_only = type("verbindung");
      out.everything = type("");
      out.js_errors = window.__errors;
      var pre = document.createElement("pre");
      pre.id = "probe";
      pre.textContent = JSON.stringify(out);
      document.body.appendChild(pre);
    });
    </script>
    """
)


def run_in_chromium(page: Path, profile: Path) -> dict[str, object]:
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no probe output; chromium said: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))  # type: ignore[no-any-return]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt install chromium)")
def test_the_questions_table_sorts_and_filters_in_a_browser(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=WEAK)
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-html", "r.html")
    report = (pytester.path / "r.html").read_text(encoding="utf-8")
    probe = pytester.path / "probe.html"
    probe.write_text(report.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    seen = run_in_chromium(probe, pytester.path / "profile")
    assert seen["js_errors"] == []
    assert seen["initial"] == ["1", "2", "3", "4", "5"]
    # recall: q1 0, q2 0.5, q3 0, q4 1; q5 raised and has none: last, either way.
    assert seen["recall_up"] == ["1", "3", "2", "4", "5"] and seen["sort_up"] == "ascending"
    assert seen["recall_down"] == ["4", "2", "1", "3", "5"] and seen["sort_down"] == "descending"
    # How high, How long, How tall, When, Who.
    assert seen["by_question"] == ["3", "5", "2", "1", "4"]
    # Filtering keeps the order the last sort left.
    assert seen["below_one"] == ["3", "2", "1"] and seen["count"] == "3 of 5 shown"
    assert sorted(seen["words"]) == ["1", "2"]  # type: ignore[arg-type]
    assert seen["errors_only"] == ["5"]  # the error text is part of the row
    assert len(seen["everything"]) == 5  # type: ignore[arg-type]
