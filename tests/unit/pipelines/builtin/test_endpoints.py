"""The built-in pipeline with its models behind HTTP (``[pipeline.embedding]``,
``[pipeline.rerank]``), against a real model server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_ragev.core.errors import ConfigError, PipelineError
from pytest_ragev.core.types import PipelineSettings, QAPair
from pytest_ragev.pipelines import build_pipeline, is_io_bound
from pytest_ragev.pipelines.builtin import endpoints
from pytest_ragev.pipelines.builtin.config import unread_knobs
from pytest_ragev.pipelines.builtin.endpoints import QueryBatcher
from tests._remote_server import ModelServer, Reply, ScriptedServer, model_vector

CANARY = "sk-pipeline-models-2b7e-never-print"
CORPUS = {
    1: "The Eiffel Tower is 330 metres tall and stands in Paris.",
    2: "Der Kölner Dom ist eine Kathedrale in Köln.",
    3: "长城是中国古代的军事防御工程。",
    4: "Красная площадь находится в Москве.",
    5: "東京タワーは東京都港区にある電波塔です。",
    6: "The Tower of London held the crown jewels.",
}


#: The retries' waits are recorded, not slept through (``waits`` in tests/unit/conftest.py).
pytestmark = pytest.mark.usefixtures("waits")


def case(question: str, qid: int = 1) -> QAPair:
    return QAPair(qid=qid, question=question, pids=(), passages=(), aid=None, answer=None)


def pipeline(url: str, **options: Any) -> Any:
    table: dict[str, Any] = {"retrieval": "hybrid",
                             "embedding": {"base_url": url + "/v1", "model": "emb-a"}, **options}
    return build_pipeline(PipelineSettings(name="builtin", options=table, base_dir=Path.cwd()),
                          source="ragev.toml")


def test_hybrid_retrieval_with_the_endpoint_and_progress(server: ScriptedServer,
                                                         tmp_path: Path) -> None:
    model = ModelServer(server)
    pipe = pipeline(server.url, embedding={"base_url": server.url + "/v1", "model": "emb-a",
                                           "batch_size": 2, "concurrency": 2})
    seen: list[tuple[int, int]] = []
    kb = pipe.build_knowledge_base(CORPUS, fingerprint="c" * 64, cache_dir=tmp_path,
                                   progress=lambda done, of: seen.append((done, of)))
    assert model.count("embeddings") == 3 and sorted(model.embedded_texts()) == sorted(CORPUS.values())
    assert kb.vectors is not None and kb.vectors.shape == (6, 32)
    expected = np.asarray(model_vector("emb-a", CORPUS[1]), dtype=np.float32)
    np.testing.assert_allclose(kb.vectors[0], expected / np.linalg.norm(expected), atol=1e-3)
    assert seen[0] == (0, 12) and seen[-1] == (12, 12) and len(seen) > 3
    answer = pipe.answer(case("How tall is the Eiffel Tower in Paris?"), kb)
    assert answer.retrieved[0].passage_id == 1
    assert model.count("embeddings") == 4  # the question, one request
    # Built again from the cache: no request for the corpus.
    again = pipeline(server.url).build_knowledge_base(CORPUS, fingerprint="c" * 64,
                                                      cache_dir=tmp_path)
    assert again.loaded_from_cache and model.count("embeddings") == 4


def test_the_vectors_identity_is_endpoint_model_and_dimensions(server: ScriptedServer) -> None:
    base = pipeline(server.url)
    same = pipeline(server.url, embedding={"base_url": server.url + "/v1", "model": "emb-a",
                                           "timeout": 5, "max_retries": 9, "batch_size": 7,
                                           "api_key_env": "OTHER_KEY"})
    assert base.kb_key() == same.kb_key() and base.answer_key() == same.answer_key()
    for other in ({"base_url": server.url + "/v1", "model": "emb-b"},
                  {"base_url": server.url + "/v1", "model": "emb-a", "dimensions": 16},
                  {"base_url": server.url + "/v2", "model": "emb-a"}):
        assert pipeline(server.url, embedding=other).kb_key() != base.kb_key()
    # The reranker shapes answers, not the KB.
    reranked = pipeline(server.url, rerank={"base_url": server.url, "model": "r"})
    assert reranked.kb_key() == base.kb_key() and reranked.answer_key() != base.answer_key()


def test_questions_asked_together_go_in_one_request() -> None:
    calls: list[list[str]] = []
    gate = threading.Barrier(8)

    def send(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return [[float(len(t))] for t in texts]

    batcher = QueryBatcher(send, batch_size=5)
    results: dict[int, list[float]] = {}

    def ask(i: int) -> None:
        gate.wait()
        results[i] = batcher("q" * (i + 1))

    original = endpoints.LINGER_S
    endpoints.LINGER_S = 0.2  # long enough for all eight threads to join on a busy machine
    try:
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        endpoints.LINGER_S = original
    assert results == {i: [float(i + 1)] for i in range(8)}
    assert sorted(len(c) for c in calls) == [3, 5]


def test_a_failed_batch_fails_each_of_its_questions() -> None:
    def send(texts: list[str]) -> list[list[float]]:
        raise PipelineError("[pipeline.embedding] model 'm': down")

    batcher = QueryBatcher(send, batch_size=4)
    with pytest.raises(PipelineError, match="down"):
        batcher("Wie hoch?")
    with pytest.raises(PipelineError, match="down"):
        batcher("多高？")  # the batcher is not left stuck


def test_the_rerank_endpoint_reorders_and_remembers_scores(server: ScriptedServer) -> None:
    model = ModelServer(server)
    pipe = pipeline(server.url, rerank={"base_url": server.url + "/v1", "model": "rr-1",
                                        "api": "tei"}, rerank_top_k=2)
    kb = pipe.build_knowledge_base(CORPUS, fingerprint="r" * 64)
    question = case("Which tower held the crown jewels in London?")
    answer = pipe.answer(question, kb)
    assert [c.passage_id for c in answer.retrieved] == [6, 1]
    assert answer.retrieved[0].score == pytest.approx(6 / 8)  # 6 of its 8 words
    assert model.count("rerank") == 1
    # Another configuration with the same reranker (a threshold): no new request.
    strict = pipeline(server.url, rerank={"base_url": server.url + "/v1", "model": "rr-1",
                                          "api": "tei"}, rerank_threshold=0.5)
    assert [c.passage_id for c in strict.answer(question, kb).retrieved] == [6]
    assert model.count("rerank") == 1


def test_environment_preflight_and_io_bound(server: ScriptedServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGEV_EMB_GONE", raising=False)
    monkeypatch.delenv("RAGEV_RR_GONE", raising=False)
    pipe = pipeline(server.url, embedding={"base_url": server.url + "/v1", "model": "e",
                                           "api_key_env": "RAGEV_EMB_GONE"},
                    rerank={"base_url": server.url, "model": "r", "api_key_env": "RAGEV_RR_GONE"})
    lines = pipe.missing_environment()
    assert [line.split(" ")[0] for line in lines] == ["[pipeline.embedding]", "[pipeline.rerank]"]
    assert is_io_bound(pipe) and not is_io_bound(build_pipeline(
        PipelineSettings(name="builtin", options={}), source="ragev.toml"))
    ModelServer(server)
    assert pipeline(server.url).preflight(case("q")) is None
    assert server.seen[-1].path == "/v1/models"
    server.script.append(Reply(401, {"error": "bad key"}))
    reason = pipeline(server.url).preflight(case("q"))
    assert reason is not None and reason.startswith(
        "[pipeline.embedding] model 'emb-a': preflight: HTTP 401")


def test_an_outage_while_building_is_one_line(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(503, {"error": {"message": "model loading"}})
    with pytest.raises(PipelineError) as caught:
        pipeline(server.url, embedding={"base_url": server.url + "/v1", "model": "emb-a",
                                        "max_retries": 1}).build_knowledge_base(
            CORPUS, fingerprint="o" * 64)
    assert str(caught.value).startswith("[pipeline.embedding] model 'emb-a': ")
    assert "last: HTTP 503: model loading" in str(caught.value)


def test_the_snapshot_holds_no_secret(server: ScriptedServer) -> None:
    pipe = pipeline(server.url, embedding={
        "base_url": server.url + "/v1", "model": "emb-a",
        "extra_headers": {"Authorization": f"Bearer {CANARY}"}},
        rerank={"base_url": server.url, "model": "r", "extra_headers": {"X-Api-Key": CANARY}})
    snapshot = pipe.snapshot()
    assert snapshot["embedding"]["model"] == "emb-a" and snapshot["rerank"]["api"] == "cohere"
    assert CANARY not in json.dumps(snapshot) and CANARY not in pipe.kb_key()
    assert snapshot["embedding_model"] is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retrieval": "vector", "embedding": None, "embedding_model": "openai:text-embedding-3-small"},
         "[pipeline] embedding_model = 'openai:text-embedding-3-small' is invalid; a model behind an API is configured in [pipeline.embedding] with base_url and model (the OpenAI /v1/embeddings API: OpenAI, vLLM, Ollama's /v1, text-embeddings-inference)"),
        ({"embedding_model": "hashing"}, "[pipeline.embedding] names the embedding model already; remove one of the two"),
        ({"rerank_model": "lexical", "rerank": {"base_url": "http://h", "model": "r"}},
         "[pipeline.rerank] names the reranker already"),
        ({"rerank_model": "cohere:rerank-v3.5"}, "is configured in [pipeline.rerank] with base_url and model"),
        ({"embedding": {"base_url": "http://h/v1"}}, "[pipeline.embedding] model is required"),
        ({"retrieval": "vector", "embedding": None},
         "or name a model behind an API in [pipeline.embedding] (base_url, model)"),
    ],
)
def test_config_errors(server: ScriptedServer, options: dict[str, Any], message: str) -> None:
    table = {"retrieval": "hybrid", "embedding": {"base_url": server.url + "/v1", "model": "e"},
             **options}
    if table["embedding"] is None:
        del table["embedding"]
    with pytest.raises(ConfigError) as caught:
        build_pipeline(PipelineSettings(name="builtin", options=table), source="ragev.toml")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_embedding_table_keyword_retrieval_does_not_read(server: ScriptedServer) -> None:
    pipe = pipeline(server.url, retrieval="keyword")
    assert unread_knobs(pipe.config, {"embedding": {}}) == [
        ("embedding", 'retrieval = "keyword" embeds nothing')]
