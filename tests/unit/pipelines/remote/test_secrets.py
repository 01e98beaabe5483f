"""Keys never reach output: not with ``pytest -l`` (frame locals), not in error messages.

A canary key is sent to a real server on 127.0.0.1 that echoes it back in its errors.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_ragev import PipelineSettings, QAPair
from pytest_ragev.core.errors import ConfigError, PipelineError
from pytest_ragev.pipelines.remote import HttpRagPipeline, _env, _retry
from pytest_ragev.pipelines.remote.chat import ChatClient, ChatConfig
from tests._remote_server import Reply, ScriptedServer

CANARY = "sk-CANARY-7f3a9c"
Project = Callable[..., Path]
CASE = QAPair(qid=3, question="Quelle est la hauteur ?", pids=(), passages=(), aid=None,
              answer=None)


def test_secret_repr_is_redacted_but_its_value_is_sent() -> None:
    secret = _env.Secret(f"Bearer {CANARY}")
    assert repr(secret) == "'***'" and repr({"Authorization": secret}) == "{'Authorization': '***'}"
    assert str(secret) == f"Bearer {CANARY}" and f"{secret}" == f"Bearer {CANARY}"
    assert secret.encode("latin-1") == f"Bearer {CANARY}".encode()


def test_expanded_headers_hold_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", CANARY)
    headers, secrets = _env.expand_headers(
        {"X-Token": "${MY_TOKEN}", "Api-Key": "literal-key", "X-Team": "qa"}, where="[pipeline]"
    )
    assert headers == {"X-Token": CANARY, "Api-Key": "literal-key", "X-Team": "qa"}
    assert CANARY not in repr(headers) and "literal-key" not in repr(headers)
    assert "'qa'" in repr(headers)
    assert sorted(secrets) == sorted([CANARY, "literal-key"]) and CANARY not in repr(secrets)


def test_header_snapshot_follows_the_settings_secret_rules() -> None:
    """Templates are recorded as written; a literal credential never is."""
    snapshot = _env.snapshot_headers({
        "Authorization": "Bearer ${RAG_TOKEN}",
        "Proxy-Authorization": f"Bearer {CANARY} ${{X}}",  # a literal beside a reference
        "X-Auth-Token": CANARY,
        "Cookie": f"session={CANARY}",
        "X-Request-Id": "run-17",
        "Content-Type": "application/json",
    })
    assert snapshot == {
        "Authorization": "Bearer ${RAG_TOKEN}",
        "Proxy-Authorization": "***",
        "X-Auth-Token": "***",
        "Cookie": "***",
        "X-Request-Id": "run-17",
        "Content-Type": "application/json",
    }


@pytest.mark.parametrize("bad", [f"{CANARY}\nX-Evil: 1", f"{CANARY}\u2713"])
def test_a_key_http_cannot_carry_is_a_pipeline_error_without_the_key(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("CANARY_KEY", bad)
    client = ChatClient(ChatConfig.from_table(
        {"model": "m", "base_url": f"{server.url}/v1", "api_key_env": "CANARY_KEY"},
        source="ragev.toml"))
    with pytest.raises(PipelineError) as excinfo:
        client.complete("q", ["c"])
    message = str(excinfo.value)
    assert "header 'Authorization' has a value HTTP cannot carry" in message
    assert "CANARY" not in message and "\n" not in message
    assert server.seen == []  # nothing was sent


def test_unexpected_transport_errors_become_scrubbed_pipeline_errors() -> None:
    # A broken IPv6 host makes urllib raise a bare ValueError, not a URLError.
    with pytest.raises(PipelineError) as excinfo:
        _retry.send(method="POST", url=f"http://[{CANARY}/x", headers={}, payload={"a": 1},
                    policy=_retry.RetryPolicy(max_retries=0), what="[pipeline] http",
                    client_error_hint=lambda status, message: "", secrets=[CANARY])
    assert str(excinfo.value).startswith(
        "[pipeline] http: the request to http://[***/x failed: ValueError: ")
    assert CANARY not in str(excinfo.value)
    with pytest.raises(PipelineError, match="the request body is not JSON"):
        _retry.send(method="POST", url="http://127.0.0.1:9/x", headers={}, payload={"a": {1, 2}},
                    policy=_retry.RetryPolicy(max_retries=0), what="w",
                    client_error_hint=lambda status, message: "")


@pytest.mark.parametrize("key", [f"{CANARY}\\x", f"{CANARY}'x"])
def test_a_key_repr_escapes_is_scrubbed_from_a_quoted_reply(
    server: ScriptedServer, key: str
) -> None:
    """A non-JSON reply is quoted with ``!r``: the escaped spelling of the key goes too."""
    server.default = lambda seen: Reply(
        200, f"""<p class="err">it's {seen.headers.get('Authorization')}</p>""".encode())
    with pytest.raises(PipelineError, match="a body that is not JSON") as excinfo:
        _retry.send(method="POST", url=f"{server.url}/x", headers={"Authorization": key},
                    payload={"a": 1}, policy=_retry.RetryPolicy(max_retries=0), what="w",
                    client_error_hint=lambda status, message: "", secrets=[_env.Secret(key)])
    assert "CANARY" not in str(excinfo.value) and "***" in str(excinfo.value)


