"""Unit tests of the built-in pipeline: config, KB cache, retrieval modes, rerank, generation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core.errors import CacheWarning, ConfigError
from pytest_ragev.dataset import load_dataset
from pytest_ragev.pipelines.builtin import (
    extractive_answer,
    lexical_rerank,
    reciprocal_rank_fusion,
)
from pytest_ragev.pipelines.builtin.pipeline import _Hit
from tests._remote_server import Reply, ScriptedServer
from tests.unit.pipelines.builtin._builtin import case, kb_of, pipeline

REPO = Path(__file__).resolve().parents[4]
CORPUS = {
    1: "The Eiffel Tower in Paris was completed in 1889. It was built for the World's Fair.",
    2: "Mount Everest is the highest mountain on Earth. It is 8,849 metres high.",
    3: "长城是中国古代的军事防御工程。它的总长度超过两万公里。",
    4: "Python is a programming language. Guido van Rossum created it in 1991.",
}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"chunk_sise": 10}, "unknown key [pipeline] 'chunk_sise'; did you mean 'chunk_size'?"),
        ({"chunk_size": 0}, "[pipeline] chunk_size = 0 is invalid"),
        ({"chunk_size": 50, "chunk_overlap": 50}, "overlap must be smaller than chunk_size"),
        ({"retrieval": "semantic"}, "[pipeline] retrieval = 'semantic' is invalid"),
        ({"retrieval": "vector"}, "retrieval = 'vector' needs embedding_model"),
        ({"separators": "。"}, "[pipeline] separators = '。' is invalid"),
        ({"keyword_threshold": 2}, "[pipeline] keyword_threshold = 2 is invalid"),
        ({"chat": {"model": "extractive", "temprature": 0}}, "unknown key [pipeline.chat] 'temprature'"),
        ({"chat": {"model": "gpt-x"}}, "[pipeline.chat] base_url is required"),
        ({"fusion": "max"}, '[pipeline] fusion = \'max\' is invalid; use "convex" or "rrf"'),
        ({"fusion_pool": 0}, "[pipeline] fusion_pool = 0 is invalid"),
        ({"retrieval": "hybrid", "embedding_model": "hashing", "vector_weight": 0,
          "keyword_weight": 0}, "needs a positive weight on at least one list"),
        ({"retrieval": "vector", "embedding_model": "hashing", "passage_prefix": 3},
         "[pipeline] passage_prefix = 3 is invalid"),
    ],
)
def test_config_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        pipeline(**options)
    assert message in str(excinfo.value)
    assert str(excinfo.value).startswith("ragev.toml: ")


def test_snapshot_has_every_default_and_keys_separate_kb_from_answer_knobs() -> None:
    base = pipeline()
    snapshot = base.snapshot()
    assert snapshot["chunk_size"] == 1024 and snapshot["chunk_overlap"] == 50
    assert snapshot["separators"] == ["\n\n", "\n", "。"]
    assert snapshot["retrieval"] == "keyword" and snapshot["embedding_top_k"] == 10
    # The measured defaults (docs/pipelines.md, benchmarks/bench_retrieval_quality.py).
    assert (snapshot["fusion"], snapshot["vector_weight"], snapshot["keyword_weight"],
            snapshot["fusion_pool"], snapshot["rrf_k"]) == ("convex", 0.9, 0.1, 100, 5)
    assert snapshot["rerank_model"] is None and snapshot["rerank_top_k"] == 10
    assert snapshot["chat"]["model"] == "extractive"
    # A retrieval knob changes the answers but not the knowledge base.
    other = pipeline(embedding_top_k=3)
    assert other.kb_key() == base.kb_key() and other.answer_key() != base.answer_key()
    chunked = pipeline(chunk_size=128)
    assert chunked.kb_key() != base.kb_key()


def test_keyword_retrieval_finds_english_and_chinese() -> None:
    pipe = pipeline()
    kb = kb_of(pipe, CORPUS)
    answer = pipe.answer(case("When was the Eiffel Tower completed?"), kb)
    assert answer.retrieved[0].passage_id == 1
    assert "1889" in answer.text
    answer = pipe.answer(case("长城的总长度是多少？", qid=2), kb)
    assert answer.retrieved[0].passage_id == 3
    assert "两万公里" in answer.text


def test_threshold_cuts_and_fallback_when_nothing_is_retrieved() -> None:
    loose = pipeline()
    strict = pipeline(keyword_threshold=0.9, chat={"fallback_response": "no idea"})
    kb = kb_of(loose, CORPUS)
    question = case("Which mountain is the highest mountain on Earth Paris?")
    assert len(loose.answer(question, kb).retrieved) > len(strict.answer(question, kb).retrieved)
    empty = strict.answer(case("zebra quantum banana", qid=2), kb)
    assert empty.retrieved == [] and empty.text == "no idea" and empty.meta["fallback"] is True


def test_chunk_size_changes_chunks_and_results_on_the_sample_dataset() -> None:
    dataset = load_dataset(REPO / "dataset" / "samples")
    results = {}
    for size in (128, 512):
        pipe = pipeline(chunk_size=size, chunk_overlap=20)
        kb = kb_of(pipe, dict(dataset.corpus.items()))
        ranked = [
            [c.passage_id for c in pipe.answer(pair, kb).retrieved] for pair in dataset.pairs[:30]
        ]
        results[size] = (kb.chunk_count, ranked)
    assert results[128][0] > results[512][0]
    assert results[128][1] != results[512][1]


def test_rrf_weights_and_order() -> None:
    fused = reciprocal_rank_fusion(
        [([_Hit(1, 0.9), _Hit(2, 0.8)], 0.7), ([_Hit(2, 5.0), _Hit(3, 4.0)], 0.3)], k=60, top_k=3
    )
    scores = {hit.chunk: hit.score for hit in fused}
    assert scores[1] == pytest.approx(0.7 / 61)
    assert scores[2] == pytest.approx(0.7 / 62 + 0.3 / 61)
    assert scores[3] == pytest.approx(0.3 / 62)
    assert [hit.chunk for hit in fused] == [2, 1, 3]


def test_vector_and_hybrid_retrieval_with_the_hashing_embedder() -> None:
    for mode in ("vector", "hybrid"):
        pipe = pipeline(retrieval=mode, embedding_model="hashing")
        kb = kb_of(pipe, CORPUS)
        assert kb.vectors is not None and kb.vectors.shape[0] == kb.chunk_count
        answer = pipe.answer(case("Who created the Python programming language?"), kb)
        assert answer.retrieved[0].passage_id == 4, mode


def test_missing_embedding_model_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Caught when the config is read (before any KB build), with or without the extra.
    import pytest_ragev.pipelines.builtin.models as models

    monkeypatch.setattr(models, "_extra_installed", lambda: True)
    with pytest.raises(ConfigError, match="never downloaded"):
        pipeline(tmp_path, retrieval="vector", embedding_model="no-such-model-dir")


def test_lexical_rerank_and_its_fallback() -> None:
    assert lexical_rerank("eiffel tower", ["The Eiffel Tower", "a tower", "nothing"]) == [
        1.0, 0.5, 0.0
    ]
    pipe = pipeline(rerank_model="lexical", rerank_top_k=1)
    kb = kb_of(pipe, CORPUS)
    answer = pipe.answer(case("Eiffel Tower Paris 1889"), kb)
    assert [c.passage_id for c in answer.retrieved] == [1]
    # A threshold nobody reaches leaves nothing: the retrieval list is kept (the seed's rule).
    strict = pipeline(rerank_model="lexical", rerank_threshold=1.0)
    kept = strict.answer(case("Eiffel Tower height metres unknownword", qid=2), kb)
    assert kept.retrieved and kept.retrieved == pipeline().answer(
        case("Eiffel Tower height metres unknownword", qid=2), kb
    ).retrieved


def test_extractive_answer_picks_matching_sentences_within_the_budget() -> None:
    contexts = [
        "Paris is in France. The Eiffel Tower was completed in 1889. It is made of iron.",
        "The tower is 330 metres tall.",
    ]
    assert extractive_answer("When was the Eiffel Tower completed?", contexts, max_tokens=8) == (
        "The Eiffel Tower was completed in 1889."
    )
    longer = extractive_answer("How tall is the Eiffel Tower?", contexts, max_tokens=40)
    assert "330 metres" in longer and "Eiffel Tower was completed" in longer
    chinese = extractive_answer("长城有多长？", ["长城是中国古代的军事防御工程。它的总长度超过两万公里。"],
                                max_tokens=100)
    assert "长城" in chinese and " " not in chinese


def test_kb_disk_cache_reuse_invalidation_and_damage(tmp_path: Path) -> None:
    pipe = pipeline()
    first = kb_of(pipe, CORPUS, cache_dir=tmp_path)
    assert not first.loaded_from_cache
    again = kb_of(pipeline(), CORPUS, cache_dir=tmp_path)
    assert again.loaded_from_cache and again.chunk_count == first.chunk_count
    assert [c.text for c in again.chunks] == [c.text for c in first.chunks]
    question = case("Eiffel Tower completed")
    assert pipe.answer(question, again) == pipe.answer(question, first)
    other = kb_of(pipeline(chunk_size=40, chunk_overlap=5), CORPUS, cache_dir=tmp_path)
    assert not other.loaded_from_cache
    (entry,) = [p for p in tmp_path.iterdir() if (p / "kb.json").exists()
                and p.name == first.key[:16]]
    (entry / "chunk_text.utf8").write_text("broken", encoding="utf-8")
    with pytest.warns(CacheWarning, match="damaged"):
        rebuilt = kb_of(pipeline(), CORPUS, cache_dir=tmp_path)
    assert not rebuilt.loaded_from_cache


def test_openai_compatible_generation(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, {
        "choices": [{"message": {"role": "assistant", "content": "It was completed in 1889."}}],
        "usage": {"total_tokens": 12},
    })
    pipe = pipeline(chat={"model": "local-llm", "base_url": f"{server.url}/v1"})
    kb = kb_of(pipe, CORPUS)
    answer = pipe.answer(case("When was the Eiffel Tower completed?"), kb)
    assert answer.text == "It was completed in 1889."
    (seen,) = server.seen
    assert seen.path == "/v1/chat/completions" and seen.body["model"] == "local-llm"
    assert "Eiffel Tower" in seen.body["messages"][-1]["content"]
    assert pipe.snapshot()["chat"]["model"] == "local-llm"
