"""Unit tests for mapping retrieved chunks to passage ids."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.core.attribution import (
    AMBIGUOUS_MIN_CHARS,
    EXAMPLE_CHARS,
    STRIDE,
    ChunkCount,
    K,
    PassageIndex,
    count_unattributed,
    normalise,
    retrieved_ids,
)
from pytest_ragev.core.types import Chunk

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
    if not normalise(chunk):
        return
    (found,) = retrieved_ids([chunk], index=index)
    holders = {normalise(t) for t in corpus.values() if normalise(chunk) in normalise(t)}
    if found < 0:
        # The one case a substring stays unmatched: short, and in different passages.
        assert len(normalise(chunk)) < AMBIGUOUS_MIN_CHARS and len(holders) > 1
        return
    assert normalise(chunk) in normalise(corpus[found]) or normalise(corpus[found]) in normalise(chunk)


def expected_id(corpus: dict[int, str], chunk: str, relevant: frozenset[int]) -> int | None:
    """The documented mapping rule, by brute force (rules 1 and 2)."""
    norm = normalise(chunk)
    texts = {pid: normalise(text) for pid, text in corpus.items()}
    exact = sorted(pid for pid, text in texts.items() if text == norm)
    holders = exact or sorted(pid for pid, text in texts.items() if norm in text)
    if not holders:
        return None
    twins = [pid for pid in holders if texts[pid] == texts[holders[0]]]
    if not exact and len(twins) < len(holders) and len(norm) < AMBIGUOUS_MIN_CHARS:
        return None
    return next((pid for pid in twins if pid in relevant), holders[0])


def test_short_chunk_found_although_a_decoy_shares_a_sampled_kgram() -> None:
    corpus = {
        1: "The quick brown fox jumps over the lazy dog and keeps running far away.",
        2: "brown fox jumps high; the hunter watches from the hill all day long.",
    }
    index = PassageIndex(corpus)
    for chunk in ("brown fox jumps o", "brown fox jumps ov", "quick brown fox j"):
        assert K <= len(chunk) < K + STRIDE - 1
        assert retrieved_ids([chunk], index=index) == [1]
    assert retrieved_ids(["brown fox jumps h"], index=index) == [2]


def test_ambiguous_short_chunks_do_not_score() -> None:
    corpus = {
        1: "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
        2: "The Eiffel Tower is about 330 metres tall including its antennas.",
        6: "The Louvre in Paris is the most visited art museum in the world.",
    }
    index = PassageIndex(corpus)
    # Each is in several different passages: attributing them to the relevant one
    # made precision and MRR 1.0 for junk.
    assert retrieved_ids(["in Paris", "The", "is"], index=index, relevant=[2]) == [-1, -2, -3]
    assert retrieved_ids(["The Eiffel Tower"], index=index, relevant=[2]) == [-1]
    # Short but in one passage only: that passage.
    assert retrieved_ids(["330 metres"], index=index, relevant=[1]) == [2]
    # Long enough to be a real chunk: the smallest id, whatever is relevant.
    chunk = "The Eiffel Tower i"  # 18 chars, in 1 ("...Tower in") and 2 ("...Tower is")
    assert retrieved_ids([chunk], index=index, relevant=[2]) == [-1]
    long_chunk = " in Paris is the most visited art"
    assert retrieved_ids([long_chunk], index=index, relevant=[1]) == [6]


def test_containment_in_different_passages_ignores_relevance() -> None:
    corpus = {
        3: "Intro text. Shared sentence about the tower height. More words here.",
        9: "Other start. Shared sentence about the tower height. Different end.",
        12: "Shared sentence about the tower height. Other start. Different end.",
    }
    index = PassageIndex(corpus)
    chunk = "Shared sentence about the tower height."
    assert len(chunk) >= AMBIGUOUS_MIN_CHARS
    for relevant in ([], [9], [12], [3, 9]):
        assert retrieved_ids([chunk], index=index, relevant=relevant) == [3]


alphabet = "abcd "


@given(data=st.data())
def test_short_chunks_with_decoys_sharing_prefixes(data: st.DataObject) -> None:
    source = data.draw(st.text(alphabet=alphabet, min_size=40, max_size=120), label="source")
    length = data.draw(st.integers(1, K + STRIDE + 4), label="length")
    start = data.draw(st.integers(0, len(source) - length), label="start")
    chunk = source[start : start + length]
    decoys = []
    for _ in range(data.draw(st.integers(1, 4), label="decoys")):
        cut = data.draw(st.integers(1, len(chunk)), label="cut")
        head = data.draw(st.text(alphabet=alphabet, max_size=30), label="head")
        tail = data.draw(st.text(alphabet="xyz ", min_size=1, max_size=30), label="tail")
        decoys.append(head + chunk[:cut] + tail)  # shares the chunk's first k-grams
    texts = [source, *decoys]
    ids = data.draw(st.permutations(range(1, len(texts) + 1)), label="ids")
    corpus = dict(zip(ids, texts, strict=True))
    relevant = frozenset(data.draw(st.sets(st.sampled_from(ids)), label="relevant"))
    if not normalise(chunk):
        return
    (found,) = retrieved_ids([chunk], index=PassageIndex(corpus), relevant=relevant)
    expected = expected_id(corpus, chunk, relevant)
    assert found == (expected if expected is not None else -1)


# --- placeholders never collide with passage ids; retrieved must be a list ----------------------


@pytest.mark.parametrize("bad", [-1, Chunk(text="Der Turm ist 330 Meter hoch.", passage_id=-2)])
def test_a_negative_passage_id_from_a_pipeline_is_refused(index: PassageIndex, bad: object) -> None:
    """Negative ids are the placeholders of unmatched chunks: a pipeline's -1 would merge
    with the first unmatched chunk and drop a rank."""
    with pytest.raises(ValueError, match=r"Answer.retrieved\[1\](\.passage_id)? is -[12], a "
                                         r"negative passage id; passage ids are 0 or more"):
        retrieved_ids(["an unknown chunk that matches nothing here", bad], index=index)


def test_id_zero_is_a_passage_id() -> None:
    assert retrieved_ids([0, "nothing like it at all"], index=PassageIndex({0: "零号段落。"})) == [
        0, -1]


@pytest.mark.parametrize(
    ("retrieved", "message"),
    [
        ("Paris", r"is the str 'Paris', not a list; wrap it: retrieved=\['Paris'\]"),
        ("长城是中国古代的军事防御工程。" * 4, r"is the str '长城是中国古代的军事防御工程。长城是.*\.\.\.', not a list"),
        (b"Paris", r"is the bytes 'Paris', not a list"),
        ({1: "a", 2: "b"}, r"is a dict, which has no rank order"),
        ({1, 2}, r"is a set, which has no rank order"),
        (None, r"is of type NoneType; give a list of passage ids"),
        (7, r"is of type int; give a list of passage ids"),
    ],
)
def test_retrieved_that_is_not_a_list_is_a_type_error_with_the_fix(
    index: PassageIndex, retrieved: object, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        retrieved_ids(retrieved, index=index)  # type: ignore[arg-type]


def test_retrieved_as_a_tuple_or_generator_still_works(index: PassageIndex) -> None:
    assert retrieved_ids((2, 1), index=index) == [2, 1]
    assert retrieved_ids((pid for pid in (3, 2)), index=index) == [3, 2]
def test_count_unattributed_counts_text_items_at_every_position(index: PassageIndex) -> None:
    retrieved = [
        3,                                               # an id: nothing to attribute
        Chunk(text="anything at all", passage_id=2),     # names its passage: not counted
        "It is 330 metres tall and stands",              # inside passage 1
        "这段文字不在任何段落里，是被改写过的。",              # matches nothing
        Chunk(text="Short one."),                        # exact match, by text
        "这段文字不在任何段落里，是被改写过的。",              # the same miss again counts again
        "metres",                                        # short, in different passages
    ]
    count = count_unattributed(retrieved, index=index)
    assert (count.chunks, count.unattributed) == (5, 3)
    assert count.first == "这段文字不在任何段落里，是被改写过的。"
    assert count_unattributed([1, 2], index=index) == ChunkCount()


def test_the_first_unattributed_chunk_is_normalised_and_shortened(index: PassageIndex) -> None:
    long = "Dieser Satz   steht\nin keinem Absatz. " * 20
    count = count_unattributed([long], index=index)
    assert count.first is not None and len(count.first) == EXAMPLE_CHARS
    assert count.first.startswith("Dieser Satz steht in keinem Absatz.") and count.first[-1] == "…"


_MISSES = ("Это предложение не из корпуса.", "これはコーパスにない文です。", "말뭉치에 없는 문장입니다.")


@given(st.lists(st.one_of(st.sampled_from(sorted(CORPUS)),
                          st.sampled_from([CORPUS[1][:40], CORPUS[3][5:20], CORPUS[2]]),
                          st.sampled_from(_MISSES)), max_size=12))
def test_count_agrees_with_the_index_whatever_ids_unmatched_chunks_get(items: list[object]) -> None:
    # Counting asks the index, not the placeholder ids retrieved_ids hands out, so it
    # holds for any numbering of unmatched chunks.
    index = PassageIndex(CORPUS)
    retrieved_ids(items, index=index)  # the order of calls in make_record
    count = count_unattributed(items, index=index)
    texts = [item for item in items if isinstance(item, str)]
    assert count.chunks == len(texts)
    assert count.unattributed == sum(item in _MISSES for item in texts)


# --- passage ids from numpy (FAISS returns numpy integers) ---------------------------------------


def test_numpy_integer_passage_ids_are_plain_ints(index: PassageIndex) -> None:
    retrieved = [np.int64(2), np.uint16(1), Chunk(text="埃菲尔铁塔", passage_id=np.int32(4)),
                 np.int64(0), np.int64(2)]
    ids = retrieved_ids(retrieved, index=index)
    assert ids == [2, 1, 4, 0]
    assert all(type(pid) is int for pid in ids)
    # Ids are not chunks: nothing of them goes through text matching.
    assert count_unattributed(retrieved, index=index) == ChunkCount()


@pytest.mark.parametrize(
    "bad", [np.int64(-1), Chunk(text="Der Turm ist 330 Meter hoch.", passage_id=np.int64(-3))]
)
def test_a_negative_numpy_passage_id_is_refused(index: PassageIndex, bad: object) -> None:
    with pytest.raises(ValueError, match=r"Answer.retrieved\[0\](\.passage_id)? is -[13], a "
                                         r"negative passage id"):
        retrieved_ids([bad], index=index)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.float64(2.0), r"Answer.retrieved\[1\] is a float64; give a passage id"),
        (np.float32(2.0), r"Answer.retrieved\[1\] is a float32; give a passage id"),
        (2.0, r"Answer.retrieved\[1\] is a float; give a passage id"),
        (np.bool_(True), r"Answer.retrieved\[1\] is a bool_?; give a passage id"),
        (object(), r"Answer.retrieved\[1\] is an object; give a passage id"),
        (Chunk(text="x", passage_id=np.float64(2.0)),  # type: ignore[arg-type]
         r"Answer.retrieved\[1\].passage_id = np.float64\(2.0\) is not a whole number"),
        (Chunk(text="x", passage_id=np.bool_(False)),  # type: ignore[arg-type]
         r"Answer.retrieved\[1\].passage_id = np.(False_|bool_\(False\)) is not a whole"),
    ],
)
def test_floats_and_other_numbers_are_not_passage_ids(
    index: PassageIndex, bad: object, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        retrieved_ids([1, bad], index=index)


def test_the_type_in_a_message_has_the_right_article(index: PassageIndex) -> None:
    with pytest.raises(TypeError, match=r"is an OrderedDict, which has no rank order"):
        retrieved_ids(OrderedDict([(1, "a")]), index=index)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"is a dict, which has no rank order"):
        retrieved_ids({1: "a"}, index=index)  # type: ignore[arg-type]
