"""End to end: ``ragev report`` on the files real pytest runs wrote.

``show`` prints what the plugin printed, ``html`` writes what the plugin wrote, and
``compare`` (run as the installed ``ragev`` command, in a subprocess) reaches the
plugin's verdict with the plugin's failure lines, exit 1 on the regression.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pytest_ragev
from pytest_ragev import cli
from pytest_ragev.dataset import write_dataset

QUERIES = {
    1: "长城有多长？", 2: "Wie hoch ist die Zugspitze?", 3: "Какая река течёт через Москву?",
    4: "富士山の高さはどれくらいですか？", 5: "한라산은 어디에 있습니까?", 6: "埃菲尔铁塔在哪个城市？",
}
CORPUS = {
    1: "长城全长超过两万公里。", 2: "Die Zugspitze ist 2962 Meter hoch.",
    3: "Через Москву течёт река Москва.", 4: "富士山の高さは3776メートルです。",
    5: "한라산은 제주도에 있습니다.", 6: "埃菲尔铁塔位于法国巴黎。", 7: "Der Rhein fließt durch Köln.",
}
ANSWERS = {10 + q: a for q, a in {
    1: "超过两万公里。", 2: "2962 Meter.", 3: "Река Москва.", 4: "3776メートルです。",
    5: "제주도에 있습니다.", 6: "巴黎。",
}.items()}

#: Gold passages and the reference answer; with quality = "bad" the distractor and a
#: wrong answer for the even questions.
CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        if settings.options.get("quality") == "bad" and case.qid % 2 == 0:
            return Answer(retrieved=[7], text="Ich weiß es nicht.")
        return Answer(retrieved=list(case.pids), text=case.answer or "")
    """
)

