"""``clients.embeddings`` against a real /v1/embeddings server on 127.0.0.1: batches,
concurrency, progress, and every fault a server can show (slow, 429 with Retry-After,
500, a malformed body, a refused connection)."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest

from pytest_ragev import ConfigError, PipelineError
from pytest_ragev.clients import EmbeddingClient, EmbeddingConfig
from tests._remote_server import (
    MODEL_DIMENSIONS,
    ModelServer,
    Reply,
    ScriptedServer,
    closed_url,
    model_vector,
)

CANARY = "sk-embed-93be-never-print"
TEXTS = ["Der Eiffelturm ist 330 Meter hoch.", "埃菲尔铁塔高三百三十米。",
         "Эйфелева башня высотой 330 метров.", "エッフェル塔の高さは330メートルです。",
         "에펠탑의 높이는 330미터입니다.", "The Eiffel Tower is 330 metres tall."]


def client(url: str, **keys: Any) -> EmbeddingClient:
    table = {"base_url": url, "model": "bge-m3", "retry_backoff": 0.01, **keys}
    return EmbeddingClient(EmbeddingConfig.from_table(table, source="ragev.toml"))


def test_one_batch_in_order_with_the_key(server: ScriptedServer,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGEV_EMB_KEY", CANARY)
    model = ModelServer(server)  # answers the data in reverse: the index puts it back
    vectors = client(server.url + "/v1", api_key_env="RAGEV_EMB_KEY").embed(TEXTS)
    assert np.array_equal(vectors, [model_vector("bge-m3", text) for text in TEXTS])
    assert vectors.dtype == np.float32
    (seen,) = server.seen
    assert seen.path == "/v1/embeddings"
    assert seen.body == {"model": "bge-m3", "input": TEXTS, "encoding_format": "base64"}
    assert seen.headers["Authorization"] == f"Bearer {CANARY}"
    assert model.count("embeddings") == 1


def test_vectors_as_json_numbers_are_read_too(server: ScriptedServer) -> None:
    # A server that ignores encoding_format answers lists: the same vectors.
    server.default = lambda seen: Reply(200, {"data": [
        {"index": i, "embedding": model_vector("bge-m3", text)} for i, text in enumerate(TEXTS)]})
    assert np.array_equal(client(server.url + "/v1").embed(TEXTS),
                          [model_vector("bge-m3", text) for text in TEXTS])
    # "float" asks for lists, for a server that refuses the field's other value.
    ModelServer(server)
    vectors = client(server.url + "/v1", encoding_format="float").embed(TEXTS[:2])
    assert server.seen[-1].body["encoding_format"] == "float"
    assert np.array_equal(vectors, [model_vector("bge-m3", text) for text in TEXTS[:2]])


@pytest.mark.parametrize("vector", ["not base64!", "AAAAAAA="])  # garbage; 5 bytes, not 4k
def test_a_vector_string_that_is_not_float32_base64_is_one_line(
    server: ScriptedServer, vector: str
) -> None:
    server.default = lambda seen: Reply(200, {"data": [{"index": 0, "embedding": vector}]})
    with pytest.raises(PipelineError) as caught:
        client(server.url + "/v1").embed(TEXTS[:1])
    assert "answered a vector string that is not base64 of float32 values" in str(caught.value)
    assert 'encoding_format = "float"' in str(caught.value) and "\n" not in str(caught.value)


def test_dimensions_are_asked_for_and_checked(server: ScriptedServer) -> None:
    ModelServer(server)
    vectors = client(server.url + "/v1", dimensions=8).embed(TEXTS[:2])
    assert vectors.shape == (2, 8) and server.seen[0].body["dimensions"] == 8
    server.script.append(Reply(200, {"data": [{"index": 0, "embedding": [0.1] * 4}]}))
    with pytest.raises(PipelineError, match="a vector of 4 dimensions, not 8; check that the "
                                            "model supports dimensions"):
        client(server.url + "/v1", dimensions=8).embed(TEXTS[:1])


def test_batches_run_concurrently_within_the_limit_with_progress(server: ScriptedServer) -> None:
    model = ModelServer(server, delay_s=0.05)
    texts = [f"passage {i} über Türme, 塔 {i}" for i in range(50)]
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def progress(done: int, of: int) -> None:
        with lock:
            seen.append((done, of))

    vectors = client(server.url + "/v1", batch_size=4, concurrency=3).embed_many(
        texts, progress=progress)
    assert np.array_equal(vectors, [model_vector("bge-m3", text) for text in texts])
    assert model.count("embeddings") == 13  # ceil(50 / 4)
    assert [len(s.body["input"]) for s in server.seen] .count(4) == 12
    assert model.max_in_flight == 3  # never more than the limit, and it was used
    assert sorted(seen)[-1] == (50, 50) and len(seen) == 13
    assert [done for done, _ in sorted(seen)] == sorted({done for done, _ in seen})


def test_429_with_retry_after_is_waited_out(server: ScriptedServer, waits: list[float]) -> None:
    ModelServer(server)
    server.script.append(Reply(429, {"error": {"message": "rate limited"}}, {"Retry-After": "2"}))
    assert np.array_equal(client(server.url + "/v1").embed(TEXTS[:1]),
                          [model_vector("bge-m3", TEXTS[0])])
    assert waits == [2.0] and len(server.seen) == 2


def test_500_after_every_retry_is_one_line(server: ScriptedServer, waits: list[float]) -> None:
    server.default = lambda seen: Reply(500, {"error": {"message": "CUDA out of memory"}})
    with pytest.raises(PipelineError) as caught:
        client(server.url + "/v1", max_retries=2).embed_many(TEXTS, progress=None)
    text = str(caught.value)
    assert text.startswith("[pipeline.embedding] model 'bge-m3': ") and "\n" not in text
    assert "failed after 3 attempt(s), last: HTTP 500: CUDA out of memory" in text


def test_a_slow_server_times_out(server: ScriptedServer, waits: list[float]) -> None:
    ModelServer(server, delay_s=1.0)
    with pytest.raises(PipelineError, match=r"last: no response within timeout = 0.2 s"):
        client(server.url + "/v1", timeout=0.2, max_retries=1).embed(TEXTS[:1])


def test_a_refused_connection_is_retried_then_one_line(waits: list[float]) -> None:
    with pytest.raises(PipelineError, match=r"failed after 2 attempt\(s\), last: cannot connect"):
        client(closed_url() + "/v1", max_retries=1).embed(TEXTS[:1])
    assert len(waits) == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>502 Bad Gateway</html>", "a body that is not JSON"),
        ({"embeddings": [[0.1, 0.2]]}, "answered without data[*].embedding (top-level keys: embeddings); [pipeline.embedding] speaks the OpenAI /v1/embeddings API (OpenAI, vLLM, Ollama's /v1, text-embeddings-inference)"),
        ([[0.1, 0.2]], "without data[*].embedding (top-level keys: none, the body is a JSON list)"),
        ({"data": [{"index": 0, "embedding": [0.1, 0.2]}]}, "answered 1 vector(s) for 2 text(s)"),
        ({"data": [{"index": 0, "embedding": [0.1, "x"]}, {"index": 1, "embedding": [0.1, 0.2]}]},
         "answered a vector that is not a list of finite numbers; check that the server returns floats"),
        ({"data": [{"index": 0, "embedding": [0.1, float("nan")]}, {"index": 1, "embedding": [0.1, 0.2]}]},
         "answered a vector that is not a list of finite numbers"),
        ({"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 1, "embedding": [0.1]}]},
         "a vector of 1 dimensions, not 2; one model must give every vector one width"),
        ({"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": []}]},
         "not a list of finite numbers"),
    ],
)
def test_a_malformed_reply_is_one_line(server: ScriptedServer, body: Any, message: str) -> None:
    server.default = lambda seen: Reply(200, body)
    with pytest.raises(PipelineError) as caught:
        client(server.url + "/v1").embed(TEXTS[:2])
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert len(server.seen) == 1  # a malformed 2xx reply is not retried


def test_the_first_failed_batch_stops_the_rest(server: ScriptedServer, waits: list[float]) -> None:
    ModelServer(server)
    server.script.append(Reply(400, {"error": {"message": "input too long"}}))
    with pytest.raises(PipelineError, match=r"HTTP 400 .*input too long"):
        client(server.url + "/v1", batch_size=1, concurrency=1).embed_many(TEXTS)
    assert len(server.seen) == 1


def test_a_key_echoed_by_the_server_never_reaches_a_message(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGEV_EMB_KEY", CANARY)
    server.default = lambda seen: Reply(200, {"data": f"no vectors for {CANARY}",
                                              CANARY: True})
    embedder = client(server.url + "/v1", api_key_env="RAGEV_EMB_KEY")
    with pytest.raises(PipelineError) as caught:
        embedder.embed(TEXTS[:1])
    assert CANARY not in str(caught.value) and "***" in str(caught.value)
    assert CANARY not in json.dumps(embedder.embedding.snapshot()) + repr(embedder)


def test_identity_and_snapshot() -> None:
    config = EmbeddingConfig.from_table(
        {"base_url": "http://h/v1", "model": "bge-m3", "dimensions": 512, "timeout": 5,
         "api_key_env": "K", "extra_headers": {"Authorization": f"Bearer {CANARY}"}},
        source="ragev.toml")
    assert config.identity() == {"base_url": "http://h/v1", "model": "bge-m3", "dimensions": 512}
    snapshot = config.snapshot()
    assert snapshot["batch_size"] == 64 and snapshot["concurrency"] == 4
    assert snapshot["encoding_format"] == "base64"
    assert "encoding_format" not in config.answer_knobs()  # the same vector either way
    assert snapshot["extra_headers"] == {"Authorization": "***"} and CANARY not in repr(config)
    assert "timeout" not in config.answer_knobs() and "batch_size" not in config.answer_knobs()
    assert MODEL_DIMENSIONS == 32


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"base_url": "http://h/v1"}, "[pipeline.embedding] model is required"),
        ({"base_url": "http://h/v1", "model": "m", "dimension": 3}, "unknown key [pipeline.embedding] 'dimension'; did you mean 'dimensions'?"),
        ({"base_url": "http://h/v1", "model": "m", "batch_size": 0}, "[pipeline.embedding] batch_size = 0 is invalid"),
        ({"base_url": "http://h/v1", "model": "m", "concurrency": True}, "[pipeline.embedding] concurrency = True is invalid"),
        ({"base_url": "h/v1", "model": "m"}, "[pipeline.embedding] base_url = 'h/v1' is invalid"),
        ({"base_url": "http://h/v1", "model": "m", "encoding_format": "floats"}, "[pipeline.embedding] encoding_format = 'floats' is invalid; not a vector encoding; did you mean 'float'? use one of: base64, float"),
    ],
)
def test_config_errors(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        EmbeddingConfig.from_table(table, source="ragev.toml")
    assert str(caught.value).startswith("ragev.toml: ") and message in str(caught.value)
