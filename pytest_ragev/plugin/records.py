"""The controller's side of the records: gathered from test reports, counted, never lost.

Workers (and serial runs) attach one :class:`~pytest_ragev.core.record.Record` per
question to the test report; :class:`RecordCollector` (registered on the controller
only) reads them back, turns a failed item without a record (a crashed xdist worker, a
failing setup) into an error record, ignores duplicates, counts the answer-cache hits,
and keeps ``finished/total`` for the progress report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from pytest_ragev.core import fmt
from pytest_ragev.core.record import RECORD_KEY, QuestionKey, Record
from pytest_ragev.core.types import QUALITY_METRICS, STATUS_PENDING, STATUS_RUNNING
from pytest_ragev.plugin.collect import NodeIds
from pytest_ragev.plugin.progress import ProgressFile

# The first line xdist puts in a worker's failure text: "[gw0] linux -- Python 3.11.7 ...".
_XDIST_HEADER = re.compile(r"^\[[\w.-]+\] \S+ -- Python ")


def failure_line(report: pytest.TestReport) -> str:
    """One line saying why an item failed: the ``E`` line of a traceback, else the first."""
    lines = [
        line.strip() for line in report.longreprtext.splitlines()
        if line.strip() and not _XDIST_HEADER.match(line)
    ]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    text = errors[0] if errors else (lines[0] if lines else f"{report.when} failed")
    return text if len(text) <= 300 else text[:299] + "…"


class RecordHandoff:
    """Records passed from the answering code to the collector of the same process.

    Each record still travels as JSON text on its test report (what ``--junitxml``
    writes and any other plugin reads); the answering code also leaves the record here,
    under that very text object, and the collector takes it back instead of parsing the
    text. A report that crossed a process boundary (xdist) carries a copy of the text,
    which is not found here: it is parsed, and ``keep`` makes of it what the run keeps
    (as the answering code does with the records it leaves).
    """

    def __init__(self, keep: Callable[[Record], Record] | None = None) -> None:
        self._waiting: dict[int, tuple[str, Record]] = {}
        self._keep = keep

    def leave(self, text: str, record: Record) -> None:
        """Leave ``record``, which ``text`` (attached to a test report) serialises."""
        self._waiting[id(text)] = (text, record)

    def take(self, text: str) -> Record:
        """The record ``text`` stands for: the one left with it, else parsed from it."""
        waiting = self._waiting.pop(id(text), None)
        if waiting is not None and waiting[0] is text:
            return waiting[1]
        parsed = Record.from_json(json.loads(text))
        return parsed if self._keep is None else self._keep(parsed)


class RecordCollector:
    """Gathers the run's records from the test reports (controller only).

    ``node_ids`` parses the node ids of the run; ``error_record`` makes the record of a
    question whose item failed without one; ``progress`` is the report file to keep up
    to date; ``collect_only`` is pytest's ``--collect-only``; ``on_record``, when given,
    is told each question's record once, as it arrives (``--ragev-samples``); ``handoff``
    holds the records this process answered (read back without parsing their text).
    """

    def __init__(
        self,
        *,
        node_ids: Callable[[], NodeIds],
        error_record: Callable[[QuestionKey, str], Record],
        progress: ProgressFile,
        collect_only: bool,
        on_record: Callable[[Record], None] | None = None,
        handoff: RecordHandoff | None = None,
    ) -> None:
        self._node_ids = node_ids
        self._handoff = handoff or RecordHandoff()
        self._error_record = error_record
        self._progress = progress
        self._collect_only = collect_only
        self._on_record = on_record
        self._records: dict[QuestionKey, Record] = {}
        self._arrived: list[Record] = []  # the same records, in arrival order
        self._question_of: dict[str, QuestionKey] = {}  # node id -> question, collected items
        self._collected: set[QuestionKey] = set()
        # Questions whose item ran to its end, recorded or not: a hand-written
        # ragev_case test that fails before recording has still finished.
        self._done: set[QuestionKey] = set()
        self._running = False
        self._session: pytest.Session | None = None
        self.total = 0
        self.duplicates = 0
        self.cache_hits = 0
        self.cache_misses = 0

    @property
    def records(self) -> list[Record]:
        """The gathered records, in arrival order (the first record of a question counts)."""
        return list(self._records.values())

    def since(self, start: int) -> list[Record]:
        """The records that arrived after the first ``start`` ones."""
        return self._arrived[start:]

    @property
    def finished(self) -> int:
        """Questions whose item ran to its end."""
        return len(self._done)

    @property
    def expects_questions(self) -> bool:
        """Whether the run collected a question or received a record."""
        return bool(self._collected or self._records)

    def set_collected(self, items: Iterable[tuple[str, QuestionKey | None]]) -> None:
        """The questions the run will answer, from ``(node id, question or None)`` per
        collected item; the progress file goes to status 0 (pending)."""
        self._question_of = {nodeid: key for nodeid, key in items if key is not None}
        self._collected = set(self._question_of.values())
        self.total = len(self._collected)
        if self._collected and not self._collect_only:
            self._progress.write(STATUS_PENDING)

    def bind(self, session: pytest.Session) -> None:
        """The session whose progress count the verdict adds to."""
        self._session = session

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self._running or not self._collected:
            return
        self._running = True
        if self._session is not None:
            # The verdict is reported as one more test at the end (plugin/finish.py):
            # count it, so the progress reaches 100% with it. Here, not at collection:
            # xdist sets the count when its workers have collected.
            self._session.testscollected += 1
        self._progress.write(STATUS_RUNNING)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # user_properties ride on the setup, call and teardown reports alike: read one.
        carried = False
        for name, value in report.user_properties if report.when == "call" else ():
            if name == RECORD_KEY and isinstance(value, str):
                carried = True
                self._add(self._handoff.take(value))
        if report.failed and not carried:
            # A failed item without a record: a crashed xdist worker ("???" report), a
            # failing setup. Its question counts as an error, never silently missing.
            key = self._node_ids().generated(report.nodeid)
            if key is not None and key not in self._records:
                self._add(self._error_record(key, failure_line(report)))
        if report.when in ("teardown", "???"):
            key = self._question_of.get(report.nodeid)
            if key is not None:
                self._done.add(key)
            if self._running:
                self._progress.answering()
                self._progress.maybe_write()

    def _add(self, record: Record) -> None:
        key = record.key
        if key in self._records:
            self.duplicates += 1
            return
        self._records[key] = record
        self._arrived.append(record)
        self._done.add(key)
        if key not in self._collected:  # e.g. a test the xdist node ids did not reveal
            self.total += 1
        # Each answer counts (R per question with --ragev-repeat).
        for answer in record.every_answer:
            if answer.cached is True:
                self.cache_hits += 1
            elif answer.cached is False:
                self.cache_misses += 1
        if self._on_record is not None:
            self._on_record(record)


#: The metrics a ``-v`` item line shows, when the question has them.
KEY_METRICS = ("recall", "rougel")


class ItemStatus:
    """``-v`` item lines with the question's key scores: ``q2 PASSED recall 0.00 rougel 0.29``.

    Registered on the controller with ``-v`` only; the scores come from the record the
    item carries (scored when it was answered, see ``ActiveRun.score_items``).
    """

    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        if report.when != "call":
            return None
        metrics = next((json.loads(value).get("metrics") or {}
                        for name, value in report.user_properties
                        if name == RECORD_KEY and isinstance(value, str)), None)
        if not metrics:
            return None
        scores = " ".join(f"{name} {fmt.num(metrics[name], digits=2)}"
                          for name in (*KEY_METRICS, *QUALITY_METRICS) if name in metrics)
        if report.passed:
            return "passed", ".", (f"PASSED {scores}", {"green": True})
        if report.failed:
            return "failed", "F", (f"FAILED {scores}", {"red": True})
        return None
