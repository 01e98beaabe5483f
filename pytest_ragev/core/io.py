"""Atomic file writes: a reader sees the old file or the new one, never a torn one."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
from collections.abc import Collection
from pathlib import Path
from typing import Any

#: Flags of the temporary file: new (never an existing file or link), written in binary.
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _existing_mode(target: Path) -> int | None:
    """The permissions of the file at ``target``, or ``None`` when there is none."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return None


def _create_temp(target: Path) -> tuple[int, Path]:
    """A new file beside ``target``, open for writing, created as ``open(path, "w")`` would.

    Mode ``0o666`` less the umask, which the OS applies itself (``mkstemp`` would give
    ``0o600``, and reading the umask means setting it, process-wide).
    """
    while True:
        temp = target.parent / f".{target.name}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(temp, _TEMP_FLAGS, 0o666), temp
        except FileExistsError:
            continue


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes | memoryview) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    ``data`` may be a ``memoryview`` (of a numpy array, say), written without a copy.

    The file keeps the permissions it had; a new one gets those of a plainly created file.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = _create_temp(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            mode = _existing_mode(target)
            if mode is not None:
                os.chmod(temp, mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        # Never leave the temporary file behind, whatever interrupted us.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(obj: Any, *, records: Collection[str] = ()) -> str:
    """The project's JSON style: ``ensure_ascii=False``, indent 2, trailing newline.

    A list of objects under a key in ``records`` (a baseline's ``questions``, a report's
    ``samples``) is written one compact object per line instead: ``git diff`` still
    shows one changed question as one changed line, the file is about half the size,
    and the lines come from the C encoder (``indent`` makes :mod:`json` fall back to its
    pure-Python encoder, about ten times slower). The text parses to the same value.
    """
    lists: list[list[Any]] = []
    # The placeholder string written where a record list goes: a random tag between
    # NULs, so no string of the data can look like one.
    tag = secrets.token_hex(8)

    def slot(value: Any, key: str | None) -> Any:
        if isinstance(value, dict):
            return {k: slot(v, k) for k, v in value.items()}
        if isinstance(value, list | tuple):
            if key in records and value and all(isinstance(v, dict) for v in value):
                lists.append(list(value))
                return f"\0{tag}{len(lists) - 1}\0"
            return [slot(v, None) for v in value]
        return value

    text = json.dumps(slot(obj, None) if records else obj, ensure_ascii=False, indent=2)
    if lists:
        compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

        def fill(match: re.Match[str]) -> str:
            indent, key, index, comma = match.groups()
            inner = indent + "  "
            body = (",\n" + inner).join(compact(v) for v in lists[int(index)])
            return f"{indent}{key or ''}[\n{inner}{body}\n{indent}]{comma}"

        slots = re.compile(rf'^( *)("[^"\n]*": )?"\\u0000{tag}(\d+)\\u0000"(,?)$',
                           re.MULTILINE)
        text = slots.sub(fill, text)
    return text + "\n"


def atomic_write_json(
    path: str | os.PathLike[str], obj: Any, *, records: Collection[str] = ()
) -> None:
    """Serialise ``obj`` with :func:`dumps_json` and write it atomically."""
    atomic_write_text(path, dumps_json(obj, records=records))
