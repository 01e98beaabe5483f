"""The chunker: size limit, overlap, separator priority, CJK sentences, passage ids."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.pipelines.builtin.chunking import chunk_corpus, chunk_spans, chunk_text


def test_short_text_is_one_chunk_and_whitespace_is_trimmed() -> None:
    assert chunk_text("  Hello world.  \n", chunk_size=100, chunk_overlap=10) == ["Hello world."]
    assert chunk_text("   \n\n  ", chunk_size=10, chunk_overlap=0) == []
    assert chunk_text("", chunk_size=10, chunk_overlap=0) == []


def test_paragraphs_are_cut_before_lines_and_lines_before_sentences() -> None:
    text = "aaaa bbbb.\ncccc dddd.\n\neeee ffff."
    # The paragraph break wins: the first chunk is the whole first paragraph.
    assert chunk_text(text, chunk_size=22, chunk_overlap=0, separators=["\n\n", "\n"]) == [
        "aaaa bbbb.\ncccc dddd.",
        "eeee ffff.",
    ]
    # Without "\n\n" among the separators, the lines are the pieces.
    assert chunk_text(text, chunk_size=12, chunk_overlap=0, separators=["\n"]) == [
        "aaaa bbbb.",
        "cccc dddd.",
        "eeee ffff.",
    ]


def test_chinese_sentences_keep_their_full_stop() -> None:
    text = "深度学习是机器学习的分支。它使用多层神经网络。卷积网络擅长图像。"
    chunks = chunk_text(text, chunk_size=14, chunk_overlap=0)
    assert chunks == ["深度学习是机器学习的分支。", "它使用多层神经网络。", "卷积网络擅长图像。"]


def test_english_sentence_ends_split_long_lines_but_not_decimals() -> None:
    text = "Pi is about 3.14 in value. The sky is blue today! Is water wet?"
    chunks = chunk_text(text, chunk_size=30, chunk_overlap=0, separators=[])
    assert chunks == ["Pi is about 3.14 in value.", "The sky is blue today!", "Is water wet?"]


def test_hard_cut_when_no_separator_occurs() -> None:
    text = "x" * 25
    assert chunk_text(text, chunk_size=10, chunk_overlap=0) == ["x" * 10, "x" * 10, "x" * 5]


def test_overlap_repeats_whole_trailing_pieces_when_they_fit() -> None:
    text = "一二三。四五六。七八九。十一二。"
    chunks = chunk_text(text, chunk_size=8, chunk_overlap=4)
    # Each new chunk opens with the previous chunk's last sentence (4 characters).
    assert chunks == ["一二三。四五六。", "四五六。七八九。", "七八九。十一二。"]


def test_overlap_of_a_long_piece_is_a_character_tail_starting_at_a_word() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    chunks = chunk_text(text, chunk_size=20, chunk_overlap=8, separators=[])
    assert all(len(chunk) <= 20 for chunk in chunks)
    for previous, current in itertools.pairwise(chunks):
        shared = current.split(" ")[0]
        assert previous.endswith(shared)  # the overlap begins on a word boundary


def test_invalid_sizes_are_rejected() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_spans("abc", chunk_size=0, chunk_overlap=0)
    with pytest.raises(ValueError, match="chunk_overlap"):
        chunk_spans("abc", chunk_size=5, chunk_overlap=5)


def test_chunks_never_cross_passages_and_keep_their_ids() -> None:
    corpus = {7: "第一段。第二段。", 3: "Only one passage here."}
    chunks = chunk_corpus(corpus, chunk_size=5, chunk_overlap=0)
    assert [c.passage_id for c in chunks] == [3, 3, 3, 3, 3, 7, 7]
    assert [c.text for c in chunks if c.passage_id == 7] == ["第一段。", "第二段。"]
    for chunk in chunks:
        assert corpus[chunk.passage_id][chunk.start : chunk.start + len(chunk.text)] == chunk.text


def test_smaller_chunks_make_more_chunks() -> None:
    text = "Retrieval finds passages. " * 40
    counts = [len(chunk_text(text, chunk_size=size, chunk_overlap=10)) for size in (64, 128, 512)]
    assert counts[0] > counts[1] > counts[2] >= 1


_alphabet = st.sampled_from([*list("ab c.\n。深度学习！?x"), "\n\n"])


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(_alphabet, max_size=120).map("".join),
    size=st.integers(min_value=1, max_value=40),
    overlap_share=st.floats(min_value=0.0, max_value=0.95),
)
def test_chunk_properties(text: str, size: int, overlap_share: float) -> None:
    overlap = min(int(size * overlap_share), size - 1)
    spans = chunk_spans(text, chunk_size=size, chunk_overlap=overlap)
    covered = set()
    for index, (start, end) in enumerate(spans):
        assert 0 <= start < end <= len(text)
        assert end - start <= size
        chunk = text[start:end]
        assert chunk == chunk.strip()
        covered.update(range(start, end))
        if index:
            previous_start, previous_end = spans[index - 1]
            assert start >= previous_start and end > previous_end  # moves forward
            assert max(0, previous_end - start) <= overlap  # overlap bounded
    # Every non-space character lands in some chunk.
    assert {i for i, ch in enumerate(text) if not ch.isspace()} <= covered
