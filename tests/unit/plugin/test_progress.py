"""ProgressFile: the running report on disk, its interval and its status transitions, and
the failure report on a full disk (#16 item 8).

On a full disk the atomic write of the final (or the status-3) report fails, as it needs
room for a second copy, and the pending report used to stay: a poller waited forever.
Now this run's stale report is rewritten in place with the failure report, else removed,
and a file this run did not leave is never touched.
"""

from __future__ import annotations

import errno
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


def _report(status: int, err_msg: str) -> dict[str, Any]:
    return {"success": status != STATUS_FAILED,
            "data": {"task": {"status": status, "err_msg": err_msg}, "metric": None}}


def _status(path: Path) -> int:
    status: int = json.loads(path.read_text(encoding="utf-8"))["data"]["task"]["status"]
    return status


def _no_space(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def pending(tmp_path: Path) -> ProgressFile:
    """A progress file that wrote this run's pending report."""
    progress = ProgressFile(tmp_path / "r.json", interval=5.0, report=_report)
    assert progress.write(STATUS_PENDING)
    return progress


def test_a_full_disk_rewrites_the_pending_report_in_place(
    pending: ProgressFile, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "replace", _no_space)  # the atomic write's rename: no room
    assert not pending.write(STATUS_FAILED, "Festplatte voll")
    assert pending.path is not None and _status(pending.path) == STATUS_FAILED
    assert pending.stale == ("this run's pending report there was rewritten in place as a "
                             "failure report")
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"ragev: warning: could not write the failure report (status 3) to "
                    f"{pending.path}: No space left on device; {pending.stale}")
    assert [p.name for p in pending.path.parent.iterdir()] == ["r.json"]  # no temp file


def test_a_running_report_is_named_so(pending: ProgressFile,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert pending.write(STATUS_RUNNING)
    monkeypatch.setattr(os, "replace", _no_space)
    assert not pending.write(STATUS_FAILED, "disk full", quiet=True)
    assert pending.stale is not None and pending.stale.startswith("this run's running report")


def test_no_room_even_in_place_removes_the_stale_report(
    pending: ProgressFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "replace", _no_space)
    monkeypatch.setattr(progress, "rewrite_in_place", _no_space)
    assert not pending.write(STATUS_FAILED, "disk full", quiet=True)
    assert pending.path is not None and not pending.path.exists()
    assert pending.stale == "this run's pending report there was removed (no poller waits on it)"


def test_a_report_that_can_be_neither_rewritten_nor_removed_says_so(
    pending: ProgressFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "replace", _no_space)
    monkeypatch.setattr(progress, "rewrite_in_place", _no_space)
    monkeypatch.setattr(os, "unlink", lambda path: _no_space())
    assert not pending.write(STATUS_FAILED, "disk full", quiet=True)
    assert pending.path is not None and _status(pending.path) == STATUS_PENDING
    assert pending.stale == ("this run's pending report there could be neither rewritten nor "
                             "removed (No space left on device): delete it, or a poller waits "
                             "on it")


def test_a_file_this_run_did_not_leave_is_never_touched(
    tmp_path: Path, pending: ProgressFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pending.path is not None
    # Someone wrote the file since (another run, a user): it is not this run's to replace.
    pending.path.write_text('{"von": "einem anderen Lauf"}\n', encoding="utf-8")
    monkeypatch.setattr(os, "replace", _no_space)
    assert not pending.write(STATUS_FAILED, "disk full", quiet=True)
    assert pending.stale is None
    assert pending.path.read_text(encoding="utf-8") == '{"von": "einem anderen Lauf"}\n'
    # A run that never wrote a pending report (the previous run's final report is there).
    previous = tmp_path / "previous.json"
    previous.write_text('{"final": true}\n', encoding="utf-8")
    fresh = ProgressFile(previous, interval=5.0, report=_report)
    assert not fresh.write(STATUS_FAILED, "disk full", quiet=True)
    assert fresh.stale is None and previous.read_text(encoding="utf-8") == '{"final": true}\n'


class ShapedReports(Reports):
    """Reports in the JSON report's shape (``data.task.status``), where the phase goes."""

    def __call__(self, status: int, err_msg: str) -> dict[str, Any]:
        self.made += 1
        return {"success": status != STATUS_FAILED,
                "data": {"task": {"status": status, "err_msg": err_msg}, "n": self.made}}


def test_the_running_report_names_the_phase(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "report.json"
    reports = ShapedReports()
    run = ProgressFile(path, interval=2.0, report=reports)
    run.write(STATUS_PENDING)
    assert read(path)["data"]["phase"] == {"name": "loading"}
    run.write(STATUS_RUNNING)
    assert read(path)["data"]["phase"] == {"name": "answering"}
    # A new phase is written at once; its counts only once per interval.
    run.phase("building_kb", 0, 400)
    assert read(path)["data"]["phase"] == {"name": "building_kb", "done": 0, "total": 400}
    run.phase("building_kb", 120, 400)
    assert read(path)["data"]["phase"]["done"] == 0 and reports.made == 3
    clock.now += 2.0
    run.phase("building_kb", 240, 400)
    assert read(path)["data"]["phase"] == {"name": "building_kb", "done": 240, "total": 400}
    run.phase(None)  # built: answering again, said at once
    assert read(path)["data"]["phase"] == {"name": "answering"} and reports.made == 5


def test_end_phases_rewrite_the_last_running_report_after_stop(tmp_path: Path,
                                                               clock: Clock) -> None:
    path = tmp_path / "report.json"
    reports = ShapedReports()
    run = ProgressFile(path, interval=2.0, report=reports)
    run.write(STATUS_PENDING)
    run.end_phase("scoring")  # no running report yet: a pending one says nothing of it
    assert read(path)["data"]["phase"] == {"name": "loading"}
    run.write(STATUS_RUNNING)
    run.stop()
    for name in ("scoring", "gating", "writing_reports"):
        run.end_phase(name)
        data = read(path)["data"]
        assert data["phase"] == {"name": name} and data["task"]["status"] == STATUS_RUNNING
    assert reports.made == 2  # the report is not built again, only its phase changes
    run.phase("building_kb", 1, 2)  # after stop: no running report any more
    assert read(path)["data"]["phase"] == {"name": "writing_reports"}
    assert run.write(STATUS_FAILED, "interrupted")
    assert "phase" not in read(path)["data"]
