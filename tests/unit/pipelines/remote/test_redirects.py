"""Redirects never carry a credential to another origin (two ports on 127.0.0.1 = two origins).

``urllib`` copies every request header, ``Authorization`` included, to wherever a redirect
points. The chat client and the ``http`` pipeline follow a redirect only within the origin
they were configured with, and refuse any other with a one-line error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_ragev import PipelineError, PipelineSettings, QAPair
from pytest_ragev.pipelines.remote import ChatClient, ChatConfig, HttpRagPipeline
from tests._remote_server import Reply, ScriptedServer, Seen, serve

KEY = "sk-redirect-CANARY-5d1e"
CASE = QAPair(qid=3, question="Wie hoch ist der Mount Everest?", pids=(3,), passages=("…",),
              aid=None, answer=None)


@pytest.fixture
def elsewhere() -> Iterator[ScriptedServer]:
    """A second server: another port, so another origin."""
    yield from serve()


#: The retries' waits are recorded, not slept through (``waits`` in conftest.py).
pytestmark = pytest.mark.usefixtures("waits")


def redirect(status: int, location: str) -> Reply:
    return Reply(status, {"moved": True}, {"Location": location})


def chat(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> ChatClient:
    monkeypatch.setenv("REDIRECT_KEY", KEY)
    return ChatClient(ChatConfig.from_table(
        {"model": "m", "base_url": f"{server.url}/v1", "api_key_env": "REDIRECT_KEY",
         "max_retries": 2}, source="ragev.toml"))


def http(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, **options: Any) -> HttpRagPipeline:
    monkeypatch.setenv("REDIRECT_KEY", KEY)
    table = {"url": f"{server.url}/rag", "headers": {"Authorization": "Bearer ${REDIRECT_KEY}"},
             "max_retries": 2, **options}
    return HttpRagPipeline(PipelineSettings(name="http", options=table), source="ragev.toml")


def keys_seen(server: ScriptedServer) -> list[str | None]:
    return [seen.headers.get("Authorization") for seen in server.seen]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_chat_never_follows_a_redirect_to_another_port(
    server: ScriptedServer, elsewhere: ScriptedServer, monkeypatch: pytest.MonkeyPatch,
    status: int,
) -> None:
    server.default = lambda seen: redirect(status, f"{elsewhere.url}/v1/chat/completions")
    elsewhere.default = lambda seen: Reply(200, {"choices": [{"message": {"content": "stolen"}}]})
    with pytest.raises(PipelineError) as caught:
        chat(server, monkeypatch).complete("Frage", ["Kontext"])
    assert str(caught.value) == (
        f"[pipeline.chat] model 'm': {server.url}/v1/chat/completions answered HTTP {status}, "
        f"a redirect to {elsewhere.url}/v1/chat/completions, another origin; not followed, so "
        "that no credential leaves the origin you configured: set the URL to the address it "
        "redirects to"
    )
    assert elsewhere.seen == []  # the key never left
    assert keys_seen(server) == [f"Bearer {KEY}"]  # and a refused redirect is not retried


@pytest.mark.parametrize("location", [
    "http://localhost:{port}/rag",  # the same machine, but another host name: another origin
    "https://127.0.0.1:{port}/rag",  # another scheme
    "{other}/rag",  # another port
])
def test_http_pipeline_refuses_other_origins(
    server: ScriptedServer, elsewhere: ScriptedServer, monkeypatch: pytest.MonkeyPatch,
    location: str,
) -> None:
    port = server.url.rsplit(":", 1)[1]
    target = location.format(port=port, other=elsewhere.url)
    server.default = lambda seen: redirect(302, target) if seen.path == "/rag" else Reply(
        200, {"answer": "stolen"})
    with pytest.raises(PipelineError, match=r"a redirect to .*, another origin; not followed"):
        http(server, monkeypatch).answer(CASE)
    assert keys_seen(server) == [f"Bearer {KEY}"] and elsewhere.seen == []


def test_a_redirect_echoing_the_key_is_scrubbed(
    server: ScriptedServer, elsewhere: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.default = lambda seen: redirect(307, f"{elsewhere.url}/login?token={KEY}")
    with pytest.raises(PipelineError) as caught:
        http(server, monkeypatch).answer(CASE)
    assert KEY not in str(caught.value)
    assert f"{elsewhere.url}/login?token=***, another origin" in str(caught.value)


@pytest.mark.parametrize("status", [307, 308])
def test_same_origin_307_and_308_repeat_the_post_with_its_body(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    def service(seen: Seen) -> Reply:
        if seen.path == "/rag":
            return redirect(status, "/v2/rag")  # relative: the same origin
        return Reply(200, {"answer": f"{seen.method} {seen.body['query']}"})

    server.default = service
    answer = http(server, monkeypatch).answer(CASE)
    assert answer.text == "POST Wie hoch ist der Mount Everest?"
    assert [seen.path for seen in server.seen] == ["/rag", "/v2/rag"]
    assert keys_seen(server) == [f"Bearer {KEY}"] * 2


def test_same_origin_302_of_a_get_is_followed(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.default = lambda seen: (
        redirect(302, f"{server.url}/new{seen.path}") if not seen.path.startswith("/new")
        else Reply(200, {"answer": seen.path})
    )
    pipe = http(server, monkeypatch, method="GET", url=f"{server.url}/ask?id={{qid}}")
    assert pipe.answer(CASE).text == "/new/ask?id=3"
    assert keys_seen(server) == [f"Bearer {KEY}"] * 2


def test_a_redirect_loop_within_the_origin_ends_as_one_line(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.default = lambda seen: redirect(307, "/rag")
    with pytest.raises(PipelineError, match=r"HTTP 307 from .*/rag") as caught:
        http(server, monkeypatch).answer(CASE)
    assert "\n" not in str(caught.value) and KEY not in str(caught.value)
    assert len(server.seen) <= 11  # urllib's own limit on redirects
