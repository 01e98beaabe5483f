"""The controller's side of the records: a record answered in this process is handed
over as it is; one that crossed a process boundary is parsed from its JSON text."""

from __future__ import annotations

from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.record import Record, make_record
from pytest_ragev.core.types import Answer, QAPair
from pytest_ragev.plugin.records import RecordHandoff


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
