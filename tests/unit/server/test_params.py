"""params beside the report's nested snapshot: the original's flat ChatManage keys."""

from __future__ import annotations

from pytest_ragev.server.params import chat_manage

REQUEST = {"config": "faq", "knowledge_base_id": "faq", "embedding_id": None, "chat_id": None,
           "rerank_id": None, "variant": [], "limit": None, "profile": None}
PIPELINE = {"name": "builtin", "chunk_size": 512, "embedding_top_k": 10,
            "keyword_threshold": 0.0, "vector_threshold": 0.2, "rerank_model": None,
            "rerank_top_k": 10, "rerank_threshold": 0.0,
            "chat": {"model": "qwen2.5", "max_tokens": 96, "temperature": 0.0, "seed": 7,
                     "prompt": "请根据资料回答", "fallback_response": "Ich weiß es nicht."}}


def test_the_builtin_pipelines_knobs_as_chat_manage_keys() -> None:
    params = {"dataset": {"id": "faq"}, "pipeline": PIPELINE, "metrics": {"profile": "weknora"}}
    flat = chat_manage(params, REQUEST)
    assert flat["embedding_top_k"] == 10 and flat["vector_threshold"] == 0.2
    assert flat["keyword_threshold"] == 0.0 and flat["rerank_top_k"] == 10
    assert flat["rerank_model_id"] == "" and flat["rerank_threshold"] == 0.0
    assert flat["chat_model_id"] == "qwen2.5" and flat["knowledge_base_ids"] == ["faq"]
    assert flat["summary_config"] == {"max_tokens": 96, "temperature": 0.0, "seed": 7,
                                      "prompt": "请根据资料回答"}
    assert flat["fallback_response"] == "Ich weiß es nicht."
    assert {k: flat[k] for k in params} == params  # the nested snapshot, unchanged


def test_the_requests_model_ids_win_and_a_report_key_is_never_replaced() -> None:
    request = {**REQUEST, "chat_id": "qwen-long", "rerank_id": "lexical3"}
    params = {"pipeline": {**PIPELINE, "rerank_model": "lexical"}, "embedding_top_k": 3}
    flat = chat_manage(params, request)
    assert flat["chat_model_id"] == "qwen-long" and flat["rerank_model_id"] == "lexical3"
    assert flat["embedding_top_k"] == 3  # a flat key the report has stays as it is


def test_a_pipeline_of_ones_own_gets_only_the_keys_it_has() -> None:
    flat = chat_manage({"pipeline": {"name": "mine:build", "delay": 0.1}}, REQUEST)
    assert set(flat) == {"knowledge_base_ids", "pipeline"}


def test_a_reranker_behind_an_api_is_the_rerank_model_id() -> None:
    pipeline = {**PIPELINE, "rerank": {"base_url": "http://127.0.0.1:8081/v1",
                                       "model": "bge-reranker-v2-m3"}}
    del pipeline["rerank_model"]
    assert chat_manage({"pipeline": pipeline}, REQUEST)["rerank_model_id"] == (
        "bge-reranker-v2-m3")
