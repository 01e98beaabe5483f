"""RecordCollector: records from test reports, error records, duplicates, finished/total;
RecordHandoff: a record answered in this process is handed over as it is, one that
crossed a process boundary is parsed from its JSON text."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.record import RECORD_KEY, QuestionKey, Record, make_record
from pytest_ragev.core.types import STATUS_PENDING, STATUS_RUNNING, Answer, QAPair
from pytest_ragev.plugin.collect import NodeIds
from pytest_ragev.plugin.progress import ProgressFile
from pytest_ragev.plugin.records import RecordCollector, RecordHandoff, failure_line

IDS = NodeIds(prefix="ragev.toml", dataset_id="mini", qids=frozenset({1, 2, 3}))
QUESTIONS = {1: "Wer hat Python erfunden?", 2: "谁发明了 Python？", 3: "Кто создал Python?"}


def record(qid: int, variant: str | None = None, *, cached: bool | None = None) -> Record:
    return Record(qid=qid, question=QUESTIONS[qid], retrieval_gt=[[qid]], retrieval_ids=[qid],
                  generated_text="Guido van Rossum", generated_gt="Guido van Rossum",
                  variant=variant, cached=cached)


def error_record(key: QuestionKey, error: str) -> Record:
    variant, qid = key
    return Record(qid=qid, question=QUESTIONS[qid], retrieval_gt=[[qid]], retrieval_ids=[],
                  generated_text="", generated_gt="Guido van Rossum", error=error,
                  variant=variant, has_answer=False)


def report(
    nodeid: str, when: str = "call", outcome: str = "passed", *,
    carries: Record | None = None, longrepr: str | None = None,
) -> pytest.TestReport:
    """A test report as pytest (or an xdist worker) hands it to the controller."""
    properties = [] if carries is None else [
        (RECORD_KEY, json.dumps(carries.to_json(), ensure_ascii=False))]
    return pytest.TestReport(nodeid=nodeid, location=("ragev.toml", None, nodeid),
                             keywords={}, outcome=outcome,  # type: ignore[arg-type]
                             longrepr=longrepr, when=when,  # type: ignore[arg-type]
                             user_properties=properties)


def items(nodeid: str, *, carries: Record | None = None,
          failed_in: str | None = None, longrepr: str | None = None) -> list[pytest.TestReport]:
    """The setup, call and teardown reports of one item."""
    return [report(nodeid, when, "failed" if when == failed_in else "passed",
                   carries=carries if when == "call" else None,
                   longrepr=longrepr if when == failed_in else None)
            for when in ("setup", "call", "teardown")]


class Progress:
    """The progress file on disk, with a report that says what the collector knows."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "report.json"
        self.collector: RecordCollector | None = None
        self.file = ProgressFile(self.path, interval=0.0, report=self._report)

    def _report(self, status: int, err_msg: str) -> dict[str, Any]:
        assert self.collector is not None
        return {"status": status, "finished": self.collector.finished,
                "total": self.collector.total}

    def read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        return data


def collector(tmp_path: Path, *, collect_only: bool = False) -> tuple[RecordCollector, Progress]:
    progress = Progress(tmp_path)
    made = RecordCollector(node_ids=lambda: IDS, error_record=error_record,
                           progress=progress.file, collect_only=collect_only)
    progress.collector = made
    return made, progress


def test_the_record_an_item_carries_is_gathered(tmp_path: Path) -> None:
    gathered, _ = collector(tmp_path)
    carried = record(2, "k10", cached=False)
    for each in items(IDS.generated_id(2, "k10"), carries=carried):
        gathered.pytest_runtest_logreport(each)
    assert gathered.records == [carried]
    assert gathered.records[0].question == "谁发明了 Python？"
    assert (gathered.cache_hits, gathered.cache_misses, gathered.duplicates) == (0, 1, 0)


def test_a_failed_item_without_a_record_becomes_an_error_record(tmp_path: Path) -> None:
    gathered, _ = collector(tmp_path)
    nodeid = IDS.generated_id(3)
    crash = "[gw1] linux -- Python 3.11.7 /venv/bin/python\nE   worker 'gw1' crashed while running"
    for each in items(nodeid, failed_in="setup", longrepr=crash):
        gathered.pytest_runtest_logreport(each)
    (made,) = gathered.records
    assert made.key == (None, 3) and made.error == "worker 'gw1' crashed while running"
    # A user's failing test that is no generated item makes no error record.
    for each in items("tests/test_rag.py::test_other[q1]", failed_in="call"):
        gathered.pytest_runtest_logreport(each)
    assert [r.key for r in gathered.records] == [(None, 3)]


def test_a_failed_item_with_a_record_keeps_its_record(tmp_path: Path) -> None:
    gathered, _ = collector(tmp_path)
    carried = record(1)
    for each in items(IDS.generated_id(1), carries=carried, failed_in="call",
                      longrepr="E   recall 0.00 < 0.5"):
        gathered.pytest_runtest_logreport(each)
    assert gathered.records == [carried]


