"""Atomic file writes: a reader sees the old file or the new one, never a torn one."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    """The process umask, read without changing it where the OS allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    # Elsewhere the only way to read it is to set it (and put it back at once).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _target_mode(target: Path) -> int:
    """The existing file's permissions, else what ``open(path, "w")`` would give."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    The file gets the permissions it had, or those of a plainly created file for a
    new one (``mkstemp`` alone would leave every report readable by its owner only).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = _target_mode(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp_name, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        # Never leave the temporary file behind, whatever interrupted us.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(obj: Any) -> str:
    """The project's JSON style: ``ensure_ascii=False``, indent 2, trailing newline."""
    return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Serialise ``obj`` with :func:`dumps_json` and write it atomically."""
    atomic_write_text(path, dumps_json(obj))