# --- a key echoed in a 200 reply never reaches an error, an answer or a snapshot ---------------


HTTP_ECHOES = [
    # (reply, options, what the error says, scrubbed)
    ({"result": {"note": "x"}, CANARY: 1}, {"answer_path": "data.answer"},
     "top-level keys: ***, result"),
    ({"answer": {"echo": CANARY}}, {}, 'gave dict {"echo": "***"}, not a string'),
    ({"answer": f"prefix {CANARY}"}, {"answer_path": "answer.text"},
     "expected an object, found a str ('prefix ***')"),
    ({"data": {CANARY: 1, "other": 2}}, {"answer_path": "data.answer"},
     "no key 'answer' (keys there: ***, other)"),
    ({"answer": "ok", "ids": [f"id-{CANARY}"]}, {"ids_path": "ids"},
     "gave 'id-***', not a passage id"),
    ({"answer": "ok", "ctx": {"k": CANARY}}, {"contexts_path": "ctx"},
     'must give a list of strings, found dict {"k": "***"}'),
    ({"answer": "ok", "ctx": [["nested", CANARY]]}, {"contexts_path": "ctx"},
     'found list ["nested", "***"]'),
]


@pytest.mark.parametrize(("reply", "options", "expected"), HTTP_ECHOES)
def test_http_errors_quoting_a_200_reply_are_scrubbed(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, reply: object,
    options: dict[str, str], expected: str,
) -> None:
    monkeypatch.setenv("CANARY_KEY", CANARY)
    server.default = lambda seen: Reply(200, reply)
    pipe = HttpRagPipeline(PipelineSettings(name="http", options={
        "url": f"{server.url}/rag", "headers": {"X-Token": "${CANARY_KEY}"}, **options}),
        source="ragev.toml")
    with pytest.raises(PipelineError) as caught:
        pipe.answer(CASE)
    assert expected in str(caught.value)
    assert "CANARY" not in str(caught.value) and "\n" not in str(caught.value)


