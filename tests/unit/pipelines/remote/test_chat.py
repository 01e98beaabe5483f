"""The chat client against a real Chat Completions server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from pytest_ragev import ConfigError, PipelineError
from pytest_ragev.pipelines.remote import ChatClient, ChatConfig
from tests._remote_server import Reply, ScriptedServer, Seen

SECRET = "sk-test-4f1c9e-do-not-leak"


def completion(text: str, **usage: int) -> Reply:
    return Reply(200, {"id": "c1", "object": "chat.completion",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": usage or {"prompt_tokens": 10, "completion_tokens": 2}})


def make(server: ScriptedServer, **keys: Any) -> ChatClient:
    table: dict[str, Any] = {"base_url": server.url + "/v1", "model": "tiny", "retry_backoff": 0.01}
    table.update(keys)
    return ChatClient(ChatConfig.from_table(table, source="ragev.toml"))


def test_success_sends_the_protocol(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_CHAT_KEY", SECRET)
    server.script.append(completion("Paris", prompt_tokens=30, completion_tokens=1))
    client = make(server, api_key_env="TEST_CHAT_KEY", temperature=0.3, top_p=0.9,
                  max_tokens=64, seed=7, prompt="Be brief.",
                  context_template="C: {contexts}\nQ: {query}",
                  extra_headers={"X-Team": "qa"})
    result = client.complete("Where is the Eiffel Tower?", ["It is in Paris.", "It is tall."])
    assert result.text == "Paris"
    assert result.usage == {"prompt_tokens": 30, "completion_tokens": 1}
    assert result.attempts == 1
    assert result.latency_s > 0
    (seen,) = server.seen
    assert seen.method == "POST" and seen.path == "/v1/chat/completions"
    assert seen.headers["Authorization"] == f"Bearer {SECRET}"
    assert seen.headers["X-Team"] == "qa"
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.body == {
        "model": "tiny",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user",
             "content": "C: [1] It is in Paris.\n\n[2] It is tall.\nQ: Where is the Eiffel Tower?"},
        ],
        "temperature": 0.3, "top_p": 0.9, "max_tokens": 64, "seed": 7,
    }


def test_defaults_no_key_no_authorization(server: ScriptedServer) -> None:
    server.script.append(completion("ok"))
    client = make(server)
    client.complete("q {contexts} with braces {}", ["ctx {query}"])
    (seen,) = server.seen
    assert "Authorization" not in seen.headers
    assert seen.body["temperature"] == 0.0
    assert "top_p" not in seen.body and "seed" not in seen.body
    # Braces in questions and contexts are data, not placeholders.
    assert seen.body["messages"][1]["content"] == (
        "Context:\n[1] ctx {query}\n\nQuestion: q {contexts} with braces {}"
    )
    assert seen.body["messages"][0]["role"] == "system"


def test_empty_prompt_sends_no_system_message(server: ScriptedServer) -> None:
    server.script.append(completion("ok"))
    make(server, prompt="").complete("q", [])
    assert [m["role"] for m in server.seen[0].body["messages"]] == ["user"]


def test_429_with_retry_after_then_success(server: ScriptedServer, waits: list[float]) -> None:
    server.script += [
        Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"}),
        Reply(503, {"error": "busy"}),
        completion("fine"),
    ]
    result = make(server, retry_backoff=0.25).complete("q", ["c"])
    assert result.text == "fine" and result.attempts == 3
    assert len(server.seen) == 3
    assert waits[0] == 7.0  # the server's Retry-After wins over the backoff
    assert 0.25 <= waits[1] <= 0.5  # second retry: 0.25 * 2 with jitter in [0.5, 1]


def test_500_exhausts_retries(server: ScriptedServer, waits: list[float]) -> None:
    server.default = lambda seen: Reply(500, {"error": {"message": "kaboom"}})
    with pytest.raises(PipelineError, match=r"failed after 3 attempt\(s\), last: HTTP 500: kaboom"):
        make(server, max_retries=2).complete("q", [])
    assert len(server.seen) == 3
    assert len(waits) == 2 and waits[0] < waits[1] * 2  # growing, jittered


def test_timeout(server: ScriptedServer, waits: list[float]) -> None:
    server.default = lambda seen: Reply(200, {"late": True}, delay_s=1.0)
    with pytest.raises(PipelineError, match=r"2 attempt\(s\), last: no response within "
                                            r"timeout = 0.2 s"):
        make(server, timeout=0.2, max_retries=1).complete("q", [])


def test_bad_key_401_never_leaks(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_CHAT_KEY", SECRET)
    # A server that echoes the key back: our message must still not contain it.
    server.default = lambda seen: Reply(
        401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}}
    )
    client = make(server, api_key_env="TEST_CHAT_KEY")
    with pytest.raises(PipelineError) as caught:
        client.complete("q", [])
    message = str(caught.value)
    assert SECRET not in message and SECRET not in repr(caught.value)
    assert "HTTP 401" in message and "check the key in $TEST_CHAT_KEY" in message
    assert "Incorrect API key provided: ***" in message
    assert len(server.seen) == 1  # a 4xx is not retried
    assert SECRET not in repr(client) and SECRET not in repr(client.config)
    assert SECRET not in json.dumps(client.config.snapshot())


def test_404_names_base_url_and_model(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(404, {"error": {"message": "model 'tiny' not found"}})
    with pytest.raises(PipelineError, match=r"HTTP 404 .*model 'tiny' not found; check base_url "
                                            r"\(http://127.0.0.1:\d+/v1\) and model \('tiny'\)"):
        make(server).complete("q", [])


def test_missing_key_variable(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_CHAT_KEY_UNSET", raising=False)
    with pytest.raises(PipelineError, match=r"variable TEST_CHAT_KEY_UNSET is not set"):
        make(server, api_key_env="TEST_CHAT_KEY_UNSET").complete("q", [])
    assert server.seen == []


@pytest.mark.parametrize("body", [b"<html>proxy error</html>", {"choices": []},
                                  {"choices": [{"message": {"content": None}}]}, [1, 2]])
def test_malformed_response(server: ScriptedServer, body: Any) -> None:
    server.default = lambda seen: Reply(200, body)
    with pytest.raises(PipelineError, match=r"not JSON|choices\[0\]\.message\.content"):
        make(server).complete("q", [])


def test_connection_refused_is_retried(waits: list[float]) -> None:
    dead = ScriptedServer()
    url = dead.url
    dead.close()
    config = ChatConfig.from_table({"base_url": url, "model": "m", "max_retries": 2,
                                    "retry_backoff": 0.01}, source="ragev.toml")
    with pytest.raises(PipelineError, match=r"3 attempt\(s\), last: cannot connect"):
        ChatClient(config).complete("q", [])
    assert len(waits) == 2


def test_concurrent_calls(server: ScriptedServer) -> None:
    def answer(seen: Seen) -> Reply:
        return completion(seen.body["messages"][-1]["content"].rsplit(": ", 1)[-1])

    server.default = answer
    client = make(server)
    results: dict[int, str] = {}

    def ask(i: int) -> None:
        results[i] = client.complete(f"question {i}", []).text

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: f"question {i}" for i in range(16)}


def test_snapshot_has_defaults_and_is_json(server: ScriptedServer) -> None:
    config = ChatConfig.from_table(
        {"base_url": "http://h/v1/", "model": "m", "api_key_env": "K",
         "extra_headers": {"Authorization": "Bearer literal-secret", "X-Org": "${ORG_ID}"}},
        source="ragev.toml",
    )
    snap = config.snapshot()
    assert json.loads(json.dumps(snap)) == snap
    assert snap["base_url"] == "http://h/v1" and snap["timeout"] == 60.0
    assert snap["max_retries"] == 3 and snap["api_key_env"] == "K"
    assert snap["extra_headers"] == {"Authorization": "***", "X-Org": "${ORG_ID}"}
    assert "literal-secret" not in repr(config)
    assert "timeout" not in config.answer_knobs() and "model" in config.answer_knobs()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"model": "m"}, r"\[pipeline.chat\] base_url is required"),
        ({"base_url": "127.0.0.1:8000", "model": "m"}, r"base_url = '127.0.0.1:8000' is invalid"),
        ({"base_url": "http://h"}, r"\[pipeline.chat\] model is required"),
        ({"base_url": "http://h", "model": "m", "temprature": 0.1},
         r"unknown key \[pipeline.chat\] 'temprature'; did you mean 'temperature'\?"),
        ({"base_url": "http://h", "model": "m", "temperature": "hot"},
         r"temperature = 'hot' is invalid; use a number in \[0, 2\]"),
        ({"base_url": "http://h", "model": "m", "temperature": 3},
         r"temperature = 3 is invalid"),
        ({"base_url": "http://h", "model": "m", "max_tokens": 0}, r"max_tokens = 0 is invalid"),
        ({"base_url": "http://h", "model": "m", "seed": 1.5}, r"seed = 1.5 is invalid"),
        ({"base_url": "http://h", "model": "m", "timeout": 0}, r"timeout = 0 is invalid"),
        ({"base_url": "http://h", "model": "m", "max_retries": True}, r"max_retries = True"),
        ({"base_url": "http://h", "model": "m", "api_key_env": "sk-abc=1"},
         r"give the NAME of the environment variable"),
        ({"base_url": "http://h", "model": "m", "context_template": "{context} {query}"},
         r"unknown placeholder \{context\}, did you mean '\{contexts\}'\?"),
        ({"base_url": "http://h", "model": "m", "context_template": "{contexts}"},
         r"must contain the \{query\} placeholder"),
        ({"base_url": "http://h", "model": "m", "extra_headers": {"X": 1}},
         r"extra_headers.X = 1 is invalid"),
    ],
)
def test_config_errors(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        ChatConfig.from_table(table, source="ragev.toml")
    assert str(caught.value).startswith("ragev.toml: ")
    assert "\n" not in str(caught.value)
