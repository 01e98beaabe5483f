"""``clients.rerank`` against a real /rerank server on 127.0.0.1, in both API shapes."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_ragev import ConfigError, PipelineError
from pytest_ragev.clients import RerankClient, RerankConfig
from tests._remote_server import ModelServer, Reply, ScriptedServer, rerank_score

QUERY = "Wie hoch ist der Eiffelturm?"
DOCUMENTS = ["Der Eiffelturm ist 330 Meter hoch.", "埃菲尔铁塔在巴黎。",
             "Wie hoch ist der Berliner Fernsehturm?", "Der Eiffelturm steht in Paris."]


#: The retries' waits are recorded, not slept through (``waits`` in tests/unit/conftest.py).
pytestmark = pytest.mark.usefixtures("waits")


def client(url: str, **keys: Any) -> RerankClient:
    table = {"base_url": url, "model": "bge-reranker-v2-m3", **keys}
    return RerankClient(RerankConfig.from_table(table, source="ragev.toml"))


@pytest.mark.parametrize("api", ["cohere", "tei"])
def test_scores_come_back_in_document_order(server: ScriptedServer, api: str) -> None:
    model = ModelServer(server)  # the Cohere shape answers best first: the index maps back
    scores = client(server.url + "/v1", api=api).scores(QUERY, DOCUMENTS)
    assert scores == [rerank_score(QUERY, d) for d in DOCUMENTS]
    (seen,) = server.seen
    assert seen.path == "/v1/rerank" and model.count("rerank") == 1
    if api == "tei":
        assert seen.body == {"query": QUERY, "texts": DOCUMENTS, "raw_scores": False}
    else:
        assert seen.body == {"model": "bge-reranker-v2-m3", "query": QUERY, "documents": DOCUMENTS}


@pytest.mark.parametrize(
    ("api", "body", "message"),
    [
        ("cohere", [{"index": 0, "score": 0.5}], "did not answer in the 'cohere' shape {\"results\": [{\"index\": 0, \"relevance_score\": 0.9}, ...]} (Cohere, Jina, vLLM) (top-level keys: none, the body is a JSON list); set [pipeline.rerank] api to the server's: cohere, tei"),
        ("tei", {"results": []}, "did not answer in the 'tei' shape [{\"index\": 0, \"score\": 0.9}, ...] (text-embeddings-inference) (top-level keys: results)"),
        ("cohere", {"results": [{"index": 0, "relevance_score": 0.9}]}, "scored 1 of 2 documents (none for index 1); the reranker must score every document"),
        ("cohere", {"results": [{"index": 5, "relevance_score": 0.9}]}, "without a document index in 0..1 and a finite relevance_score"),
        ("tei", [{"index": 0, "score": "high"}, {"index": 1, "score": 0.1}], "a finite score"),
        ("cohere", b"Internal error", "a body that is not JSON"),
    ],
)
def test_a_malformed_reply_is_one_line(server: ScriptedServer, api: str, body: Any,
                                       message: str) -> None:
    server.default = lambda seen: Reply(200, body)
    with pytest.raises(PipelineError) as caught:
        client(server.url, api=api).scores(QUERY, DOCUMENTS[:2])
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith("[pipeline.rerank] model 'bge-reranker-v2-m3': ")


def test_faults_are_retried(server: ScriptedServer) -> None:
    ModelServer(server)
    server.script += [Reply(429, {"error": "busy"}, {"Retry-After": "1"}), Reply(502, b"bad gw")]
    assert client(server.url).scores(QUERY, DOCUMENTS[:1]) == [rerank_score(QUERY, DOCUMENTS[0])]
    assert len(server.seen) == 3


def test_config() -> None:
    config = RerankConfig.from_table({"base_url": "http://h/v1", "model": "m"}, source="r.toml")
    assert config.api == "cohere" and config.identity() == {"base_url": "http://h/v1", "model": "m"}
    with pytest.raises(ConfigError, match=r"\[pipeline.rerank\] api = 'jina' is invalid; not a "
                                          r"rerank API; use one of: cohere, tei"):
        RerankConfig.from_table({"base_url": "http://h", "model": "m", "api": "jina"}, source="r")
