"""The JSON report while a run goes: status 0 (pending), 1 (running), 3 (failed early).

The seed's clients poll the report file for ``finished/total``; :class:`ProgressFile`
rewrites it atomically, at most every ``[run] progress_interval`` seconds. The report
also says what the run does (``data.phase``: loading, building the knowledge base n/N,
answering, scoring, gating, writing the reports), so a poller can tell a long
knowledge-base build from a stuck run. :class:`XdistProgress` tells the controller which
questions the xdist workers collected.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_ragev.core.io import (
    WRITE_ERRORS,
    dumps_json,
    is_stream,
    rewrite_in_place,
    write_error_cause,
    write_output_json,
)
from pytest_ragev.core.types import STATUS_FAILED, STATUS_PENDING, STATUS_RUNNING
from pytest_ragev.plugin.collect import NodeIds

#: Builds the report dict for a status and an error message.
ProgressReport = Callable[[int, str], dict[str, Any]]
#: The phases a running report names in ``data.phase.name``, in the order a run goes.
PHASES = ("loading", "building_kb", "answering", "scoring", "gating", "writing_reports")


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    """What tells one version of a regular file from another (``None``: no such file)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


class ProgressFile:
    """Writes the progress report to ``path`` (nothing when ``path`` is ``None``)."""

    def __init__(self, path: Path | None, *, interval: float, report: ProgressReport) -> None:
        self.path = path
        self._interval = interval
        self._report = report
        self._last_write = 0.0
        self._stopped = False
        self._warned = False
        #: The file this run's last pending or running report left, and its status:
        #: only that file may be rewritten in place or removed (never a file of another
        #: run, or one someone wrote since).
        self._own: tuple[tuple[int, int, int, int], int] | None = None
        #: What became of that report when a failure report could not replace it (one
        #: clause for the error line), else ``None``.
        self.stale: str | None = None
        #: What the run does now (``data.phase`` of the running report); ``None``: answering.
        self._phase: dict[str, Any] | None = None
        #: The last pending or running report written (the end phases rewrite it).
        self._last: dict[str, Any] | None = None
        # The knowledge base may report its build from another thread than the items'.
        self._lock = threading.Lock()

    def stop(self) -> None:
        """No more status-1 writes: the run is being concluded (the final report follows)."""
        self._stopped = True

    def write(self, status: int, err_msg: str = "", *, quiet: bool = False) -> bool:
        """Write the report now; whether it was written. Progress is best effort: a
        failure warns once (not with ``quiet``), and the final write reports its own.

        Once :meth:`stop` was called, "running" is never written again (the verdict's own
        test report must not turn a finished report back into a running one). A stream
        (``/dev/stdout``, a pipe) gets no progress, only the run's last report: a reader
        of a stream cannot poll it, and would get one JSON document after another.

        A failure report (status 3) that cannot be written atomically (a full disk has
        no room for the second copy) must not leave this run's pending or running report
        behind, on which a poller would wait forever: that file is rewritten in place
        with the failure report, or, failing that, removed; :attr:`stale` says which.
        """
        if self.path is None or (status == STATUS_RUNNING and self._stopped):
            return False
        if status != STATUS_FAILED and is_stream(self.path):
            return False
        self._last_write = time.monotonic()
        report = self._report(status, err_msg)
        if status != STATUS_FAILED:
            report = self._with_phase(report, status)
        return self._put(report, status, quiet=quiet)

    def _with_phase(self, report: dict[str, Any], status: int) -> dict[str, Any]:
        data = report.get("data")
        if not isinstance(data, dict):
            return report
        if status == STATUS_PENDING:
            phase: dict[str, Any] = {"name": "loading"}
        else:
            phase = self._phase or {"name": "answering"}
        return {**report, "data": {**data, "phase": phase}}

    def _put(self, report: dict[str, Any], status: int, *, quiet: bool) -> bool:
        assert self.path is not None
        with self._lock:
            try:
                write_output_json(self.path, report)
            except WRITE_ERRORS as exc:
                cause = write_error_cause(exc)[0]
                if status == STATUS_FAILED:
                    self.stale = self._replace_stale(report)
                    if not quiet:
                        after = f"; {self.stale}" if self.stale else ""
                        sys.stderr.write(f"ragev: warning: could not write the failure report "
                                         f"(status 3) to {self.path}: {cause}{after}\n")
                elif not quiet and not self._warned:
                    self._warned = True  # every few seconds the same line would bury the output
                    sys.stderr.write(f"ragev: warning: could not write the running report to "
                                     f"{self.path}: {cause}; the run goes on\n")
                return False
            found = _identity(self.path)
            self._own = None if found is None or status == STATUS_FAILED else (found, status)
            self._last = None if status == STATUS_FAILED else report
            return True

    def phase(self, name: str | None, done: int | None = None, total: int | None = None) -> None:
        """What the run does now, e.g. ``phase("building_kb", 120, 400)`` (chunks); ``None``:
        answering. The running report says it at once when the phase changes, else at most
        once per interval (a count that moves is no reason to rewrite the file more often)."""
        shown = None if name is None else (
            {"name": name} if total is None else {"name": name, "done": done, "total": total})
        if shown == self._phase:
            return
        renamed = (shown or {}).get("name") != (self._phase or {}).get("name")
        self._phase = shown
        if renamed or time.monotonic() - self._last_write >= self._interval:
            self.write(STATUS_RUNNING, quiet=True)

    def end_phase(self, name: str) -> None:
        """A phase of the end of the run (``scoring``, ``gating``, ``writing_reports``):
        the last running report again, naming it, also after :meth:`stop` (the final
        report replaces it). Nothing when no running report was written: such a run is
        short, and a pending report must not say the run is scoring."""
        last = self._last
        if self.path is None or last is None or is_stream(self.path):
            return
        data = last.get("data")
        if not isinstance(data, dict):
            return
        task = data.get("task")
        if not isinstance(task, dict) or task.get("status") != STATUS_RUNNING:
            return
        self._phase = {"name": name}
        self._put({**last, "data": {**data, "phase": self._phase}}, STATUS_RUNNING, quiet=True)

    def _replace_stale(self, report: dict[str, Any]) -> str | None:
        """Rewrite this run's pending or running report in place with ``report``, else
        remove it; what became of it, or ``None`` when the file is not this run's."""
        assert self.path is not None
        if self._own is None or _identity(self.path) != self._own[0]:
            return None
        was = "pending" if self._own[1] == STATUS_PENDING else "running"
        self._own = None
        try:
            rewrite_in_place(self.path, dumps_json(report))
        except WRITE_ERRORS:
            pass
        else:
            return f"this run's {was} report there was rewritten in place as a failure report"
        try:
            os.unlink(self.path)
        except OSError as exc:
            return (f"this run's {was} report there could be neither rewritten nor removed "
                    f"({write_error_cause(exc)[0]}): delete it, or a poller waits on it")
        return f"this run's {was} report there was removed (no poller waits on it)"

    def maybe_write(self) -> None:
        """Write a status-1 report if the interval has passed since the last write."""
        if time.monotonic() - self._last_write >= self._interval:
            self.write(STATUS_RUNNING)


class XdistProgress:
    """Tells the controller which questions the workers collected, for ``finished/total``.

    The xdist controller collects nothing itself: the node ids a worker reports are all
    it learns about the run before the first result arrives. Registered only when
    pytest-xdist is installed (its hook does not exist otherwise).
    """

    def __init__(
        self, node_ids: Callable[[], NodeIds],
        set_collected: Callable[[Sequence[tuple[str, Any]]], None],
    ) -> None:
        self._node_ids = node_ids
        self._set_collected = set_collected
        self._counted = False

    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        # Every worker collects the identical list; count it once.
        if self._counted:
            return
        self._counted = True
        node_ids = self._node_ids()
        self._set_collected([(nodeid, node_ids.question(nodeid)) for nodeid in ids])
