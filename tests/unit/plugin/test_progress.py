"""ProgressFile: the running report on disk, its interval and its status transitions."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core.types import STATUS_FAILED, STATUS_PENDING, STATUS_RUNNING
from pytest_ragev.plugin import progress
from pytest_ragev.plugin.progress import ProgressFile


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(progress.time, "monotonic", fake)
    return fake


class Reports:
    """The report builder: counts its calls, numbers each report it makes."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self, status: int, err_msg: str) -> dict[str, Any]:
        self.made += 1
        return {"status": status, "err_msg": err_msg, "n": self.made,
                "task": "检索评测 / Auswertung"}


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_status_goes_pending_running_failed_and_stop_ends_running(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "report.json"
    reports = Reports()
    running = ProgressFile(path, interval=2.0, report=reports)
    assert running.write(STATUS_PENDING)
    assert read(path)["status"] == STATUS_PENDING
    assert read(path)["task"] == "检索评测 / Auswertung"  # UTF-8, as written
    assert running.write(STATUS_RUNNING)
    assert read(path)["status"] == STATUS_RUNNING
    running.stop()
    # The verdict's own test report must not turn a concluded report back into running.
    assert not running.write(STATUS_RUNNING)
    clock.now += 60
    running.maybe_write()
    assert read(path)["status"] == STATUS_RUNNING and reports.made == 2
    assert running.write(STATUS_FAILED, "interrupted")
    assert read(path) == {"status": STATUS_FAILED, "err_msg": "interrupted", "n": 3,
                          "task": "检索评测 / Auswertung"}


def test_running_reports_are_written_at_most_once_per_interval(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "report.json"
    reports = Reports()
    running = ProgressFile(path, interval=2.0, report=reports)
    running.write(STATUS_RUNNING)
    assert read(path)["n"] == 1
    clock.now += 1.9
    running.maybe_write()
    assert read(path)["n"] == 1 and reports.made == 1
    clock.now += 0.1
    running.maybe_write()
    assert read(path) == {"status": STATUS_RUNNING, "err_msg": "", "n": 2,
                          "task": "检索评测 / Auswertung"}
    running.maybe_write()  # the interval starts again at each write
    assert reports.made == 2


def test_no_path_writes_nothing(clock: Clock) -> None:
    reports = Reports()
    silent = ProgressFile(None, interval=0.5, report=reports)
    assert not silent.write(STATUS_PENDING)
    clock.now += 10
    silent.maybe_write()
    assert reports.made == 0


def test_a_stream_gets_no_progress_only_a_failure(clock: Clock) -> None:
    reports = Reports()
    stream = ProgressFile(Path(os.devnull), interval=0.5, report=reports)
    assert not stream.write(STATUS_PENDING) and not stream.write(STATUS_RUNNING)
    assert reports.made == 0
    assert stream.write(STATUS_FAILED, "crashed")
    assert reports.made == 1


def test_a_failed_write_warns_once_and_the_run_goes_on(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "report.json"
    taken.mkdir()  # a folder where the report should go
    running = ProgressFile(taken, interval=0.5, report=Reports())
    assert not running.write(STATUS_PENDING)
    clock.now += 1
    running.maybe_write()
    assert not running.write(STATUS_FAILED, "x", quiet=True)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ragev: warning: could not write the running report to {taken}")
    assert lines[0].endswith("the run goes on")