def test_an_echoed_key_is_scrubbed_from_the_answer_itself(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answer text and contexts reach reports and baselines: scrubbed there too."""
    monkeypatch.setenv("CANARY_KEY", CANARY)
    server.default = lambda seen: Reply(200, {"answer": f"Ihr Schlüssel lautet {CANARY}.",
                                              "ctx": [f"ключ {CANARY}"]})
    pipe = HttpRagPipeline(PipelineSettings(name="http", options={
        "url": f"{server.url}/rag", "headers": {"X-Token": "${CANARY_KEY}"},
        "contexts_path": "ctx"}), source="ragev.toml")
    answer = pipe.answer(CASE)
    assert answer.text == "Ihr Schlüssel lautet ***."
    assert [chunk.text for chunk in answer.retrieved] == ["ключ ***"]  # type: ignore[union-attr]


def test_chat_key_lists_and_usage_of_a_200_reply_are_scrubbed(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANARY_KEY", CANARY)
    client = ChatClient(ChatConfig.from_table(
        {"model": "m", "base_url": f"{server.url}/v1", "api_key_env": "CANARY_KEY"},
        source="ragev.toml"))
    server.default = lambda seen: Reply(200, {CANARY: "x", "object": "error"})
    with pytest.raises(PipelineError) as caught:
        client.complete("q", ["c"])
    assert "(top-level keys: ***, object)" in str(caught.value) and "CANARY" not in str(caught.value)
    server.default = lambda seen: Reply(200, {
        "choices": [{"message": {"content": f"Der Schlüssel ist {CANARY}"}}],
        "usage": {"note": f"billed to {CANARY}", "total_tokens": 9}})
    result = client.complete("q", ["c"])
    assert result.text == "Der Schlüssel ist ***"
    assert result.usage == {"note": "billed to ***", "total_tokens": 9}


def test_a_reply_nested_too_deeply_is_one_line(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, ("[" * 100_000 + "]" * 100_000).encode())
    pipe = HttpRagPipeline(PipelineSettings(name="http", options={"url": f"{server.url}/rag"}),
                           source="ragev.toml")
    with pytest.raises(PipelineError, match=r"answered HTTP 200 with JSON nested too deeply"):
        pipe.answer(CASE)


def test_a_password_in_the_url_is_sent_as_basic_auth_and_never_shown(
    server: ScriptedServer,
) -> None:
    password = f"pa:ss@{CANARY}/ü"
    quoted = urllib.parse.quote(password, safe="")
    url = server.url.replace("http://", f"http://ragev:{quoted}@") + "/rag?lang=de"
    server.default = lambda seen: Reply(500, {"error": f"auth {seen.headers.get('Authorization')}"})
    pipe = HttpRagPipeline(PipelineSettings(name="http", options={
        "url": url, "max_retries": 0}), source="ragev.toml")
    with pytest.raises(PipelineError) as caught:
        pipe.answer(CASE)
    message = str(caught.value)
    basic = base64.b64encode(f"ragev:{password}".encode()).decode()
    assert server.seen[0].headers["Authorization"] == f"Basic {basic}"
    assert server.seen[0].path == "/rag?lang=de"
    assert "auth ***" in message and f"{server.url}/rag?lang=de failed" in message
    for shown in (message, repr(pipe), json.dumps(pipe.snapshot())):
        assert "CANARY" not in shown and basic not in shown and quoted not in shown
    assert pipe.snapshot()["url"] == server.url.replace("http://", "http://ragev:***@") + "/rag?lang=de"
    with pytest.raises(ConfigError, match=r"holds user:password and headers set Authorization"):
        HttpRagPipeline(PipelineSettings(name="http", options={
            "url": url, "headers": {"authorization": "Bearer x"}}), source="ragev.toml")


def test_a_key_in_the_url_query_never_reaches_an_error(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(503, {"error": f"slow down {seen.path}"})
    pipe = HttpRagPipeline(PipelineSettings(name="http", options={
        "url": f"{server.url}/rag?api_key={CANARY}&q={{qid}}", "max_retries": 0}),
        source="ragev.toml")
    with pytest.raises(PipelineError) as caught:
        pipe.answer(CASE)
    assert "CANARY" not in str(caught.value) and "api_key=***&q=3" in str(caught.value)
    assert pipe.snapshot()["url"] == f"{server.url}/rag?api_key=***&q={{qid}}"


def test_chat_base_url_with_credentials_is_refused_without_showing_them() -> None:
    with pytest.raises(ConfigError) as caught:
        ChatConfig.from_table({"model": "m", "base_url": f"http://u:{CANARY}@127.0.0.1:1/v1"},
                              source="ragev.toml")
    assert "base_url = 'http://u:***@127.0.0.1:1/v1' is invalid" in str(caught.value)
    assert "CANARY" not in str(caught.value)
