"""``--ragev-samples FILE``: one JSON line per question, as each question's record arrives.

The JSON report holds the samples only once the run ends; a caller that follows a run
(``ragev serve`` shows the running mean of its tasks) reads this file instead. The
controller's :class:`~pytest_ragev.plugin.records.RecordCollector` hands over each
record once (under xdist the records arrive there too); :class:`SamplesFile` scores it
with the run's own plan (profile, tokenizer, custom metrics: the function it is given)
and appends the sample as the final report writes it (with its question's content
``hash``), plus its ``variant``.

A file is emptied when the run starts and each line appended in one write, so a reader
sees whole lines (and, at worst, a last line still being written). A stream
(``/dev/stdout``, a pipe) is written through, as the reports are.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_ragev.core.io import WRITE_ERRORS, is_stream, write_error_cause, write_output
from pytest_ragev.core.record import Record

#: Scores one record as the end of the run will (the plan's profile, tokenizer, metrics).
Scorer = Callable[[Record], Record]
#: The content hash of a question (the one baselines and reports pair questions by).
HashOf = Callable[[int], "str | None"]


def sample_line(record: Record, content_hash: str | None = None) -> str:
    """The record's line: its sample in the JSON report's shape (``hash`` included when
    known), with ``variant`` always present (``null`` for the base configuration)."""
    sample: dict[str, Any] = record.to_report_json()
    if content_hash is not None:
        sample["hash"] = content_hash
    sample["variant"] = record.variant
    return json.dumps(sample, ensure_ascii=False, allow_nan=False) + "\n"


class SamplesFile:
    """Appends one line per question to ``path`` (the controller's side of the option)."""

    def __init__(self, path: Path, *, scorer: Scorer, hash_of: HashOf | None = None) -> None:
        self.path = path
        self._scorer = scorer
        self._hash_of = hash_of
        self._stream = False
        self._warned: set[str] = set()

    def open(self) -> str | None:
        """Empty the file for this run (a stream is left as it is); the one-line reason
        when it cannot be written, which the shell turns into a usage error."""
        self._stream = is_stream(self.path)
        if self._stream:
            return None
        try:
            write_output(self.path, "")
        except WRITE_ERRORS as exc:
            return (f"--ragev-samples: cannot write {self.path}: {write_error_cause(exc)[0]}; "
                    "choose a path in a writable folder")
        return None

    def add(self, record: Record) -> None:
        """Score ``record`` and append its line. Never fails the run: a record that cannot
        be scored is written without metrics, a failed write skipped; each says so once."""
        try:
            scored = self._scorer(record)
        except Exception as exc:  # a custom metric's error: the end of the run reports it
            self._warn("score", f"q{record.qid} could not be scored ({type(exc).__name__}: "
                                f"{exc}); its line has no metrics, the end of the run says why")
            scored = record.scored({})
        try:
            line = sample_line(
                scored, self._hash_of(record.qid) if self._hash_of is not None else None)
            if self._stream:
                write_output(self.path, line)
            else:
                self._append(line.encode("utf-8"))
        except WRITE_ERRORS as exc:
            self._warn("write", f"could not write to {self.path}: {write_error_cause(exc)[0]}; "
                                "the run goes on without those lines")

    def _append(self, data: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                     | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            view = memoryview(data)
            while view:  # one write for a line of a regular file, in practice
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def _warn(self, kind: str, text: str) -> None:
        # Once per kind: a broken disk or metric would otherwise print a line per question.
        if kind in self._warned:
            return
        self._warned.add(kind)
        sys.stderr.write(f"ragev: warning: --ragev-samples: {text}\n")
