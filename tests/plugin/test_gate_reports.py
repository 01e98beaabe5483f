"""End to end: what a failing gate leaves behind (.obtained.json, Markdown, step summary).

Each test can only pass when the file is written with the right content: the step
summary keeps what earlier steps wrote, the Markdown report holds the red lines, the
obtained snapshot is exactly what ``--ragev-update-baseline`` would have written.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._oracle import set_quality
from tests._pytester import run_ragev

Project = Callable[..., Path]

# correction = "none": five questions, each metric must be able to fail on its own.
GATED = '[baseline]\npath = "ragev-baseline.json"\n\n[gate]\ncorrection = "none"\n'


def _degraded(pytester: pytest.Pytester, make_project: Project, extra: str = "") -> Path:
    config = make_project(GATED + extra)
    assert run_ragev(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    set_quality(config, "bad")
    return config


def test_step_summary_is_appended_to(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    _degraded(pytester, make_project)
    summary = pytester.path / "step-summary.md"
    summary.write_text("# an earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert run_ragev(pytester).ret == pytest.ExitCode.TESTS_FAILED
    assert run_ragev(pytester).ret == pytest.ExitCode.TESTS_FAILED
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# an earlier step\n## pytest-ragev: ❌ failed\n")
    assert text.count("## pytest-ragev: ❌ failed") == 2  # one per step, none overwritten
    assert "`ragev: recall 0.000 < baseline 1.000 (Δ −1.000" in text


def test_markdown_report_is_written_where_asked(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    _degraded(pytester, make_project)
    result = run_ragev(pytester, "--ragev-markdown", "out/ragev.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = (pytester.path / "out" / "ragev.md").read_text(encoding="utf-8")
    assert text.startswith("## pytest-ragev: ❌ failed\n")
    assert "- `ragev: recall 0.000 < baseline 1.000 (Δ −1.000, 90% CI" in text
    assert "### Most regressed questions (5)" in text
    # The failing run's answers are listed next to the recorded ones.
    assert "I do not know." in text


def test_markdown_file_and_step_summary_are_both_written(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    _degraded(pytester, make_project)
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert run_ragev(pytester, "--ragev-markdown", "ragev.md").ret == pytest.ExitCode.TESTS_FAILED
    written = (pytester.path / "ragev.md").read_text(encoding="utf-8")
    assert written.startswith("## pytest-ragev: ❌ failed\n")
    assert summary.read_text(encoding="utf-8") == written + "\n"


def test_interrupted_run_says_why_in_the_markdown(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    make_project(conftest=textwrap.dedent(
        """
        import os, signal, time
        import pytest
        from pytest_ragev import Answer

        @pytest.hookimpl
        def pytest_ragev_answer(case, kb, settings):
            if case.qid == 3:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler interrupts this at once
            return Answer(retrieved=list(case.pids), text=case.answer)
        """
    ))
    result = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--ragev-concurrency", "1", "--ragev-markdown", "ragev.md"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    text = (pytester.path / "ragev.md").read_text(encoding="utf-8")
    assert text.startswith("## pytest-ragev: ❌ failed\n")
    assert "ragev: run interrupted by SIGTERM: 2 of 5 questions answered" in text


def test_obtained_snapshot_is_the_runs_snapshot_and_removed_once_passing(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = _degraded(pytester, make_project)
    baseline = pytester.path / "ragev-baseline.json"
    obtained = pytester.path / "ragev-baseline.obtained.json"
    recorded = baseline.read_bytes()

    failed = run_ragev(pytester)
    assert failed.ret == pytest.ExitCode.TESTS_FAILED
    failed.stdout.fnmatch_lines([f"ragev: this run's snapshot written to {obtained.name}*"])
    written = obtained.read_bytes()
    data = json.loads(written)
    assert {q["generated_text"] for q in data["base"]["questions"]} == {"I do not know."}
    assert data["base"]["metrics"]["recall"] == {"mean": 0.0, "n": 5, "direction": "higher"}

    # Back to the recorded pipeline: the comparison passes and the stale file goes.
    set_quality(config, "good")
    passed = run_ragev(pytester)
    assert passed.ret == pytest.ExitCode.OK
    passed.stdout.fnmatch_lines([f"ragev: removed the stale {obtained.name} (this run passed)"])
    assert not obtained.exists()
    assert baseline.read_bytes() == recorded

    # Accepting the degraded pipeline writes byte for byte what the failing run left.
    set_quality(config, "bad")
    assert run_ragev(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    assert baseline.read_bytes() == written


@pytest.mark.parametrize(
    ("tables", "listed"),
    [
        ("", 5),
        ("[report]\ntop_regressions = 2\n", 2),
        ("[report]\ntop_regressions = 2\n[gate]\ntop_regressions = 3\n", 3),
    ],
)
def test_top_regressions_from_report_table_then_gate_table(
    pytester: pytest.Pytester, make_project: Project, tables: str, listed: int
) -> None:
    config = make_project('[baseline]\npath = "ragev-baseline.json"\n' + tables)
    run_ragev(pytester, "--ragev-update-baseline")
    set_quality(config, "bad")
    result = run_ragev(pytester, "--ragev-report", "r.json", "-v")
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert len(report["data"]["baseline"]["regressions"]) == listed
    result.stdout.fnmatch_lines([f"ragev: {listed} most regressed question(s)*"])
