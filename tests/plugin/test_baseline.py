"""End-to-end tests of the baseline life cycle, the gate, variants and the CI reports."""

from __future__ import annotations

import html
import json
import shutil
import textwrap
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset
from tests._oracle import ORACLE_CONFTEST, set_quality

Project = Callable[..., Path]

BASELINE = '[baseline]\npath = "ragev-baseline.json"\n'
# Five questions: the smallest one-sided p-value is 1/32, which Holm's correction over
# twelve metrics multiplies past any alpha; these tests gate each metric on its own.
UNCORRECTED = BASELINE + '[gate]\ncorrection = "none"\n'


def test_life_cycle(pytester: pytest.Pytester, make_project: Project) -> None:
    config = make_project(UNCORRECTED)
    baseline = pytester.path / "ragev-baseline.json"

    # 1. No baseline: it is created and the run fails, telling what to do.
    first = pytester.runpytest("--ragev-config", "ragev.toml")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    first.stdout.fnmatch_lines(
        [f"ragev: baseline not found, created {baseline.name}; commit it and rerun"]
    )
    created = baseline.read_bytes()
    snapshot = json.loads(created)
    assert snapshot["schema_version"] == 3 and snapshot["dataset"]["id"] == "mini"
    assert all(len(q["hash"]) == 16 for q in snapshot["base"]["questions"])

    # 2. Rerun, nothing changed: passes, and the baseline is not rewritten.
    second = pytester.runpytest("--ragev-config", "ragev.toml")
    assert second.ret == pytest.ExitCode.OK
    assert baseline.read_bytes() == created

    # 3. A degraded pipeline fails with one red line per regressed metric.
    set_quality(config, "bad")
    third = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json", "-v")
    third.stdout.fnmatch_lines(["*most regressed question*"])
    assert third.ret == pytest.ExitCode.TESTS_FAILED
    third.stdout.fnmatch_lines(
        ["ragev: recall 0.000 < baseline 1.000 (Δ −1.000, 90% CI [[]−1.000, −1.000[]], p=0.03*, n=5)"]
    )
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    gate = report["data"]["baseline"]
    recall = gate["comparisons"][0]["metrics"]["recall"]
    assert recall["status"] == "regressed"
    assert (recall["correction"], recall["family"], recall["p_raw"]) == ("none", 1, recall["p"])
    worst = gate["regressions"][0]
    assert worst["metrics"]["recall"] == {"before": 1.0, "after": 0.0, "delta": -1.0}
    assert worst["retrieved_after"] == [7, 6] and worst["answer_after"] == "I do not know."
    obtained = pytester.path / "ragev-baseline.obtained.json"
    assert obtained.exists()
    assert baseline.read_bytes() == created  # never overwritten without the flag

    # 4. Accepting the change on purpose.
    fourth = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    assert fourth.ret == pytest.ExitCode.OK
    fourth.stdout.fnmatch_lines([f"ragev: baseline written to {baseline.name}"])
    assert baseline.read_bytes() != created

    # 5. An improvement over the (now bad) baseline passes.
    set_quality(config, "good")
    fifth = pytester.runpytest("--ragev-config", "ragev.toml")
    assert fifth.ret == pytest.ExitCode.OK
    fifth.stdout.fnmatch_lines(["*recall*improved*"])


#: The oracle, and a pipeline that loses the gold passages but keeps the reference
#: answers (quality "lost").
CUT_CONFTEST = ORACLE_CONFTEST.replace(
    '    quality = settings.options.get("quality", "good")\n',
    '    quality = settings.options.get("quality", "good")\n'
    '    if quality == "lost":\n'
    '        return Answer(retrieved=[7, 6], text=case.answer)\n',
)