def test_duplicates_are_counted_and_the_first_record_kept(tmp_path: Path) -> None:
    gathered, _ = collector(tmp_path)
    first, again = record(1, cached=True), record(1, cached=False)
    gathered.pytest_runtest_logreport(report(IDS.generated_id(1), carries=first))
    gathered.pytest_runtest_logreport(report(IDS.generated_id(1), carries=again))
    assert gathered.records == [first] and gathered.duplicates == 1
    assert (gathered.cache_hits, gathered.cache_misses) == (1, 0)
    assert gathered.since(0) == [first] and gathered.since(1) == []


def test_finished_counts_items_that_ran_to_their_end_and_the_file_follows(
    tmp_path: Path,
) -> None:
    gathered, progress = collector(tmp_path)
    keys: dict[str, QuestionKey | None] = {IDS.generated_id(q): (None, q) for q in (1, 2, 3)}
    keys["tests/test_plain.py::test_unrelated"] = None
    gathered.set_collected(keys.items())
    assert gathered.total == 3 and gathered.expects_questions
    assert progress.read() == {"status": STATUS_PENDING, "finished": 0, "total": 3}
    gathered.pytest_runtest_logstart(IDS.generated_id(1), None)
    assert progress.read() == {"status": STATUS_RUNNING, "finished": 0, "total": 3}
    for each in items(IDS.generated_id(1), carries=record(1)):
        gathered.pytest_runtest_logreport(each)
    assert gathered.finished == 1
    # An item that fails after setup without a record still finished (an error record).
    for each in items(IDS.generated_id(2), failed_in="call", longrepr="E   boom"):
        gathered.pytest_runtest_logreport(each)
    for each in items("tests/test_plain.py::test_unrelated"):
        gathered.pytest_runtest_logreport(each)
    assert gathered.finished == 2
    assert progress.read() == {"status": STATUS_RUNNING, "finished": 2, "total": 3}
    # A record of a question the collection did not reveal counts in the total.
    gathered.pytest_runtest_logreport(report(IDS.generated_id(3, "k10"),
                                             carries=record(3, "k10")))
    assert (gathered.finished, gathered.total) == (3, 4)


def test_collect_only_writes_no_progress(tmp_path: Path) -> None:
    gathered, progress = collector(tmp_path, collect_only=True)
    gathered.set_collected([(IDS.generated_id(1), (None, 1))])
    assert gathered.total == 1 and not progress.path.exists()


def test_failure_line_prefers_the_e_line_and_skips_the_xdist_header() -> None:
    text = "[gw0] linux -- Python 3.11.7 /venv/bin/python\nTraceback\nE   ValueError: 无效\n"
    assert failure_line(report("x", outcome="failed", longrepr=text)) == "ValueError: 无效"
    assert failure_line(report("x", outcome="failed", longrepr="one line\nanother")) == "one line"
    assert failure_line(report("x", "setup", "failed", longrepr="")) == "setup failed"
    assert len(failure_line(report("x", outcome="failed", longrepr="E " + "ж" * 400))) == 300


def _record() -> Record:
    case = QAPair(qid=3, question="珠穆朗玛峰有多高？", pids=(2,), passages=("p",), aid=1,
                  answer="八千八百四十九米。")
    return make_record(case, Answer(retrieved=[2], text="8849 米"),
                       index=PassageIndex({2: "珠穆朗玛峰海拔八千八百四十九米。"}), variant=None)


def test_a_record_left_with_its_text_is_taken_back_without_parsing() -> None:
    handoff = RecordHandoff()
    record = _record()
    text = record.to_json_text()
    handoff.leave(text, record)
    assert handoff.take(text) is record
    # Taken once: the same text read again (a second report of the item) is parsed.
    again = handoff.take(text)
    assert again == record and again is not record


def test_a_copy_of_the_text_is_parsed() -> None:
    # What an xdist worker's report brings: equal text, another object.
    handoff = RecordHandoff()
    record = _record()
    text = record.to_json_text()
    handoff.leave(text, record)
    copy = "".join(list(text))
    assert copy == text and copy is not text
    taken = handoff.take(copy)
    assert taken == record and taken is not record


def test_a_parsed_record_is_kept_as_the_run_keeps_it() -> None:
    # An xdist worker's record is parsed on the controller and then kept as the run
    # keeps its own records (without the retrieved texts no custom metric reads); one
    # left in this process was made that way already and is taken as it is.
    def keep(record: Record) -> Record:
        return replace(record, retrieved=())

    handoff = RecordHandoff(keep=keep)
    record = replace(_record(), retrieved=("珠穆朗玛峰海拔八千八百四十九米。", 7))
    text = record.to_json_text()
    taken = handoff.take("".join(list(text)))
    assert taken == replace(record, retrieved=())
    lean = keep(record)
    handoff.leave(text, lean)
    assert handoff.take(text) is lean
