"""The progress report of plugin.progress: a failure report on a full disk (#16 item 8).

The status-0 report is written when the run starts; on a full disk the atomic write of
the final (or the status-3) report fails, as it needs room for a second copy, and the
pending report used to stay: a poller waited forever. Now this run's stale report is
rewritten in place with the failure report, else removed, and a file this run did not
leave is never touched.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core.types import STATUS_FAILED, STATUS_PENDING, STATUS_RUNNING
from pytest_ragev.plugin import progress as progress_module
from pytest_ragev.plugin.progress import ProgressFile


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
    monkeypatch.setattr(progress_module, "rewrite_in_place", _no_space)
    assert not pending.write(STATUS_FAILED, "disk full", quiet=True)
    assert pending.path is not None and not pending.path.exists()
    assert pending.stale == "this run's pending report there was removed (no poller waits on it)"


def test_a_report_that_can_be_neither_rewritten_nor_removed_says_so(
    pending: ProgressFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "replace", _no_space)
    monkeypatch.setattr(progress_module, "rewrite_in_place", _no_space)
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
