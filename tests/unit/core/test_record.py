"""The per-question record: made from an answer, scored, serialised at the xdist boundary."""

from __future__ import annotations

import json
import math

import numpy as np

from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.io import dumps_json
from pytest_ragev.core.record import Record, make_record, nonfinite_warning
from pytest_ragev.core.types import Answer, Chunk, QAPair

CORPUS = {
    1: "The Eiffel Tower was completed in 1889. It is 330 metres tall and stands in Paris.",
    2: "Mount Everest is the highest mountain above sea level, at 8,849 metres.",
    5: "埃菲尔铁塔位于巴黎，高约三百三十米。",
}


def test_make_record_maps_the_answer_and_round_trips_through_json() -> None:
    case = QAPair(qid=7, question="How tall?", pids=(1, 5), passages=("a", "b"), aid=3,
                  answer="330 metres.", grades=(1.0, 2.0))
    index = PassageIndex(CORPUS)
    record = make_record(
        case, Answer(retrieved=["330 metres tall", 2], text="It is 330 m.", meta={"x": (1, 2)}),
        index=index, variant=None, cached=True,
    )
    data = record.to_json()
    assert json.loads(json.dumps(data)) == data
    assert Record.from_json(json.loads(json.dumps(data))) == record
    assert record.retrieval_ids == [1, 2]
    assert record.retrieval_gt == [[1, 5]]
    assert record.grades == {1: 1.0, 5: 2.0} and data["grades"] == {"1": 1.0, "5": 2.0}
    assert record.meta == {"x": [1, 2]}
    assert record.key == (None, 7) and record.relevant == frozenset({1, 5})
    assert record.cached is True
    empty = make_record(
        QAPair(qid=8, question="q", pids=(), passages=(), aid=None, answer=None),
        None, index=index, variant="v", error="boom",
    )
    assert empty.retrieval_gt == [] and empty.has_answer is False and empty.error == "boom"
    assert Record.from_json(empty.to_json()) == empty


def test_json_text_is_the_json_document_without_copies() -> None:
    case = QAPair(qid=7, question="Wie hoch ist der Turm?", pids=(1, 5), passages=("a", "b"),
                  aid=3, answer="埃菲尔铁塔高约三百三十米。", grades=(1.0, 2.0))
    record = make_record(
        case, Answer(retrieved=[Chunk(text="330 metres tall"), 2, "Эверест"],
                     text="Высота 330 м.", meta={"x": (1, 2), "nan": math.nan}),
        index=PassageIndex(CORPUS), variant="k10", cached=False,
    ).scored({"recall": 0.5})
    text = record.to_json_text()
    assert json.loads(text) == record.to_json()  # int grade keys and tuples as JSON has them
    assert Record.from_json(json.loads(text)) == record
    assert "埃菲尔铁塔" in text and "Высота" in text  # readable in a JUnit file, not \u escapes


def test_scored_keeps_everything_but_the_metrics() -> None:
    record = make_record(
        QAPair(qid=1, question="铁塔有多高？", pids=(5,), passages=("p",), aid=1, answer="三百三十米。"),
        Answer(retrieved=[5], text="约三百三十米。"), index=PassageIndex(CORPUS), variant="k10",
    )
    scored = record.scored({"recall": 1.0})
    assert scored.metrics == {"recall": 1.0} and record.metrics == {}
    assert scored.metric_input().retrieval_ids == [5]
    assert scored.to_report_json()["variant"] == "k10"
    assert "grades" not in scored.to_report_json()  # the report keeps the seed's sample keys


def test_a_record_counts_its_unattributed_chunks_and_keeps_what_was_retrieved() -> None:
    case = QAPair(qid=3, question="埃菲尔铁塔有多高？", pids=(5,), passages=("p",), aid=1,
                  answer="约三百三十米。")
    answer = Answer(
        retrieved=["埃菲尔铁塔位于巴黎", 2, Chunk(text="改写后的段落，语料库里没有。"),
                   Chunk(text="own text", passage_id=1)],
        text="约三百三十米。",
    )
    record = make_record(case, answer, index=PassageIndex(CORPUS), variant=None)
    assert (record.chunks, record.unattributed) == (2, 1)
    assert record.unattributed_example == "改写后的段落，语料库里没有。"
    # What a custom metric reads: every item in order, texts as given, bare ids as ids.
    assert record.retrieved == ("埃菲尔铁塔位于巴黎", 2, "改写后的段落，语料库里没有。", "own text")
    assert Record.from_json(json.loads(json.dumps(record.to_json()))) == record
    report = record.to_report_json()
    assert (report["chunks"], report["unattributed"]) == (2, 1)
    ids_only = make_record(case, Answer(retrieved=[5, 1], text="x"), index=PassageIndex(CORPUS),
                           variant=None)
    assert ids_only.chunks == 0 and "chunks" not in ids_only.to_report_json()
    # A record written before these fields existed still reads.
    old = {k: v for k, v in record.to_json().items()
           if k not in ("retrieved", "chunks", "unattributed", "unattributed_example")}
    assert Record.from_json(old).chunks == 0 and Record.from_json(old).retrieved == ()


def test_non_finite_meta_is_recorded_as_null_and_named_in_one_warning() -> None:
    case = QAPair(qid=3, question="Wie hoch ist der Mount Everest?", pids=(2,), passages=("p",),
                  aid=None, answer=None)
    index = PassageIndex(CORPUS)
    meta = {"score": math.nan, "Bewertung": [1.0, math.inf], "nested": {"low": -math.inf},
            "ok": 0.5}
    record = make_record(case, Answer(retrieved=[2], text="8.849 Meter.", meta=meta),
                         index=index, variant="k10")
    assert record.meta == {"score": None, "Bewertung": [1.0, None], "nested": {"low": None},
                           "ok": 0.5}
    assert record.nonfinite_meta == ("meta['score']", "meta['Bewertung'][1]",
                                     "meta['nested']['low']")
    json.loads(dumps_json(record.to_report_json()))  # strict JSON: no NaN, no Infinity
    assert Record.from_json(json.loads(dumps_json(record.to_json()))) == record
    clean = make_record(case, Answer(retrieved=[2], text="ok", meta={"ok": 1.0}), index=index,
                        variant=None)
    warning = nonfinite_warning([clean, record, record])
    assert warning is not None and "\n" not in warning
    assert warning.startswith("2 answer(s) held NaN or an infinity")
    assert "q3 [k10] meta['score']" in warning and "recorded as null" in warning
    assert nonfinite_warning([clean]) is None


def test_numpy_passage_ids_are_recorded_as_plain_ints() -> None:
    case = QAPair(qid=4, question="Wie hoch ist der Mount Everest?", pids=(2,), passages=("p",),
                  aid=1, answer="8.849 Meter.")
    answer = Answer(retrieved=[np.int64(2), Chunk(text="x", passage_id=np.int64(1))],
                    text="8.849 Meter.")
    record = make_record(case, answer, index=PassageIndex(CORPUS), variant=None)
    assert record.retrieval_ids == [2, 1] and record.retrieved == (2, "x")
    assert type(record.retrieved[0]) is int
    assert Record.from_json(json.loads(dumps_json(record.to_json()))) == record
