"""Unit tests for mapping retrieved chunks to passage ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev._types import Answer, Chunk, QAPair
from pytest_ragev.recorder import PassageIndex, make_record, retrieved_ids

CORPUS = {
    1: "The Eiffel Tower was completed in 1889. It is 330 metres tall and stands in Paris.",
    2: "Mount Everest is the highest mountain above sea level, at 8,849 metres.",
    3: "长城是中国古代的军事防御工程。它的总长度超过两万公里。",
    4: "Short one.",
    5: "The Eiffel Tower was completed in 1889. It is 330 metres tall and stands in Paris.",
}


@pytest.fixture(scope="module")
def index() -> PassageIndex:
    return PassageIndex(CORPUS)


def test_ids_pass_through_and_deduplicate(index: PassageIndex) -> None:
    assert retrieved_ids([3, 1, 3, 2, 1], index=index) == [3, 1, 2]


def test_exact_text_and_whitespace_normalisation(index: PassageIndex) -> None:
    text = "  Mount Everest is the highest\nmountain above sea level,   at 8,849 metres. "
    assert retrieved_ids([text], index=index) == [2]


def test_chunk_inside_a_passage(index: PassageIndex) -> None:
    assert retrieved_ids(["It is 330 metres tall and stands"], index=index) == [1]
    assert retrieved_ids(["它的总长度超过两万公里"], index=index) == [3]


def test_duplicated_text_prefers_a_relevant_passage(index: PassageIndex) -> None:
    chunk = "completed in 1889. It is 330 metres"
    assert retrieved_ids([chunk], index=index) == [1]
    assert retrieved_ids([chunk], index=index, relevant=[5]) == [5]


def test_chunk_containing_passages(index: PassageIndex) -> None:
    chunk = "Intro. Short one. And " + CORPUS[2] + " Outro."
    assert retrieved_ids([chunk], index=index) == [2]
    assert retrieved_ids(["Before. Short one. After."], index=index) == [4]


def test_unmatched_chunks_keep_their_rank(index: PassageIndex) -> None:
    ids = retrieved_ids(
        ["nothing like the corpus at all, really", 2, "another unknown chunk of text here",
         "nothing like the corpus at all, really"],
        index=index,
    )
    assert ids == [-1, 2, -2]


def test_chunk_objects(index: PassageIndex) -> None:
    ids = retrieved_ids(
        [Chunk(text="irrelevant", passage_id=4), Chunk(text="8,849 metres")], index=index
    )
    assert ids == [4, 2]


@pytest.mark.parametrize("bad", [True, 1.5, None, b"bytes", Chunk(text="x", passage_id="1")])  # type: ignore[arg-type]
def test_bad_items_raise_type_errors_naming_the_position(index: PassageIndex, bad: object) -> None:
    with pytest.raises(TypeError, match=r"Answer.retrieved\[1\]"):
        retrieved_ids([1, bad], index=index)


def test_make_record_is_json_safe() -> None:
    import json

    case = QAPair(qid=7, question="How tall?", pids=(1, 5), passages=("a", "b"), aid=3,
                  answer="330 metres.", grades=(1.0, 2.0))
    index = PassageIndex(CORPUS)
    record = make_record(
        case, Answer(retrieved=["330 metres tall", 2], text="It is 330 m.", meta={"x": (1, 2)}),
        index=index, dataset_id="d", variant=None,
    )
    assert json.loads(json.dumps(record)) == record
    assert record["retrieval_ids"] == [1, 2]
    assert record["retrieval_gt"] == [[1, 5]]
    assert record["grades"] == {"1": 1.0, "5": 2.0}
    assert record["meta"] == {"x": [1, 2]}
    empty = make_record(
        QAPair(qid=8, question="q", pids=(), passages=(), aid=None, answer=None),
        None, index=index, dataset_id="d", variant="v", error="boom",
    )
    assert empty["retrieval_gt"] == [] and empty["has_answer"] is False and empty["error"] == "boom"


words = st.text(alphabet="abcdefgh ", min_size=30, max_size=200)


@given(passages=st.lists(words, min_size=1, max_size=8), data=st.data())
def test_any_substring_of_a_passage_maps_to_a_passage_containing_it(
    passages: list[str], data: st.DataObject
) -> None:
    corpus = {pid: text for pid, text in enumerate(passages, start=1)}
    index = PassageIndex(corpus)
    pid = data.draw(st.sampled_from(sorted(corpus)))
    text = corpus[pid]
    start = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(start + 1, len(text)))
    chunk = text[start:end]
    from pytest_ragev.recorder import normalise

    if not normalise(chunk):
        return
    (found,) = retrieved_ids([chunk], index=index)
    assert normalise(chunk) in normalise(corpus[found]) or normalise(corpus[found]) in normalise(chunk)
