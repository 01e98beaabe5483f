"""The ``http`` pipeline against a real RAG-like service on 127.0.0.1, and its path language."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev import Chunk, ConfigError, PipelineError, PipelineSettings, QAPair
from pytest_ragev.pipelines.remote import HttpRagPipeline, build_remote_pipeline
from pytest_ragev.pipelines.remote._paths import JsonPath, PathMissError, PathSyntaxError
from tests._remote_server import Reply, ScriptedServer, Seen

CASE = QAPair(qid=12, question="Who created Python?", pids=(4,), passages=("...",), aid=1,
              answer="Guido van Rossum")
TOKEN = "tok-81b2-never-print"


#: The retries' waits are recorded, not slept through (``waits`` in conftest.py).
pytestmark = pytest.mark.usefixtures("waits")


def pipeline(server: ScriptedServer, **options: Any) -> HttpRagPipeline:
    table: dict[str, Any] = {"url": server.url + "/api/chat", "retry_backoff": 0.0}
    table.update(options)
    built = build_remote_pipeline(PipelineSettings(name="http", options=table),
                                  source="ragev.toml")
    assert isinstance(built, HttpRagPipeline)
    return built


def weknora_like(seen: Seen) -> Reply:
    question = seen.body["question"]["text"]
    return Reply(200, {"data": {"answer": f"echo: {question}", "contexts": [
        {"passage_id": 4, "text": "Python was created by Guido."},
        {"passage_id": "7", "text": "Rust is a language."},
    ]}})


def test_request_and_reply_mapping(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_RAG_TOKEN", TOKEN)
    server.default = weknora_like
    pipe = pipeline(server, headers={"Authorization": "Bearer ${TEST_RAG_TOKEN}"},
                    body={"question": {"text": "{question}", "id": "{qid}"},
                          "tag": "q-{qid}", "top_k": 5, "flags": ["{qid}", True]},
                    answer_path="data.answer", contexts_path="data.contexts[*].text",
                    ids_path="data.contexts[*].passage_id")
    answer = pipe.answer(CASE, None)
    assert answer.text == "echo: Who created Python?"
    assert list(answer.retrieved) == [Chunk("Python was created by Guido.", 4),
                                      Chunk("Rust is a language.", 7)]
    assert answer.meta["attempts"] == 1 and answer.meta["latency_s"] > 0
    (seen,) = server.seen
    assert seen.method == "POST" and seen.path == "/api/chat"
    assert seen.headers["Authorization"] == f"Bearer {TOKEN}"
    assert seen.body == {"question": {"text": "Who created Python?", "id": 12},
                         "tag": "q-12", "top_k": 5, "flags": [12, True]}
    snap = pipe.snapshot()
    assert snap["headers"] == {"Authorization": "Bearer ${TEST_RAG_TOKEN}"}
    assert TOKEN not in json.dumps(snap) and TOKEN not in repr(pipe)
    assert pipe.kb_key() is None


def test_defaults(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, {"answer": "A", "references": [{"content": "c"}]})
    pipe = pipeline(server)
    answer = pipe.answer(CASE, None)
    assert answer.text == "A" and list(answer.retrieved) == []
    assert server.seen[0].body == {"query": "Who created Python?"}
    snap = pipe.snapshot()
    assert snap["method"] == "POST" and snap["answer_path"] == "answer"
    assert snap["timeout"] == 60.0 and snap["max_retries"] == 3
    with_refs = pipeline(server, contexts_path="references[*].content")
    assert list(with_refs.answer(CASE, None).retrieved) == [Chunk("c")]


def test_ids_only_and_get(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, {"answer": seen.path, "ids": [3, "5"]})
    pipe = pipeline(server, method="get", url=server.url + "/ask?q={question}&id={qid}",
                    ids_path="ids")
    answer = pipe.answer(CASE, None)
    assert list(answer.retrieved) == [3, 5]
    assert answer.text == "/ask?q=Who%20created%20Python%3F&id=12"
    assert server.seen[0].method == "GET" and server.seen[0].body is None


def test_missing_path_names_path_and_keys(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, {"result": {"text": "x"}, "status": "ok"})
    with pytest.raises(PipelineError, match=r"answer_path = 'data.answer' not found in the reply "
                                            r"at data .*top-level keys: result, status"):
        pipeline(server, answer_path="data.answer").answer(CASE, None)


def test_wrong_shapes(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, {"answer": ["not", "text"], "ctx": ["a", 1],
                                              "ids": ["x"], "texts": ["a"], "two": [1, 2]})
    with pytest.raises(PipelineError, match=r"gave list .*not a string"):
        pipeline(server).answer(CASE, None)
    server.default = lambda seen: Reply(200, {"answer": "ok", "ctx": ["a", 1], "ids": ["x"],
                                              "texts": ["a"], "two": [1, 2]})
    with pytest.raises(PipelineError, match=r"contexts_path = 'ctx' must give a list of strings, "
                                            r"found int 1"):
        pipeline(server, contexts_path="ctx").answer(CASE, None)
    with pytest.raises(PipelineError, match=r"gave 'x', not a passage id"):
        pipeline(server, ids_path="ids").answer(CASE, None)
    with pytest.raises(PipelineError, match=r"1 item\(s\) but ids_path 2"):
        pipeline(server, contexts_path="texts", ids_path="two").answer(CASE, None)


def test_retries_and_errors(server: ScriptedServer) -> None:
    server.script += [Reply(502, b"bad gateway"), Reply(429, {}, {"Retry-After": "1"})]
    server.default = lambda seen: Reply(200, {"answer": "late"})
    answer = pipeline(server).answer(CASE, None)
    assert answer.text == "late" and answer.meta["attempts"] == 3
    server.default = lambda seen: Reply(503, {"detail": "down for maintenance"})
    with pytest.raises(PipelineError, match=r"failed after 2 attempt\(s\), last: HTTP 503: down"):
        pipeline(server, max_retries=1).answer(CASE, None)
    server.default = lambda seen: Reply(422, {"detail": "field 'query' required"})
    with pytest.raises(PipelineError, match=r"HTTP 422 .*field 'query' required; check that "
                                            r"\[pipeline\] body"):
        pipeline(server).answer(CASE, None)


def test_unset_header_variable(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_RAG_UNSET", raising=False)
    pipe = pipeline(server, headers={"X-Key": "${TEST_RAG_UNSET}"})
    with pytest.raises(PipelineError, match=r"refers to \$\{TEST_RAG_UNSET\}, which is not set"):
        pipe.answer(CASE, None)
    assert server.seen == []


def test_echoed_token_is_scrubbed(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_RAG_TOKEN", TOKEN)
    server.default = lambda seen: Reply(403, {"message": f"token {TOKEN} revoked"})
    pipe = pipeline(server, headers={"Authorization": "Bearer ${TEST_RAG_TOKEN}"})
    with pytest.raises(PipelineError) as caught:
        pipe.answer(CASE, None)
    assert TOKEN not in str(caught.value) and "token *** revoked" in str(caught.value)


def test_answer_key_tracks_answer_knobs_only(server: ScriptedServer) -> None:
    base = pipeline(server).answer_key()
    assert pipeline(server).answer_key() == base
    assert pipeline(server, timeout=5, max_retries=0).answer_key() == base
    assert pipeline(server, body={"q": "{question}"}).answer_key() != base
    assert pipeline(server, answer_path="data.answer").answer_key() != base
    assert pipeline(server, url=server.url + "/other").answer_key() != base


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, r"\[pipeline\] url is required"),
        ({"url": "localhost:8080"}, r"url = 'localhost:8080' is invalid"),
        ({"url": "http://h", "answer_pth": "a"}, r"did you mean 'answer_path'\?"),
        ({"url": "http://h", "method": "DELETE"}, r"use one of POST, PUT, GET"),
        ({"url": "http://h", "body": {"q": "{query}"}},
         r"unknown placeholder \{query\}"),
        ({"url": "http://h", "method": "GET", "body": {"q": "{question}"}},
         r"a GET request carries no body"),
        ({"url": "http://h", "body": "{question}"}, r"write it as a table"),
        ({"url": "http://h", "answer_path": "data..answer"}, r"expected a key at character 6"),
        ({"url": "http://h", "contexts_path": "refs[x].text"}, r"bad index at character 5"),
        ({"url": "http://h", "headers": {"A": 3}}, r"headers.A = 3 is invalid"),
        ({"url": "http://h", "timeout": -1}, r"timeout = -1 is invalid"),
    ],
)
def test_config_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        build_remote_pipeline(PipelineSettings(name="http", options=options), source="ragev.toml")
    assert str(caught.value).startswith("ragev.toml: ") and "\n" not in str(caught.value)


def test_default_source_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ragev.toml: \[pipeline\] url is required"):
        build_remote_pipeline(PipelineSettings(name="http", base_dir=tmp_path))
    with pytest.raises(ConfigError, match=r"'bm25' is not a remote pipeline"):
        build_remote_pipeline(PipelineSettings(name="bm25"))


REPLY = {"data": {"items": [{"t": "a", "n": [1, 2]}, {"t": "b", "n": []}], "k": None},
         "top": [[1, 2], [3]]}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("data.items[*].t", ["a", "b"]),
        ("data.items[0].n[1]", 2),
        ("data.items[-1].t", "b"),
        ("data.items[*].n[*]", [[1, 2], []]),
        ("top[*][0]", [1, 3]),
        ("data.k", None),
        ("data", REPLY["data"]),
    ],
)
def test_path_language(path: str, expected: Any) -> None:
    assert JsonPath.parse(path).get(REPLY) == expected


@pytest.mark.parametrize(
    ("path", "at"),
    [("data.nope", "data.nope"), ("data.items[5]", "data.items[5]"),
     ("data.items[*].n[0]", "data.items[1].n[0]"), ("data.k.x", "data.k.x"),
     ("top.x", "top.x"), ("data[*]", "data[*]")],
)
def test_path_misses(path: str, at: str) -> None:
    with pytest.raises(PathMissError) as caught:
        JsonPath.parse(path).get(REPLY)
    assert caught.value.at == at


@pytest.mark.parametrize("path", ["", "a.", ".a", "a[", "a[1", "a[]", "a]b", "a[*]b"])
def test_path_syntax_errors(path: str) -> None:
    with pytest.raises(PathSyntaxError):
        JsonPath.parse(path)