def test_a_baseline_that_keeps_the_start_of_each_answer(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    assert CUT_CONFTEST != ORACLE_CONFTEST
    config = make_project(BASELINE + 'answer_chars = 20\n[gate]\ncorrection = "none"\n',
                          conftest=CUT_CONFTEST)
    baseline = pytester.path / "ragev-baseline.json"
    assert pytester.runpytest("--ragev-config", "ragev.toml").ret == pytest.ExitCode.TESTS_FAILED
    created = baseline.read_bytes()
    snapshot = json.loads(created)
    assert snapshot["schema_version"] == 3
    first = snapshot["base"]["questions"][0]
    assert first["generated_text"] == "The Eiffel Tower was"
    assert first["answer_chars"] == len("The Eiffel Tower was completed in 1889.")
    assert len(first["answer_digest"]) == 16

    # Unchanged: compared and passed, the file left as it was.
    assert pytester.runpytest("--ragev-config", "ragev.toml").ret == pytest.ExitCode.OK
    assert baseline.read_bytes() == created

    # Retrieval lost, answers the same: the diff knows the answers did not change,
    # though the file keeps only their start.
    set_quality(config, "lost")
    lost = pytester.runpytest("--ragev-config", "ragev.toml", "-v", "--ragev-report", "r.json")
    assert lost.ret == pytest.ExitCode.TESTS_FAILED
    lost.stdout.fnmatch_lines(["*most regressed question*", "*retrieved*", "*answer    unchanged"])
    assert "→ 'The Eiffel Tower was" not in lost.stdout.str()
    worst = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))[
        "data"]["baseline"]["regressions"][0]
    assert worst["answer_changed"] is False
    assert worst["answer_before"] == "The Eiffel Tower was…"
    assert worst["answer_after"] == "The Eiffel Tower was completed in 1889."

    # Answers worse: shown from the kept start to the new answer.
    config.write_text(config.read_text(encoding="utf-8").replace('"lost"', '"bad"'),
                      encoding="utf-8")
    bad = pytester.runpytest("--ragev-config", "ragev.toml", "-v")
    assert bad.ret == pytest.ExitCode.TESTS_FAILED
    bad.stdout.fnmatch_lines(["*answer    'The Eiffel Tower was…' → 'I do not know.'"])
    assert baseline.read_bytes() == created


def test_an_edited_corpus_is_compared_and_reported_as_such(
    pytester: pytest.Pytester, make_project: Project, mini_data: dict[str, Any]
) -> None:
    make_project(BASELINE)
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    # Passage 7 is relevant to no question: every question is unchanged, the corpus is not.
    changed = {**mini_data["corpus"], 7: "Rust is a language that values memory safety."}
    write_dataset(pytester.path / "data", **dict(mini_data, corpus=changed))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-markdown", "r.md", "--ragev-html", "r.html")
    assert result.ret == pytest.ExitCode.OK
    line = ("ragev: warning: the corpus changed since the baseline (7 passages, texts edited): "
            "retrieval can move for every question, so the compared questions measure the "
            "corpus change as well as the pipeline's")
    result.stdout.fnmatch_lines([
        "ragev: base configuration against the baseline, 5 shared questions: no metric changed",
        line,
    ])
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["data"]["baseline"]["corpus_changed"] == {
        "passages_before": 7, "passages_after": 7,
    }
    # The Markdown and HTML reports say it too, among their notes.
    assert f"> {line}" in (pytester.path / "r.md").read_text(encoding="utf-8")
    page = html.unescape((pytester.path / "r.html").read_text(encoding="utf-8"))
    assert f"<li>{line}</li>" in page


