"""Hybrid fusion over deep pools, the idf-weighted lexical reranker, and exact vector search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.pipelines.builtin import lexical_rerank, reciprocal_rank_fusion
from pytest_ragev.pipelines.builtin import vectors as vector_search
from pytest_ragev.pipelines.builtin.pipeline import _Hit
from tests.unit.pipelines.builtin._builtin import case, kb_of, pipeline

CORPUS = {
    1: "How do I install a package? Use apt install with the package name.",
    2: "How do I remove a package? Use apt remove; apt purge also deletes its configuration.",
    3: "How do I upgrade the system? Run apt update, then apt full-upgrade.",
    4: "Wie installiere ich ein Paket? Mit apt install und dem Paketnamen.",
    5: "如何安装软件包？使用 apt install 加上软件包的名字。",
    6: "Как удалить пакет? Используйте apt remove.",
}


def test_hybrid_asks_each_list_for_the_fusion_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, int]] = []
    for pool, top_k, expected in ((100, 10, 100), (30, 10, 30), (5, 10, 10)):
        pipe = pipeline(retrieval="hybrid", embedding_model="hashing", fusion_pool=pool,
                        embedding_top_k=top_k)
        asked.clear()
        monkeypatch.setattr(pipe, "vector_hits",
                            lambda kb, q, k: asked.append(("vector", k)) or [])
        monkeypatch.setattr(pipe, "keyword_hits",
                            lambda kb, q, k: asked.append(("keyword", k)) or [])
        pipe.retrieve(None, "q")
        # The pool is never smaller than the final list.
        assert asked == [("vector", expected), ("keyword", expected)]


def test_a_chunk_both_lists_rank_well_beats_one_only_one_list_ranks_first() -> None:
    # Chunk 7 is 12th in both lists: cutting each list to the final 10 before fusing
    # would lose it; over the pools it outscores every chunk that only one list found.
    vector = [_Hit(i, 1.0) for i in range(100, 111)] + [_Hit(7, 0.5)]
    keyword = [_Hit(i, 1.0) for i in range(200, 211)] + [_Hit(7, 0.5)]
    fused = reciprocal_rank_fusion([(vector, 0.5), (keyword, 0.5)], k=60, top_k=10)
    assert fused[0].chunk == 7
    cut = reciprocal_rank_fusion([(vector[:10], 0.5), (keyword[:10], 0.5)], k=60, top_k=10)
    assert 7 not in [hit.chunk for hit in cut]


def test_fusion_ties_break_on_chunk_order_and_weights_decide_otherwise() -> None:
    # Chunks 3 and 5 each top one list: equal weights tie them, the lower chunk id first.
    lists = ([_Hit(5, 0.9)], [_Hit(3, 0.9)])
    tied = reciprocal_rank_fusion([(lists[0], 0.5), (lists[1], 0.5)], k=60, top_k=2)
    assert [hit.chunk for hit in tied] == [3, 5]
    assert tied[0].score == tied[1].score
    leaning = reciprocal_rank_fusion([(lists[0], 0.6), (lists[1], 0.4)], k=60, top_k=2)
    assert [hit.chunk for hit in leaning] == [5, 3]


def test_lexical_rerank_weighs_rare_words_over_common_ones() -> None:
    texts = ["how do i do it", "apt purge deletes configuration"]
    # Unweighted, the three question words "how do i" outvote the one content word.
    plain = lexical_rerank("how do i purge", texts)
    assert plain is not None and plain[0] > plain[1]
    idf = {"how": 0.1, "do": 0.1, "i": 0.1, "purge": 3.0}
    weighted = lexical_rerank("how do i purge", texts, weight=lambda t: idf.get(t, 0.0))
    assert weighted == pytest.approx([0.3 / 3.3, 3.0 / 3.3])


def test_lexical_rerank_returns_none_when_it_cannot_score() -> None:
    assert lexical_rerank("?!", ["anything"]) is None
    assert lexical_rerank("zebra", ["zebra"], weight=lambda t: 0.0) is None


def test_the_reranker_never_reorders_when_it_cannot_score() -> None:
    plain = pipeline(retrieval="vector", embedding_model="hashing")
    kb = kb_of(plain, CORPUS)
    reranked = pipeline(retrieval="vector", embedding_model="hashing", rerank_model="lexical",
                        rerank_top_k=2)
    # No word of this question occurs in the corpus: every idf weight is 0.
    question = case("Quelle heure est-il maintenant, mademoiselle?")
    hits = [_Hit(5, 0.9), _Hit(0, 0.8), _Hit(3, 0.7)]
    assert reranked.rerank(kb, question.question, hits) == hits  # order and scores kept
    assert reranked.answer(question, kb).retrieved == plain.answer(question, kb).retrieved


def test_the_reranker_keeps_retrieval_order_among_equal_scores() -> None:
    pipe = pipeline(rerank_model="lexical", rerank_top_k=3)
    kb = kb_of(pipe, CORPUS)
    # Chunks 0, 2 and 3 (passages 1, 3, 4) all lack "purge"; chunk 1 has it.
    hits = [_Hit(3, 0.9), _Hit(0, 0.8), _Hit(1, 0.7), _Hit(2, 0.6)]
    order = [hit.chunk for hit in pipe.rerank(kb, "purge", hits)]
    assert order == [1, 3, 0]


def test_idf_weighting_puts_the_rare_word_first_on_a_real_kb() -> None:
    pipe = pipeline(rerank_model="lexical", embedding_top_k=6, rerank_top_k=6)
    kb = kb_of(pipe, CORPUS)
    answer = pipe.answer(case("How do I purge a package?"), kb)
    assert answer.retrieved[0].passage_id == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-0.5, 0.0, 0.25, 0.5, 0.75, 1.0]), max_size=40),
       st.integers(min_value=0, max_value=45))
def test_top_equals_a_full_sort_with_ties_in_row_order(values: list[float], k: int) -> None:
    array = np.asarray(values, dtype=np.float32)
    expected = sorted(((i, float(v)) for i, v in enumerate(values) if v > 0),
                      key=lambda item: (-item[1], item[0]))[:k]
    assert vector_search.top(array, k) == expected


def test_both_scan_backends_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((500, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    stored = vector_search.stored(matrix)
    query = matrix[17]
    default = vector_search.scores(stored, query)
    monkeypatch.setattr(vector_search, "_simsimd", False)  # force the numpy scan
    assert vector_search.backend() == "numpy"
    fallback = vector_search.scores(stored, query)
    assert np.allclose(default, fallback, atol=1e-5)
    assert vector_search.top(fallback, 1)[0][0] == 17
    # The float32 copy is made once per matrix and reused.
    assert vector_search._float32(stored) is vector_search._float32(stored)


class _Float16SumKernel:
    """A stand-in for simsimd on an AVX-512 FP16 CPU: float16 dot products summed in float16."""

    @staticmethod
    def cdist(query: np.ndarray, rows: np.ndarray, metric: str, out_dtype: str) -> np.ndarray:
        out = np.empty((1, len(rows)), dtype=np.float32)
        for i, row in enumerate(rows):
            total = np.float16(0)
            for a, b in zip(query[0], row, strict=True):
                total = np.float16(total + np.float16(a * b))
            out[0, i] = total
        return out


class _Float32SumKernel:
    @staticmethod
    def cdist(query: np.ndarray, rows: np.ndarray, metric: str, out_dtype: str) -> np.ndarray:
        return (rows.astype(np.float64) @ query[0].astype(np.float64))[None, :].astype(np.float32)


class _BrokenKernel:
    @staticmethod
    def cdist(*args: object, **kwargs: object) -> np.ndarray:
        raise RuntimeError("no kernel for this CPU")


def test_the_probe_accepts_only_a_kernel_that_sums_in_float32() -> None:
    assert vector_search.accumulates_in_float32(_Float32SumKernel())
    assert not vector_search.accumulates_in_float32(_Float16SumKernel())
    assert not vector_search.accumulates_in_float32(_BrokenKernel())


class _SwitchableKernel:
    """simsimd on an AVX-512 FP16 CPU: float16 sums until its "sapphire" kernels are off."""

    def __init__(self) -> None:
        self.capabilities = {"serial": True, "sapphire": True}

    def get_capabilities(self) -> dict[str, bool]:
        return dict(self.capabilities)

    def disable_capability(self, name: str) -> None:
        self.capabilities[name] = False

    def cdist(self, query: np.ndarray, rows: np.ndarray, metric: str, out_dtype: str,
              threads: int = 1) -> np.ndarray:
        kernel = _Float16SumKernel if self.capabilities["sapphire"] else _Float32SumKernel
        return kernel.cdist(query, rows, metric, out_dtype)


def test_a_float16_summing_kernel_is_switched_off_then_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    kernel = _SwitchableKernel()
    monkeypatch.setattr(vector_search, "_simsimd", None)
    monkeypatch.setitem(sys.modules, "simsimd", kernel)
    assert vector_search.backend() == "simsimd"
    assert kernel.capabilities["sapphire"] is False


def test_simsimd_is_used_only_where_it_sums_in_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(vector_search, "_simsimd", None)
    monkeypatch.setitem(sys.modules, "simsimd", _Float16SumKernel())
    assert vector_search.backend() == "numpy"
    monkeypatch.setattr(vector_search, "_simsimd", None)
    monkeypatch.setitem(sys.modules, "simsimd", _Float32SumKernel())
    assert vector_search.backend() == "simsimd"
