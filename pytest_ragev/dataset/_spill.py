"""A large corpus's texts out of the heap: in a memory-mapped anonymous temporary file.

A loaded corpus keeps its passage texts as one Arrow column. At a million passages
that is some 280 MB of process memory for the whole run, though after the knowledge base
is built (or loaded from its cache) a run reads only a handful of passages: the few a
report shows, those a custom metric looks up. :func:`spill` writes the column once to an
anonymous temporary file (Arrow's IPC format, the same bytes) and maps it read-only;
Arrow reads the mapped pages in place. A page counts in the process's resident memory
only while the run reads it, and :meth:`MappedTexts.release` hands back those a full
scan touched (the pages stay in the operating system's file cache, and are read again
from there, not from disk, if asked for). The file has no name: it goes away with the
process, however the process ends.
"""

from __future__ import annotations

import contextlib
import mmap
import tempfile
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pytest_ragev.dataset._arrow import one_chunk, take_indices

#: A corpus with at least this many bytes of text is mapped from a temporary file
#: (about 100,000 passages of 300 characters); a smaller one stays in memory, where the
#: file and its pages would cost more than they save.
SPILL_TEXT_BYTES = 32 << 20

#: Rows taken at a time when a shuffled corpus is written in id order (a few MB of text).
_BLOCK_ROWS = 1 << 15


class MappedTexts:
    """Arrow texts backed by a read-only mapping of an anonymous temporary file."""

    __slots__ = ("_mapping", "texts")

    def __init__(self, texts: pa.ChunkedArray[Any], mapping: mmap.mmap) -> None:
        self.texts = texts
        self._mapping = mapping

    def release(self) -> None:
        """Drop the mapped pages from this process's resident memory.

        Nothing is lost: the file holds the texts, and a later read maps its page again.
        Without ``madvise`` (Windows) the operating system reclaims them by itself.
        """
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if advice is not None and hasattr(self._mapping, "madvise"):
            # Advice only: a kernel that refuses it changes nothing the run can see.
            with contextlib.suppress(OSError, ValueError):
                self._mapping.madvise(advice)


def spill(texts: pa.ChunkedArray[Any], order: npt.NDArray[np.intp] | None) -> MappedTexts | None:
    """``texts`` (in id order: ``texts[order[i]]`` is row ``i`` when ``order`` is given)
    as a column read from a mapped temporary file, or ``None`` when no such file can be
    written (no temporary folder, a full disk): the caller keeps the texts in memory."""
    try:
        # Closed by the with block below; opening it is what may fail on its own.
        handle = tempfile.TemporaryFile(prefix="ragev-corpus-")  # noqa: SIM115
    except OSError:
        return None
    with handle:
        try:
            _write(handle, texts, order)
            handle.flush()
            if handle.tell() == 0:
                return None
            # The mapping keeps the file alive after its handle is closed.
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, pa.ArrowException):
            return None
    try:
        # Arrow reads the buffers in place: an uncompressed IPC file needs no copy.
        texts_read = pa.ipc.open_file(pa.py_buffer(mapping)).read_all().column(0)
    except pa.ArrowException:
        return None
    mapped = MappedTexts(texts_read, mapping)
    mapped.release()  # what opening the file touched (its footer, its first block)
    return mapped


def _write(handle: Any, texts: pa.ChunkedArray[Any], order: npt.NDArray[np.intp] | None) -> None:
    schema = pa.schema([("text", texts.type)])
    with pa.ipc.new_file(pa.PythonFile(handle, mode="w"), schema) as writer:
        if order is None:
            for chunk in texts.chunks:
                writer.write_batch(pa.record_batch([chunk], schema=schema))
            return
        # In id order a block at a time: never a second whole copy of the texts in memory.
        combined = one_chunk(texts)
        for start in range(0, len(order), _BLOCK_ROWS):
            block = take_indices(order[start:start + _BLOCK_ROWS])
            writer.write_batch(pa.record_batch([combined.take(block)], schema=schema))
