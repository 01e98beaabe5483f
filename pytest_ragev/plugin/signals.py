"""SIGTERM (``timeout``, ``docker stop``, a CI cancel) ends a run as Ctrl-C does: status 3."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any


class SigtermGuard:
    """Turns SIGTERM into ``KeyboardInterrupt`` while the run goes, and holds it while the
    reports are written (then lets it take effect)."""

    def __init__(self) -> None:
        self.terminated_by: str | None = None
        self._old: Any = None
        self._installed = False
        self._deferred = False

    def install(self) -> None:
        """Install the handler (main thread only; a no-op where SIGTERM cannot be caught)."""
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._old = signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError, AttributeError):  # no SIGTERM, or not allowed here
            return
        self._installed = True

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.terminated_by = signal.Signals(signum).name
        raise KeyboardInterrupt

    def _defer(self, signum: int, frame: FrameType | None) -> None:
        self._deferred = True

    def hold(self) -> None:
        """From now on a SIGTERM waits until :meth:`restore` (the reports get written)."""
        if self._installed:
            signal.signal(signal.SIGTERM, self._defer)

    def restore(self) -> None:
        """Put the previous handler back, then deliver a SIGTERM that arrived meanwhile."""
        if not self._installed:
            return
        self._installed = False
        # None: a handler installed from C, which Python cannot put back; default then.
        previous = signal.SIG_DFL if self._old is None else self._old
        signal.signal(signal.SIGTERM, previous)
        if self._deferred:
            self._deferred = False
            os.kill(os.getpid(), signal.SIGTERM)