def test_corrupt_baseline_is_not_compared_and_kept(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(BASELINE)
    baseline = pytester.path / "ragev-baseline.json"
    baseline.write_text("{not json", encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([f"ragev: gate not compared: baseline *{baseline.name} is not "
                                 "valid JSON*"])
    assert baseline.read_text(encoding="utf-8") == "{not json"


def test_tolerance_mode_per_metric(pytester: pytest.Pytester, make_project: Project) -> None:
    config = make_project(
        BASELINE
        + textwrap.dedent(
            """
            [gate]
            mode = "tolerance"
            max_drop = 1.0

            [gate.metrics.precision]
            max_drop = 0.1
            """
        )
    )
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    set_quality(config, "bad")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["ragev: precision 0.000 < baseline 0.833 *"])
    assert "ragev: recall 0.000 < baseline" not in result.stdout.str()


def test_bad_gate_table_is_a_usage_error(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project(BASELINE + '[gate]\nmode = "sometimes"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *[[]gate[]]*mode*"])


@pytest.mark.slow
def test_verdict_parity_under_xdist(pytester: pytest.Pytester, make_project: Project) -> None:
    config = make_project(UNCORRECTED)
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    set_quality(config, "bad")
    serial = pytester.runpytest("--ragev-config", "ragev.toml")
    parallel = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "-n", "2")
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED

    def failures(lines: list[str]) -> list[str]:
        return [line for line in lines if "< baseline" in line]

    assert failures(serial.stdout.lines) == failures(parallel.stdout.lines)
    assert failures(serial.stdout.lines)


VARIANTS = textwrap.dedent(
    """
    [[variants]]
    name = "bad"
    pipeline.quality = "bad"

    [[variants]]
    name = "two-knobs"
    pipeline.quality = "good"
    pipeline.extra = 1
    """
)


def test_variants_table_warning_and_kb_sharing(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        VARIANTS,
        conftest=textwrap.dedent(
            """
            import pytest
            from pytest_ragev import Answer

            @pytest.hookimpl
            def pytest_ragev_build_knowledge_base(corpus, settings):
                with open("kb-builds.txt", "a") as out:
                    out.write(f"{settings.variant}\\n")
                return {}

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                if settings.options.get("quality") == "bad":
                    return Answer(retrieved=[7], text="no")
                return Answer(retrieved=list(case.pids), text=case.answer)
            """
        ),
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    result.assert_outcomes(passed=16)
    result.stdout.fnmatch_lines(
        [
            "*variant 'two-knobs' changes 2 knobs (*extra, *quality)*",
            "*metric*(base)*bad*two-knobs",
            "*recall*1.000*0.000 −1.000*1.000 +0.000*",
        ]
    )
    # A conftest builder may read any knob: three distinct settings, three builds.
    assert (pytester.path / "kb-builds.txt").read_text().split() == ["None", "bad", "two-knobs"]


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, Any]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.mark.slow
def test_markdown_junit_and_html_reports(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_project(UNCORRECTED + '[thresholds]\nrecall = 0.5\n')
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    set_quality(config, "bad")
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--junitxml", "junit.xml", "--ragev-html", "r.html",
        "-n", "2",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    markdown = summary.read_text(encoding="utf-8")
    assert "recall" in markdown and "regressed" in markdown.lower()
    import xml.etree.ElementTree as ET

    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["ragev.verdict"] == "failed"
    assert props["ragev.recall"] == "0.000000"
    assert props["ragev.recall.baseline"] == "1.000000"
    assert props["ragev.recall.status"] == "regressed"
    parser = _Collector()
    parser.feed((pytester.path / "r.html").read_text(encoding="utf-8"))
    tags = [tag for tag, _ in parser.tags]
    assert "svg" in tags and "table" in tags
    assert not [attrs for tag, attrs in parser.tags if tag == "link"]
    assert all(not attrs for tag, attrs in parser.tags if tag == "script")  # inline only


def test_a_dataset_beside_the_config_folder_is_recorded_relative_to_it(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    """A dataset outside pytest's rootdir (``../data`` from ``eval/ragev.toml``): the
    baseline records the path relative to the config file, so rebaselining from another
    checkout keeps the settings hash."""
    make_project()
    checkouts = []
    for name in ("one", "two"):
        root = pytester.path / name
        (root / "eval").mkdir(parents=True)
        shutil.copytree(pytester.path / "data", root / "data")
        (root / "eval" / "ragev.toml").write_text(
            '[dataset]\npath = "../data"\nid = "mini"\n[pipeline]\nname = "oracle"\n'
            '[baseline]\npath = "base.json"\n', encoding="utf-8")
        shutil.copy(pytester.path / "conftest.py", root / "eval" / "conftest.py")
        checkouts.append(root)
    hashes = []
    for root in checkouts:
        result = pytester.runpytest("--rootdir", str(root / "eval"), "--ragev-config",
                                    str(root / "eval" / "ragev.toml"), "-p", "no:cacheprovider",
                                    "--ragev-update-baseline")
        assert result.ret == 0, result.stdout.str()[-3000:]
        baseline = json.loads((root / "eval" / "base.json").read_text(encoding="utf-8"))
        text = json.dumps(baseline)
        assert str(pytester.path) not in text
        assert '"path": "../data"' in text
        assert baseline["base"]["settings"]["dataset"]["path"] == "../data"
        hashes.append(baseline["base"]["settings_hash"])
    assert hashes[0] == hashes[1]
