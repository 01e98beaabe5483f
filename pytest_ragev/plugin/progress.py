"""The JSON report while a run goes: status 0 (pending), 1 (running), 3 (failed early).

The seed's clients poll the report file for ``finished/total``; :class:`ProgressFile`
rewrites it atomically, at most every ``[run] progress_interval`` seconds.
:class:`XdistProgress` tells the controller which questions the xdist workers collected.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_ragev.core.io import WRITE_ERRORS, is_stream, write_error_cause, write_output_json
from pytest_ragev.core.types import STATUS_FAILED, STATUS_RUNNING
from pytest_ragev.plugin.collect import NodeIds

#: Builds the report dict for a status and an error message.
ProgressReport = Callable[[int, str], dict[str, Any]]


class ProgressFile:
    """Writes the progress report to ``path`` (nothing when ``path`` is ``None``)."""

    def __init__(self, path: Path | None, *, interval: float, report: ProgressReport) -> None:
        self.path = path
        self._interval = interval
        self._report = report
        self._last_write = 0.0
        self._stopped = False
        self._warned = False

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
        """
        if self.path is None or (status == STATUS_RUNNING and self._stopped):
            return False
        if status != STATUS_FAILED and is_stream(self.path):
            return False
        self._last_write = time.monotonic()
        try:
            write_output_json(self.path, self._report(status, err_msg))
        except WRITE_ERRORS as exc:
            if not quiet and not self._warned:
                self._warned = True  # every few seconds the same line would bury the output
                cause = write_error_cause(exc)[0]
                sys.stderr.write(f"ragev: warning: could not write the running report to "
                                 f"{self.path}: {cause}; the run goes on\n")
            return False
        return True

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
