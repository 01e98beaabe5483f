"""The BM25 index: bm25s parity, exact pruned top-k, normalisation, save/load, tokenizer."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.pipelines.builtin import bm25
from pytest_ragev.pipelines.builtin.bm25 import BM25Index
from pytest_ragev.pipelines.builtin.chunking import TextChunk
from pytest_ragev.pipelines.builtin.store import KnowledgeBase
from pytest_ragev.pipelines.builtin.tokens import bm25_tokens, has_han


def _zipf_corpus(seed: int, n_docs: int, vocab: int) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    weights = [1.0 / (i + 1) for i in range(vocab)]
    return [rng.choices(words, weights, k=rng.randint(3, 40)) for _ in range(n_docs)]


def _exhaustive(index: BM25Index, query: list[str], k: int) -> list[tuple[int, float]]:
    scores = index.scores(query)
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return [(int(i), float(scores[i])) for i in order if scores[i] > 0]


def test_scores_match_bm25s_given_the_same_tokens() -> None:
    bm25s = pytest.importorskip("bm25s")
    docs = _zipf_corpus(1, 2000, 3000)
    ours = BM25Index.build(docs)
    theirs = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    theirs.index(docs, show_progress=False)
    rng = random.Random(2)
    for _ in range(40):
        query = [*rng.sample(rng.choice(docs), 2), f"w{rng.randrange(3000)}", "unseen"]
        expected = theirs.get_scores(query)
        np.testing.assert_allclose(ours.scores(query), expected, rtol=1e-5, atol=1e-6)


def test_repeated_query_tokens_count_like_bm25s() -> None:
    docs = [["a", "b"], ["a", "a", "c"], ["c"]]
    index = BM25Index.build(docs)
    np.testing.assert_allclose(index.scores(["a", "a"]), 2 * index.scores(["a"]))
    assert [i for i, _ in index.search(["a", "a", "c"], 3)] == [1, 0, 2]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 15), length=st.integers(1, 7))
def test_pruned_search_equals_exhaustive_top_k(seed: int, k: int, length: int) -> None:
    docs = _zipf_corpus(seed % 7, 400, 300)
    index = BM25Index.build(docs)
    rng = random.Random(seed)
    # Mix rare (short lists, pruning pays) and common words (long lists, probed).
    query = [f"w{rng.randrange(300)}" for _ in range(length)] + ["w0"]
    got = index.search(query, k)
    expected = _exhaustive(index, query, k)
    assert len(got) == len(expected)
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], rtol=1e-5)
    # Every returned document really has the score reported (ties may pick others).
    exact = index.scores(query)
    np.testing.assert_allclose([s for _, s in got], [exact[d] for d, _ in got], rtol=1e-5)


def test_search_edge_cases() -> None:
    index = BM25Index.build([["x", "y"], [], ["y"]])
    assert index.search([], 5) == []
    assert index.search(["nowhere"], 5) == []
    assert index.search(["y"], 0) == []
    hits = index.search(["y", "x"], 10)
    assert [doc for doc, _ in hits] == [0, 2]  # the empty document never scores
    assert BM25Index.build([]).search(["x"], 3) == []


def test_normalised_score_is_one_for_each_query_word_once_in_an_average_document() -> None:
    docs = [["rare", "z"], ["q", "z"], ["q", "z"], ["q", "z"]]
    index = BM25Index.build(docs)
    query = ["rare"]
    ((doc, raw),) = index.search(query, 1)
    assert doc == 0
    assert index.normalised(raw, query) == pytest.approx(1.0)
    # Half the query's idf mass present -> a lower normalised score.
    two = ["rare", "q"]
    ((_, raw_two),) = index.search(two, 1)
    assert 0.0 < index.normalised(raw_two, two) < 1.0
    assert index.normalised(5.0, ["unknown"]) == 0.0


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    docs = [*_zipf_corpus(3, 300, 200), ["深度", "学习"]]
    index = BM25Index.build(docs, k1=1.2, b=0.6)
    chunks = [TextChunk(text=" ".join(d), passage_id=i, start=0) for i, d in enumerate(docs)]
    KnowledgeBase(chunks, index, None, key="k").save(tmp_path)
    loaded = KnowledgeBase.load(tmp_path, "k")
    assert loaded is not None
    mapped = loaded.index
    assert (mapped.k1, mapped.b, mapped.n_docs) == (1.2, 0.6, len(docs))
    assert len(index.dense_terms) and mapped.columns.shape == index.columns.shape
    assert not mapped.indices.flags.writeable  # mapped read-only, not copied
    for query in (["w1", "w7", "w150"], ["深度"], ["w0"]):
        assert mapped.search(query, 10) == index.search(query, 10)


def test_build_in_blocks_equals_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _zipf_corpus(4, 500, 400)
    whole = BM25Index.build(docs)
    monkeypatch.setattr(bm25, "BLOCK_TOKENS", 37)  # many blocks, some of one document
    blocks = BM25Index.build(iter(docs))
    for name in ("idf", "indptr", "indices", "data", "max_impact"):
        np.testing.assert_array_equal(getattr(blocks, name), getattr(whole, name))
    assert blocks.vocab == whole.vocab


def test_threads_search_alike() -> None:
    # Each thread has its own accumulator: concurrent queries must not see each other's.
    docs = _zipf_corpus(6, 3000, 500)
    index = BM25Index.build(docs)
    rng = random.Random(6)
    queries = [[f"w{rng.randrange(60)}" for _ in range(5)] for _ in range(200)]
    expected = [index.search(q, 10) for q in queries]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            assert list(pool.map(lambda q: index.search(q, 10), queries)) == expected


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 12))
def test_pruning_is_exact_on_queries_of_only_common_words(seed: int, k: int) -> None:
    # No rare word to anchor the bound: every list is long, pruning must still be exact.
    docs = _zipf_corpus(seed % 5, 3000, 60)
    index = BM25Index.build(docs)
    rng = random.Random(seed)
    query = [f"w{rng.randrange(12)}" for _ in range(rng.randint(2, 7))]
    got = index.search(query, k)
    expected = _exhaustive(index, query, k)
    assert [s for _, s in got] == [s for _, s in expected]  # bit-identical scores
    assert [d for d, _ in got] == [d for d, _ in expected]  # ties by document order


def test_tokenizer_lowercases_words_and_cuts_chinese_with_jieba() -> None:
    assert bm25_tokens("BM25 Retrieval, 2024!") == ["bm25", "retrieval", "2024"]
    assert bm25_tokens("ＡＢＣ１２３") == ["abc123"]  # full-width forms fold (NFKC)
    tokens = bm25_tokens("什么是深度学习？Deep learning。")
    assert "深度" in tokens and "学习" in tokens
    assert tokens[-2:] == ["deep", "learning"]
    assert all(token.strip() and token not in "？。" for token in tokens)
    assert has_han("abc 中") and not has_han("abc")


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=127), max_size=40))
def test_the_ascii_fast_path_splits_like_the_general_one(text: str) -> None:
    # " é" sends the same text through the general path (NFKC, Han split, casefold).
    assert bm25_tokens(text + " é") == [*bm25_tokens(text), "é"]
