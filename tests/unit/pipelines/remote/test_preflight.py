"""Before the first question: the environment check, the preflight request and the
circuit breaker of the remote clients, against a real server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_ragev import PipelineError, PipelineSettings, QAPair
from pytest_ragev.pipelines import is_io_bound
from pytest_ragev.pipelines.builtin import BuiltinPipeline
from pytest_ragev.pipelines.remote import (
    ChatClient,
    ChatConfig,
    HttpRagPipeline,
    build_remote_pipeline,
)
from tests._remote_server import Reply, ScriptedServer, Seen, closed_url

CASE = QAPair(qid=3, question="Wie hoch ist der Eiffelturm?", pids=(2,), passages=("...",),
              aid=1, answer="330 Meter")
CANARY = "sk-preflight-7f3e-never-print"


#: The retries' waits are recorded, not slept through (``waits`` in conftest.py).
pytestmark = pytest.mark.usefixtures("waits")


def http(url: str, **options: Any) -> HttpRagPipeline:
    table: dict[str, Any] = {"url": url, "retry_backoff": 0.0, "max_retries": 0, **options}
    built = build_remote_pipeline(PipelineSettings(name="http", options=table),
                                  source="ragev.toml")
    assert isinstance(built, HttpRagPipeline)
    return built


def chat(base_url: str, **options: Any) -> ChatClient:
    table = {"model": "m", "base_url": base_url, "retry_backoff": 0.0, **options}
    return ChatClient(ChatConfig.from_table(table, source="ragev.toml"))


# -- the environment
def test_chat_names_the_unset_key_and_header_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGEV_NO_KEY", raising=False)
    monkeypatch.delenv("RAGEV_NO_ORG", raising=False)
    client = chat("http://127.0.0.1:9/v1", api_key_env="RAGEV_NO_KEY",
                  extra_headers={"OpenAI-Organization": "${RAGEV_NO_ORG}"})
    lines = client.missing_environment()
    assert len(lines) == 2
    assert "api_key_env = 'RAGEV_NO_KEY'" in lines[0] and "export RAGEV_NO_KEY=" in lines[0]
    assert "${RAGEV_NO_ORG}" in lines[1] and "export RAGEV_NO_ORG=" in lines[1]
    monkeypatch.setenv("RAGEV_NO_KEY", "k")
    monkeypatch.setenv("RAGEV_NO_ORG", "o")
    assert client.missing_environment() == []


def test_an_empty_key_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGEV_EMPTY_KEY", "")
    assert chat("http://127.0.0.1:9/v1", api_key_env="RAGEV_EMPTY_KEY").missing_environment()


def test_the_offline_builtin_pipeline_needs_nothing() -> None:
    pipe = BuiltinPipeline(PipelineSettings(name="builtin"), source="ragev.toml")
    assert pipe.missing_environment() == [] and pipe.preflight(CASE) is None
    assert not is_io_bound(pipe)


# -- the preflight request
def test_chat_preflight_asks_for_the_model_list_with_the_key(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGEV_PF_KEY", CANARY)
    server.default = lambda seen: Reply(200, {"data": [{"id": "m"}]})
    assert chat(server.url + "/v1", api_key_env="RAGEV_PF_KEY").preflight() is None
    (seen,) = server.seen
    assert (seen.method, seen.path) == ("GET", "/v1/models")
    assert seen.headers["Authorization"] == f"Bearer {CANARY}"


@pytest.mark.parametrize("status", [404, 405, 500, 400])
def test_chat_preflight_passes_any_server_that_answers(server: ScriptedServer,
                                                       status: int) -> None:
    # Not every OpenAI-compatible server has /models: a server that answers is there.
    server.default = lambda seen: Reply(status, {"error": "no such route"})
    assert chat(server.url + "/v1").preflight() is None


@pytest.mark.parametrize("status", [401, 403])
def test_chat_preflight_stops_on_a_refused_key_without_showing_it(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, status: int,
) -> None:
    monkeypatch.setenv("RAGEV_PF_KEY", CANARY)
    server.default = lambda seen: Reply(
        status, {"error": {"message": f"Incorrect API key: {seen.headers['Authorization']}"}})
    reason = chat(server.url + "/v1", api_key_env="RAGEV_PF_KEY").preflight()
    assert reason is not None and f"HTTP {status}" in reason and "$RAGEV_PF_KEY" in reason
    assert CANARY not in reason and "\n" not in reason
    assert len(server.seen) == 1  # a refusal is not retried


def test_chat_preflight_stops_when_nobody_listens() -> None:
    reason = chat(closed_url() + "/v1").preflight()
    assert reason is not None and "cannot connect" in reason and "preflight" in reason


def test_http_preflight_asks_the_first_question(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, {"answer": "330 Meter"})
    assert http(server.url + "/rag").preflight(CASE) is None
    (seen,) = server.seen
    assert seen.body == {"query": CASE.question}


@pytest.mark.parametrize("status", [401, 403, 404, 405])
def test_http_preflight_stops_on_refusals_every_question_meets(
    server: ScriptedServer, status: int,
) -> None:
    server.default = lambda seen: Reply(status, {"error": "nope"})
    reason = http(server.url + "/rag").preflight(CASE)
    assert reason is not None and f"HTTP {status}" in reason


@pytest.mark.parametrize("reply", [Reply(422, {"error": "bad question"}),
                                   Reply(503, {"error": "busy"}),
                                   Reply(200, {"no": "answer key"})])
def test_http_preflight_passes_a_service_that_answers(server: ScriptedServer,
                                                      reply: Reply) -> None:
    # An error about this question, or a busy service, is the questions' business.
    server.default = lambda seen: reply
    assert http(server.url + "/rag").preflight(CASE) is None


def test_http_preflight_stops_when_nobody_listens() -> None:
    reason = http(closed_url() + "/rag", max_retries=3).preflight(CASE)
    assert reason is not None and "cannot connect" in reason
    assert "failed after 2 attempt(s)" in reason  # one retry, not the questions' budget


def test_http_preflight_stops_on_a_page_that_is_not_json(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(200, b"<html>login</html>")
    reason = http(server.url + "/rag").preflight(CASE)
    assert reason is not None and "not JSON" in reason


def test_remote_pipelines_are_io_bound(server: ScriptedServer) -> None:
    assert is_io_bound(http(server.url + "/rag"))
    builtin = BuiltinPipeline(
        PipelineSettings(name="builtin", options={
            "chat": {"model": "m", "base_url": server.url + "/v1"}}),
        source="ragev.toml")
    assert is_io_bound(builtin)


# -- the breaker
def test_http_pipeline_stops_sending_after_the_limit(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(503, {"error": {"message": "overloaded"}})
    pipe = http(server.url + "/rag", max_consecutive_failures=2)
    messages = []
    for qid in range(1, 6):
        with pytest.raises(PipelineError) as raised:
            pipe.answer(QAPair(qid=qid, question="q", pids=(), passages=(), aid=None,
                               answer=None), None)
        messages.append(str(raised.value))
    assert len(server.seen) == 2  # questions 3-5 were never sent
    assert "failed after 1 attempt(s), last: HTTP 503: overloaded" in messages[1]
    assert all("not sent" in m and "(last: HTTP 503: overloaded)" in m for m in messages[2:])


def test_refused_credentials_count_other_refusals_do_not(server: ScriptedServer) -> None:
    statuses = iter([401, 401, 422, 401])

    def reply(seen: Seen) -> Reply:
        return Reply(next(statuses), {"error": "no"})

    server.default = reply
    pipe = http(server.url + "/rag", max_consecutive_failures=3)
    for _ in range(4):
        with pytest.raises(PipelineError):
            pipe.answer(CASE, None)
    assert not pipe.breaker.is_open  # the 422 was an answer: 401, 401 | 422 | 401
    assert len(server.seen) == 4


def test_chat_client_has_its_own_breaker(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(500, {"error": "down"})
    client = chat(server.url + "/v1", max_retries=0, max_consecutive_failures=1)
    with pytest.raises(PipelineError, match="failed after 1 attempt"):
        client.complete("q", ["c"])
    with pytest.raises(PipelineError, match=r"not sent.*max_consecutive_failures"):
        client.complete("q", ["c"])
    assert len(server.seen) == 1
    assert client.config.snapshot()["max_consecutive_failures"] == 1
    # A transport knob: raising it keeps the answer cache.
    assert "max_consecutive_failures" not in client.config.answer_knobs()


def test_max_consecutive_failures_is_validated() -> None:
    with pytest.raises(Exception, match="max_consecutive_failures"):
        http("http://127.0.0.1:9/rag", max_consecutive_failures=-1)
