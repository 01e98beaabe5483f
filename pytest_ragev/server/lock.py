"""One server per workspace: the lock the running server holds.

The server holds an exclusive ``flock`` on ``<workspace>/ragev-server.lock`` for as long
as it runs; the file names the holder (pid and URL) for the message a second server
gets. The kernel drops the lock when the process ends, ``kill -9`` included, so a file
left behind never blocks a start. The descriptor is not inherited: the evaluations a
server starts (which may outlive it) never hold its lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from pathlib import Path

from pytest_ragev.core.errors import ConfigError

_held: dict[Path, int] = {}
_guard = threading.Lock()


class WorkspaceBusy(ConfigError):
    """Another server holds the workspace's lock."""


def hold(path: Path, *, url: str, option: str = "--workspace") -> None:
    """Take the lock at ``path`` for this process (a second call is a no-op).

    :class:`WorkspaceBusy` when another process holds it, :class:`ConfigError` when the
    file cannot be made (a read-only or missing workspace), each one line with the fix.
    """
    path = Path(path).resolve()
    with _guard:
        if path in _held:
            return
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(
                f"{option} {path.parent}: cannot create {path.name} there "
                f"({exc.strerror or exc}); make the folder writable (the server keeps its "
                f"database and task folders there) or pass another {option}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise WorkspaceBusy(
                f"{option} {path.parent}: another ragev serve ({holder}) uses this "
                f"workspace; stop it, or pass another {option}"
            ) from None
        with contextlib.suppress(OSError):  # the note is for people; the lock is the flock
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "url": url}).encode(), 0)
        _held[path] = fd


def release(path: Path) -> None:
    """Let go of the lock at ``path`` (at shutdown; the process's end does it too)."""
    path = Path(path).resolve()
    with _guard:
        fd = _held.pop(path, None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(data['pid'])}, {data['url']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its pid unknown"
