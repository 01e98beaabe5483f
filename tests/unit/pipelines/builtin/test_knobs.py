"""Every retrieval, rerank and generation knob changes what the pipeline does.

Each test fails if its knob were ignored (checked by breaking the code on purpose):
vector_threshold, vector_weight/keyword_weight, fusion, the vector list in hybrid fusion,
embedding_top_k, rerank_top_k and context_chunks. The offline "hashing" embedder stands
in for a model.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_ragev.pipelines.builtin.config import unread_knobs
from pytest_ragev.pipelines.builtin.pipeline import _Hit
from tests._remote_server import Reply, ScriptedServer
from tests.unit.pipelines.builtin._builtin import case, kb_of, pipeline

#: Eight passages about towers (so more hits than any small top_k), each one sentence.
CORPUS = {
    1: "The Eiffel Tower stands in Paris.",
    2: "The Tokyo Tower is painted orange and white.",
    3: "The CN Tower in Toronto was the tallest tower for decades.",
    4: "Big Ben is the bell in the clock tower in London.",
    5: "The Leaning Tower of Pisa tilts because of soft ground.",
    6: "The Tower of London once held the crown jewels.",
    7: "A water tower stores water high above the town.",
    8: "Bananas grow in tropical climates.",
}


def ids(answer: Any) -> list[int]:
    return [chunk.passage_id for chunk in answer.retrieved]


QUESTION = case("Which tower is in Paris?")


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
def test_embedding_top_k_caps_the_retrieved_chunks(mode: str) -> None:
    wide = pipeline(retrieval=mode, embedding_model="hashing", embedding_top_k=10)
    kb = kb_of(wide, CORPUS)
    assert len(wide.answer(QUESTION, kb).retrieved) > 2
    narrow = pipeline(retrieval=mode, embedding_model="hashing", embedding_top_k=2)
    assert len(narrow.answer(QUESTION, kb).retrieved) == 2
    assert ids(narrow.answer(QUESTION, kb)) == ids(wide.answer(QUESTION, kb))[:2]


def test_vector_threshold_drops_dissimilar_chunks() -> None:
    loose = pipeline(retrieval="vector", embedding_model="hashing")
    kb = kb_of(loose, CORPUS)
    everything = loose.answer(QUESTION, kb).retrieved
    scores = sorted(chunk.score for chunk in everything)
    cut = (scores[0] + scores[-1]) / 2
    strict = pipeline(retrieval="vector", embedding_model="hashing", vector_threshold=cut)
    kept = strict.answer(QUESTION, kb).retrieved
    assert kept and all(chunk.score >= cut for chunk in kept)
    assert len(kept) == sum(score >= cut for score in scores) < len(everything)
    # Nothing reaches 1.0 here: the generator falls back.
    none = pipeline(retrieval="vector", embedding_model="hashing", vector_threshold=1.0)
    assert none.answer(QUESTION, kb).meta.get("fallback") is True


def test_keyword_threshold_applies_in_hybrid_mode_too() -> None:
    # Plain terms: the question's "which", "is" and "in" keep every chunk below 1.0 (the
    # default analyzer drops them as stop words, and the Eiffel chunk would reach 1.0).
    loose = pipeline(retrieval="hybrid", embedding_model="hashing", vector_threshold=1.0,
                     analyzer="plain")
    kb = kb_of(loose, CORPUS)
    keyword_only = loose.answer(QUESTION, kb).retrieved
    assert keyword_only  # the vector list is empty, the keyword list fills the answer
    strict = pipeline(retrieval="hybrid", embedding_model="hashing", vector_threshold=1.0,
                      keyword_threshold=1.0, analyzer="plain")
    assert strict.answer(QUESTION, kb).retrieved == []


def _fixed_lists(pipe: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Vector ranks chunks 0, 1; keyword ranks 2, 1, 3 (chunk i is passage i + 1 here).
    monkeypatch.setattr(pipe, "vector_hits", lambda kb, q, k: [_Hit(0, 0.9), _Hit(1, 0.8)])
    monkeypatch.setattr(pipe, "keyword_hits",
                        lambda kb, q, k: [_Hit(2, 0.9), _Hit(1, 0.5), _Hit(3, 0.4)])


def test_hybrid_fuses_both_lists_with_the_configured_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rrf = pipeline(retrieval="hybrid", embedding_model="hashing", fusion="rrf",
                   vector_weight=0.7, keyword_weight=0.3, rrf_k=60)
    kb = kb_of(rrf, CORPUS)
    _fixed_lists(rrf, monkeypatch)
    fused = {hit.chunk: hit.score for hit in rrf.retrieve(kb, "q")}
    assert fused == pytest.approx({
        0: 0.7 / 61, 1: 0.7 / 62 + 0.3 / 62, 2: 0.3 / 61, 3: 0.3 / 63,
    })
    keyword_heavy = pipeline(retrieval="hybrid", embedding_model="hashing", fusion="rrf",
                             vector_weight=0.1, keyword_weight=0.9, rrf_k=1)
    _fixed_lists(keyword_heavy, monkeypatch)
    order = [hit.chunk for hit in keyword_heavy.retrieve(kb, "q")]
    assert order == [2, 1, 3, 0]
    fused = {hit.chunk: hit.score for hit in keyword_heavy.retrieve(kb, "q")}
    assert fused[0] == pytest.approx(0.1 / 2) and fused[2] == pytest.approx(0.9 / 2)


def test_default_fusion_is_convex_over_min_max_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    default = pipeline(retrieval="hybrid", embedding_model="hashing")
    assert (default.config.fusion, default.config.vector_weight,
            default.config.keyword_weight) == ("convex", 0.9, 0.1)
    kb = kb_of(default, CORPUS)
    _fixed_lists(default, monkeypatch)
    fused = {hit.chunk: hit.score for hit in default.retrieve(kb, "q")}
    # Vector 0.9, 0.8 -> 1, 0; keyword 0.9, 0.5, 0.4 -> 1, 0.2, 0.
    assert fused == pytest.approx({0: 0.9, 1: 0.1 * 0.2, 2: 0.1, 3: 0.0})
    even = pipeline(retrieval="hybrid", embedding_model="hashing", vector_weight=1.0,
                    keyword_weight=1.0)
    _fixed_lists(even, monkeypatch)
    assert [hit.chunk for hit in even.retrieve(kb, "q")] == [0, 2, 1, 3]  # 0 and 2 tie at 0.5


def test_convex_fusion_uses_raw_bm25_scores_not_the_clipped_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipe = pipeline(retrieval="hybrid", embedding_model="hashing", vector_weight=0.0,
                    keyword_weight=1.0)
    kb = kb_of(pipe, CORPUS)
    # Both keyword hits clip to 1.0, but one scored twice the other: the raw score decides.
    monkeypatch.setattr(pipe, "vector_hits", lambda kb, q, k: [])
    monkeypatch.setattr(pipe, "keyword_hits",
                        lambda kb, q, k: [_Hit(4, 1.0, 8.0), _Hit(5, 1.0, 4.0), _Hit(6, 0.5, 2.0)])
    fused = {hit.chunk: hit.score for hit in pipe.retrieve(kb, "q")}
    assert fused == pytest.approx({4: 1.0, 5: 1 / 3, 6: 0.0})


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_rerank_top_k_caps_the_reranked_list(top_k: int) -> None:
    plain = pipeline()
    kb = kb_of(plain, CORPUS)
    question = case("Which tower in London held the crown jewels?")
    retrieved = plain.answer(question, kb).retrieved
    assert len(retrieved) > 3
    reranked = pipeline(rerank_model="lexical", rerank_top_k=top_k).answer(question, kb)
    assert len(reranked.retrieved) == top_k
    assert ids(reranked)[0] == 6


def test_context_chunks_limits_what_the_extractive_generator_reads() -> None:
    question = case("Which tower is tall, orange or in Paris?")
    pipe = pipeline(chat={"context_chunks": 3, "max_tokens": 200})
    kb = kb_of(pipe, CORPUS)
    answer = pipe.answer(question, kb)
    first = answer.retrieved[0].text
    assert answer.text != first  # with three chunks, more than the first is used
    one = pipeline(chat={"context_chunks": 1, "max_tokens": 200}).answer(question, kb)
    assert one.retrieved == answer.retrieved  # retrieval is unchanged ...
    assert one.text == first  # ... only the first chunk reaches the generator


def test_context_chunks_limits_what_the_chat_model_sees(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, {"choices": [{"message": {"content": "ok"}}]})
    kb = kb_of(pipeline(), CORPUS)
    for chunks in (1, 2):
        pipe = pipeline(chat={"model": "m", "base_url": f"{server.url}/v1",
                              "context_chunks": chunks})
        pipe.answer(QUESTION, kb)
    one, two = (seen.body["messages"][-1]["content"] for seen in server.seen)
    assert "[1] " in one and "[2] " not in one
    assert "[2] " in two and "[3] " not in two


#: A value far from the default for every knob unread_knobs may name.
_ODD = {"vector_weight": 0.05, "keyword_weight": 0.95, "rrf_k": 1, "embedding_model": "hashing",
        "vector_threshold": 0.9, "keyword_threshold": 0.9, "bm25_k1": 0.1, "bm25_b": 0.0,
        "rerank_top_k": 1, "rerank_threshold": 0.99, "fusion": "rrf", "fusion_pool": 3}


@pytest.mark.parametrize(("mode", "rerank", "idle"), [
    ("keyword", None, {"vector_weight", "keyword_weight", "rrf_k", "fusion", "fusion_pool",
                       "embedding_model", "vector_threshold", "rerank_top_k",
                       "rerank_threshold"}),
    # The lexical reranker reads the BM25 index's idf: bm25_k1/bm25_b still count.
    ("vector", "lexical", {"vector_weight", "keyword_weight", "rrf_k", "fusion", "fusion_pool",
                           "keyword_threshold"}),
    ("vector", None, {"vector_weight", "keyword_weight", "rrf_k", "fusion", "fusion_pool",
                      "keyword_threshold", "bm25_k1", "bm25_b", "rerank_top_k",
                      "rerank_threshold"}),
    ("hybrid", "lexical", set()),
])
def test_the_knobs_said_to_have_no_effect_have_none(
    mode: str, rerank: str | None, idle: set[str]
) -> None:
    base: dict[str, Any] = {"retrieval": mode}
    if rerank is not None:
        base["rerank_model"] = rerank
    if mode != "keyword":
        base["embedding_model"] = "hashing"
    questions = [case(q) for q in ("Which tower is in Paris?", "What holds the crown jewels?",
                                   "Where do bananas grow?")]
    reference = pipeline(**base)
    kb = kb_of(reference, CORPUS)
    expected = [reference.answer(q, kb) for q in questions]
    every = {key: value for key, value in _ODD.items() if key not in base}
    named = {key for key, _ in unread_knobs(pipeline(**base, **every).config,
                                            {**base, **every})}
    assert named == idle - set(base)
    for key in named:
        changed = pipeline(**base, **{key: _ODD[key]})
        # A knob that shapes the index gets its own knowledge base, as a run would build.
        answers = [changed.answer(q, kb_of(changed, CORPUS)) for q in questions]
        assert answers == expected, f"{key} changed the answers in {mode} mode"
