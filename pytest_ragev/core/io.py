"""File writes: atomic for files (a reader sees the old file or the new one, never a torn
one), straight through for streams (``/dev/stdout``, a pipe or FIFO, ``/dev/null``)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Collection, Iterable, Iterator
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


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes | memoryview | Iterable[bytes | memoryview]
) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    ``data`` may be a ``memoryview`` (of a numpy array, say), written without a copy, or
    an iterable of byte blocks (``bytes`` or ``memoryview``), written as they come (a
    large document is then never whole in memory; an exception from the iterable leaves
    the old file as it was).

    The file keeps the permissions it had; a new one gets those of a plainly created file.
    Only a file is ever replaced: a device, a FIFO or a socket at ``path`` raises
    ``OSError`` (a rename over ``/dev/null`` would put a file in its place; such a
    target is written through by :func:`write_output`, or refused).
    """
    target = Path(path)
    try:
        info: os.stat_result | None = os.stat(target)
    except OSError:
        info = None  # a new file (or one the write below fails on, naming it)
    if info is not None and (not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode))
                             or _standard_stream(info) is not None):
        raise OSError(errno.EINVAL, "not a file (a device, FIFO, socket or this process's "
                      "output stream); write to a file path instead", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = _create_temp(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            mode = _existing_mode(target)
            if mode is not None:
                os.chmod(temp, mode)
            if isinstance(data, bytes | bytearray | memoryview):
                handle.write(data)
            else:
                for block in data:
                    handle.write(block)
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

    Strict JSON: a NaN or an infinity raises ``ValueError`` instead of being written as
    the bare ``NaN``/``Infinity`` that JSON parsers other than Python's refuse.

    A list of objects under a key in ``records`` (a baseline's ``questions``, a report's
    ``samples``) is written one compact object per line instead: ``git diff`` still
    shows one changed question as one changed line, the file is about half the size,
    and the lines come from the C encoder (``indent`` makes :mod:`json` fall back to its
    pure-Python encoder, about ten times slower). The text parses to the same value.
    """
    return "".join(iter_json(obj, records=records))


def iter_json(obj: Any, *, records: Collection[str] = ()) -> Iterator[str]:
    """:func:`dumps_json` in pieces, in order: ``"".join`` of them is its text.

    The pieces of a record list are its lines, made as they are asked for: a writer
    that writes them as they come never holds the whole text (some 100 MB for a
    100,000-question report, and as much again for its bytes).
    """
    lists: list[list[Any]] = []
    # The placeholder string written where a record list goes: a random tag between
    # NULs, so no string of the data can look like one.
    tag = secrets.token_hex(8)
    skeleton = json.dumps(_slotted(obj, None, records, lists, tag) if records else obj,
                          ensure_ascii=False, indent=2, allow_nan=False)
    if not lists:
        yield skeleton + "\n"
        return
    # No circular check per record: a record is plain data (Answer.meta was copied into
    # plain types when the record was made, where a cycle fails), and the check's set of
    # every container's id is a sixth of encoding 100,000 records.
    compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                               allow_nan=False, check_circular=False).encode
    slots = re.compile(rf'^( *)("[^"\n]*": )?"\\u0000{tag}(\d+)\\u0000"(,?)$', re.MULTILINE)
    position = 0
    for match in slots.finditer(skeleton):
        indent, key, index, comma = match.groups()
        inner = indent + "  "
        yield skeleton[position:match.start()] + f"{indent}{key or ''}[\n{inner}"
        separator = ",\n" + inner
        for number, value in enumerate(lists[int(index)]):
            yield (separator + compact(value)) if number else compact(value)
        yield f"\n{indent}]{comma}"
        position = match.end()
    yield skeleton[position:] + "\n"


def encoded_blocks(pieces: Iterable[str], size: int = 1 << 20) -> Iterator[bytes]:
    """``pieces`` as UTF-8 byte blocks of about ``size`` bytes (fewer, larger writes)."""
    batch: list[str] = []
    length = 0
    for piece in pieces:
        batch.append(piece)
        length += len(piece)
        if length >= size:
            yield "".join(batch).encode("utf-8")
            batch.clear()
            length = 0
    if batch:
        yield "".join(batch).encode("utf-8")


def _slotted(value: Any, key: str | None, records: Collection[str], lists: list[list[Any]],
             tag: str) -> Any:
    """``value`` with each record list (see :func:`dumps_json`) moved to ``lists`` and a
    placeholder string in its place."""
    # A module function, not a closure: a closure that calls itself is a reference
    # cycle, which kept ``lists`` (every record of a baseline or report) alive until the
    # next collection, and the end of a run pauses the collector.
    if isinstance(value, dict):
        return {k: _slotted(v, k, records, lists, tag) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if key in records and value and all(isinstance(v, dict) for v in value):
            lists.append(list(value))
            return f"\0{tag}{len(lists) - 1}\0"
        return [_slotted(v, None, records, lists, tag) for v in value]
    return value


#: What a failed write of JSON may raise: the file system's OSError, or the content's
#: ValueError (a NaN, an infinity, a cycle) and TypeError (a value JSON has no form for).
WRITE_ERRORS = (OSError, ValueError, TypeError)


def write_error_cause(exc: BaseException) -> tuple[str, bool]:
    """Why a write failed, in words, and whether the content (not the disk) was at fault."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc), False
    if "Out of range float" in str(exc):
        return "it holds a NaN or an infinity, which strict JSON has no form for", True
    return f"it is not JSON ({exc})", True


#: The fix for a write the file system refused, by its errno; ``{elsewhere}`` is the
#: caller's way of choosing another path.
_DISK_FIXES = {
    errno.EISDIR: "the path is a folder: name a file, such as one inside it",
    errno.ENXIO: "no process reads the FIFO: start its reader first, or {elsewhere}",
    errno.ENOSPC: "free space on that disk, or {elsewhere}",
    errno.EDQUOT: "free space within your disk quota, or {elsewhere}",
    errno.EACCES: "make the folder and the file writable, or {elsewhere}",
    errno.EPERM: "make the folder and the file writable, or {elsewhere}",
    errno.EROFS: "the disk is read-only: {elsewhere}",
    errno.ENOTDIR: "a file stands where a folder of the path must be: move it, or {elsewhere}",
    # What creating the folders of a path raises when a file has one's name.
    errno.EEXIST: "a file stands where a folder of the path must be: move it, or {elsewhere}",
    errno.ENAMETOOLONG: "the path is too long: {elsewhere}",
    errno.EINVAL: "name a regular file: {elsewhere}",
}


def write_error_fix(exc: BaseException, *, elsewhere: str = "choose another path") -> str:
    """The fix for a write the file system refused, matching the cause: a folder at the
    path is not fixed by freeing space, nor a FIFO without a reader by a writable folder.
    ``elsewhere`` says how the caller chooses another path."""
    code = exc.errno if isinstance(exc, OSError) else None
    fix = _DISK_FIXES.get(code) if code is not None else None
    if fix is None:
        return f"free space, make the folder writable, or {elsewhere}"
    return fix.format(elsewhere=elsewhere)


def atomic_write_json(
    path: str | os.PathLike[str], obj: Any, *, records: Collection[str] = ()
) -> None:
    """Serialise ``obj`` as :func:`dumps_json` does and write it atomically, piece by
    piece (a value JSON cannot hold raises before the file is replaced)."""
    atomic_write_bytes(path, encoded_blocks(iter_json(obj, records=records)))


#: The standard streams a path may name (``/dev/stdout``, ``/proc/self/fd/2``, ...).
_STANDARD_FDS = (1, 2)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _standard_stream(info: os.stat_result) -> int | None:
    """The standard stream (1 or 2) that is the file ``info`` describes, if any."""
    for fd in _STANDARD_FDS:
        try:
            if _same_file(os.fstat(fd), info):
                return fd
        except OSError:
            continue
    return None


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names something other than a file to replace: a terminal, a pipe
    or FIFO, a device such as ``/dev/null``, or this process's standard output or error
    (``/dev/stdout`` while stdout goes to ``build.log``). A missing path is a new file."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    if stat.S_ISDIR(info.st_mode):
        return False  # a folder: the write fails, naming it
    return not stat.S_ISREG(info.st_mode) or _standard_stream(info) is not None


def write_output(path: str | os.PathLike[str], text: str | Iterable[str]) -> None:
    """Write ``text`` (UTF-8) to ``path``: atomically when it is a file or does not exist
    yet, straight through when it is a stream (see :func:`is_stream`). ``text`` may be
    an iterable of pieces: a file gets them as they come, a stream once they are all
    made (so a piece that raises leaves a stream untouched too).

    A temporary file renamed over a stream would replace ``/dev/stdout``'s target (the
    whole ``build.log`` of a ``pytest ... > build.log`` run) or fail on a pipe. So a
    standard stream is written through its own descriptor, at its current position
    (after what the process wrote so far), and any other stream is opened without
    truncating it; a FIFO nobody reads from fails at once (``ENXIO``) instead of
    blocking the run. A symbolic link to a file is replaced by the new file, its target
    left as it was: the one rule of every writer (the baseline's and the verdict store's
    atomic writes do the same), so a link never makes a report land somewhere else.
    """
    try:
        info = os.stat(path)
    except OSError:
        info = None
    if info is None or stat.S_ISDIR(info.st_mode):
        # A folder fails there, naming the path.
        atomic_write_bytes(path, _file_data(text))
        return
    if stat.S_ISREG(info.st_mode) and _standard_stream(info) is None:
        atomic_write_bytes(path, _file_data(text))
        return
    data = (text if isinstance(text, str) else "".join(text)).encode("utf-8")
    fd = _standard_stream(info)
    if fd is not None:
        _flush_standard_streams()
        _write_all(fd, data)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "nothing reads from it (a FIFO needs a reader)",
                          str(path)) from None
        raise
    try:
        os.set_blocking(fd, True)
        _write_all(fd, data)
    finally:
        os.close(fd)


def rewrite_in_place(path: str | os.PathLike[str], text: str) -> None:
    """Truncate the regular file at ``path`` and write UTF-8 ``text`` into it, in place.

    Not atomic: a reader may see an empty or a partial file meanwhile. It is the
    fallback for a small file when an atomic write failed, on a full disk above all:
    the temporary file needs room for a second copy, while truncating first frees the
    old content's blocks for the new. Only an existing regular file is rewritten (a
    missing path raises ``FileNotFoundError``, a device or a FIFO ``OSError``).
    """
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    try:
        _write_all(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def write_output_json(
    path: str | os.PathLike[str], obj: Any, *, records: Collection[str] = ()
) -> None:
    """Serialise ``obj`` as :func:`dumps_json` does and write it with :func:`write_output`
    (a file piece by piece)."""
    write_output(path, iter_json(obj, records=records))


def _file_data(text: str | Iterable[str]) -> bytes | Iterator[bytes]:
    return text.encode("utf-8") if isinstance(text, str) else encoded_blocks(text)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _flush_standard_streams() -> None:
    # What Python buffered for stdout and stderr goes first, so the text lands after it.
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