CONFIG = """\
[dataset]
path = "数据"
id = "welt"

[pipeline]
name = "hooks"
quality = "good"

[thresholds]
recall = 0.4

[report]
json = "report.json"
html = "report.html"

[baseline]
path = "ragev-baseline.json"

[gate]
mode = "tolerance"
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    write_dataset(pytester.path / "数据", queries=QUERIES, corpus=CORPUS, answers=ANSWERS,
                  qrels=[(q, q) for q in QUERIES], qas=[(q, 10 + q) for q in QUERIES])
    pytester.makeconftest(CONFTEST)
    config = pytester.path / "ragev.toml"
    config.write_text(CONFIG, encoding="utf-8")
    return config


def ragev_summary(lines: list[str]) -> list[str]:
    """The plugin's summary in pytest's output: from the first ``ragev:`` line to the
    verdict line."""
    start = next(i for i, line in enumerate(lines) if line.startswith("ragev: welt ("))
    end = next(i for i, line in enumerate(lines) if line.startswith("ragev: verdict"))
    return lines[start:end + 1]


def failure_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if re.match(r"ragev: (recall|rougel|\w+) .* < ", line)]


def test_show_and_html_give_what_the_plugin_gave(
    pytester: pytest.Pytester, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without a baseline: the notes a run prints (--ragev-no-baseline's) are not saved.
    project.write_text(CONFIG.replace('[baseline]\npath = "ragev-baseline.json"\n', ""),
                       encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "-v")
    assert result.ret == pytest.ExitCode.OK
    printed = ragev_summary(result.stdout.lines)
    assert "ragev: verdict passed" in printed

    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert report["data"]["schema_version"] == 1  # what ragev report checks it can read
    capsys.readouterr()  # pytester's in-process run printed there too
    assert cli.main(["report", "show", "-v", str(pytester.path / "report.json")]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown == printed

    target = pytester.path / "again" / "report.html"
    assert cli.main(["report", "html", str(pytester.path / "report.json"), "-o",
                     str(target)]) == 0
    plugin_html = (pytester.path / "report.html").read_text(encoding="utf-8")
    cli_html = target.read_text(encoding="utf-8")
    # The one thing a saved report does not record is how long the run took.
    duration = re.compile(r'<span class="fact">[0-9.]+ (s|min)</span> · ')
    assert duration.search(plugin_html) and not duration.search(cli_html)
    assert cli_html == duration.sub("", plugin_html, count=1)
    assert "富士山の高さはどれくらいですか？" in cli_html


def ragev(*argv: str) -> subprocess.CompletedProcess[str]:
    """The installed ``ragev`` command (the console script beside this interpreter)."""
    script = Path(sys.executable).with_name("ragev")
    return subprocess.run([str(script), *argv], capture_output=True, text=True, check=False)


def test_compare_reaches_the_plugins_verdict(pytester: pytest.Pytester, project: Path) -> None:
    assert pytester.runpytest("--ragev-config", "ragev.toml",
                              "--ragev-update-baseline").ret == pytest.ExitCode.OK
    good = pytester.path / "good.json"
    (pytester.path / "report.json").rename(good)
    project.write_text(CONFIG.replace('quality = "good"', 'quality = "bad"'), encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    plugin_failures = failure_lines(result.stdout.lines)
    assert any(line.startswith("ragev: recall 0.500 < baseline 1.000") for line in
               plugin_failures), plugin_failures

    baseline, bad = pytester.path / "ragev-baseline.json", pytester.path / "report.json"
    # BASE may be the baseline file or the report of the good run: the same verdict.
    for base in (baseline, good):
        gated = ragev("report", "compare", str(base), str(bad), "--config", str(project))
        assert gated.returncode == 1, gated.stderr
        assert gated.stderr == ""
        assert failure_lines(gated.stdout.splitlines()) == plugin_failures
        assert gated.stdout.splitlines()[-1] == result.stdout.lines[
            next(i for i, line in enumerate(result.stdout.lines)
                 if line.startswith("ragev: verdict"))]
    # The other way round, the good run improved on the bad one: exit 0.
    improved = ragev("report", "compare", str(bad), str(good), "--config", str(project))
    assert improved.returncode == 0, improved.stdout + improved.stderr
    assert improved.stdout.splitlines()[-1] == "ragev: verdict passed"


def test_a_file_of_another_version_is_one_line(pytester: pytest.Pytester, project: Path) -> None:
    assert pytester.runpytest("--ragev-config", "ragev.toml",
                              "--ragev-update-baseline").ret == pytest.ExitCode.OK
    baseline = pytester.path / "ragev-baseline.json"
    data = json.loads(baseline.read_text(encoding="utf-8"))
    data["schema_version"] = 99
    newer = pytester.path / "newer.json"
    newer.write_text(json.dumps(data), encoding="utf-8")
    result = ragev("report", "compare", str(newer), str(pytester.path / "report.json"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"ragev: error: {newer} has schema_version 99"), \
        result.stderr


def test_a_report_used_as_base_is_range_checked_like_a_baseline(
    pytester: pytest.Pytester, project: Path
) -> None:
    """A sample's mrr hand-edited to 5.0 in BASE.json used to be compared as if true."""
    assert pytester.runpytest("--ragev-config", "ragev.toml",
                              "--ragev-no-baseline").ret == pytest.ExitCode.OK
    current = pytester.path / "report.json"
    report = json.loads(current.read_text(encoding="utf-8"))
    assert report["data"]["samples"][3]["qid"] == 4
    report["data"]["samples"][3]["metrics"]["mrr"] = 5.0
    edited = pytester.path / "edited.json"
    edited.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    result = ragev("report", "compare", str(edited), str(current), "--config", str(project))
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    assert result.stderr == (f"ragev: error: {edited}: data.samples[3].metrics.mrr (qid 4) is "
                             "5.0, not a number in [0, 1]\n")


def test_compare_after_a_dataset_edit_needs_only_the_files(
    pytester: pytest.Pytester, project: Path
) -> None:
    assert pytester.runpytest("--ragev-config", "ragev.toml",
                              "--ragev-update-baseline").ret == pytest.ExitCode.OK
    # The eval set grows in the same PR: one question more.
    queries = {**QUERIES, 7: "Durch welche Stadt fließt der Rhein?"}
    answers = {**ANSWERS, 17: "Durch Köln."}
    write_dataset(pytester.path / "数据", queries=queries, corpus=CORPUS, answers=answers,
                  qrels=[(q, q) for q in queries], qas=[(q, 10 + q) for q in queries])
    run = pytester.runpytest("--ragev-config", "ragev.toml")
    assert run.ret == pytest.ExitCode.OK
    run.stdout.fnmatch_lines(["*6 shared questions (1 added, 0 removed, 0 changed)*"])
    samples = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))[
        "data"]["samples"]
    assert all(re.fullmatch(r"[0-9a-f]{16}", sample["hash"]) for sample in samples)

    # The JSON report carries each question's content hash: no --dataset needed.
    gated = ragev("report", "compare", str(pytester.path / "ragev-baseline.json"),
                  str(pytester.path / "report.json"), "--config", str(project))
    assert gated.returncode == 0, gated.stdout + gated.stderr
    assert "6 shared questions (1 added, 0 removed, 0 changed)" in gated.stdout
    assert gated.stdout.splitlines()[-1] == "ragev: verdict passed"


def test_the_installed_command_says_its_version() -> None:
    result = ragev("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"pytest-ragev {pytest_ragev.__version__}\n"
    assert result.stderr == ""
