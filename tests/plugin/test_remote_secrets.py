"""Keys never reach output: not with ``pytest -l`` (frame locals), not in error messages.

A canary key is sent to a real server on 127.0.0.1 that echoes it back in its errors.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._remote_server import Reply, ScriptedServer, Seen

CANARY = "sk-CANARY-7f3a9c"
Project = Callable[..., Path]


def echo(status: int) -> Callable[[Seen], Reply]:
    def reply(seen: Seen) -> Reply:
        told = f"{seen.headers.get('Authorization')} {seen.headers.get('X-Token')}"
        return Reply(status, {"error": {"message": f"rejected {told}"}})

    return reply


CLIENT_TESTS = textwrap.dedent(
    """
    import os

    from pytest_ragev import PipelineSettings, QAPair
    from pytest_ragev.pipelines.remote import ChatClient, ChatConfig, HttpRagPipeline

    URL = os.environ["ECHO_URL"]

    def test_chat():
        config = ChatConfig.from_table(
            {"model": "m", "base_url": URL + "/v1", "api_key_env": "CANARY_KEY",
             "max_retries": 1, "retry_backoff": 0}, source="ragev.toml")
        ChatClient(config).complete("question", ["context"])

    def test_http():
        settings = PipelineSettings(name="http", options={
            "url": URL + "/rag", "headers": {"X-Token": "${CANARY_KEY}"},
            "max_retries": 1, "retry_backoff": 0})
        pipe = HttpRagPipeline(settings, source="ragev.toml")
        pipe.answer(QAPair(qid=1, question="q", pids=(), passages=(), aid=None, answer=None))
    """
)


@pytest.mark.parametrize("status", [401, 500])
def test_showlocals_never_prints_the_key(
    pytester: pytest.Pytester, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch,
    status: int,
) -> None:
    server.default = echo(status)
    monkeypatch.setenv("CANARY_KEY", CANARY)
    monkeypatch.setenv("ECHO_URL", server.url)
    pytester.makepyfile(test_clients=CLIENT_TESTS)
    result = pytester.runpytest("-l", "--tb=long")
    result.assert_outcomes(failed=2)
    output = result.stdout.str() + result.stderr.str()
    assert "PipelineError" in output and "rejected Bearer ***" in output
    assert CANARY not in output
    assert {seen.headers.get("Authorization") for seen in server.seen} >= {f"Bearer {CANARY}"}
    assert {seen.headers.get("X-Token") for seen in server.seen} >= {CANARY}


def test_showlocals_through_the_plugin(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.default = echo(401)
    monkeypatch.setenv("CANARY_KEY", CANARY)
    # The per-question path: the preflight would stop the run before any question.
    make_project("[run]\npreflight = false\n", conftest=None, pipeline=textwrap.dedent(f"""\
        [pipeline]
        name = "builtin"

        [pipeline.chat]
        model = "m"
        base_url = "{server.url}/v1"
        api_key_env = "CANARY_KEY"
        """))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "-l", "--tb=long",
                                "--ragev-report", "r.json")
    result.assert_outcomes(failed=6)
    output = result.stdout.str() + result.stderr.str()
    assert "HTTP 401" in output and CANARY not in output
    assert CANARY not in (pytester.path / "r.json").read_text(encoding="utf-8")


ECHO_200_TESTS = textwrap.dedent(
    """
    import os

    from pytest_ragev import PipelineSettings, QAPair
    from pytest_ragev.pipelines.remote import ChatClient, ChatConfig, HttpRagPipeline

    URL = os.environ["ECHO_URL"]
    CASE = QAPair(qid=1, question="q", pids=(), passages=(), aid=None, answer=None)

    def test_chat_key_list():
        config = ChatConfig.from_table(
            {"model": "m", "base_url": URL + "/v1", "api_key_env": "CANARY_KEY"},
            source="ragev.toml")
        ChatClient(config).complete("question", ["context"])

    def test_http_path_miss():
        settings = PipelineSettings(name="http", options={
            "url": URL + "/rag", "headers": {"X-Token": "${CANARY_KEY}"},
            "answer_path": "data.answer"})
        HttpRagPipeline(settings, source="ragev.toml").answer(CASE)

    def test_http_bad_id():
        settings = PipelineSettings(name="http", options={
            "url": URL + "/rag", "headers": {"X-Token": "${CANARY_KEY}"},
            "answer_path": "answer", "ids_path": "ids"})
        HttpRagPipeline(settings, source="ragev.toml").answer(CASE)
    """
)


def test_showlocals_never_prints_a_key_echoed_in_a_200_reply(
    pytester: pytest.Pytester, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reply(seen: Seen) -> Reply:
        told = seen.headers.get("X-Token") or seen.headers.get("Authorization", "")
        return Reply(200, {told: 1, "answer": told, "ids": [told]})

    server.default = reply
    monkeypatch.setenv("CANARY_KEY", CANARY)
    monkeypatch.setenv("ECHO_URL", server.url)
    pytester.makepyfile(test_clients=ECHO_200_TESTS)
    result = pytester.runpytest("-l", "--tb=long")
    result.assert_outcomes(failed=3)
    output = result.stdout.str() + result.stderr.str()
    assert "top-level keys: ***" in output and "not a passage id" in output
    assert CANARY not in output and CANARY[-8:] not in output


def test_a_redirect_to_another_origin_through_the_plugin(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service moved to another port: the run fails; the other port never sees the key."""
    other = ScriptedServer()
    try:
        other.default = lambda seen: Reply(200, {"answer": "gestohlen"})
        server.default = lambda seen: Reply(302, {}, {"Location": f"{other.url}/rag"})
        monkeypatch.setenv("CANARY_KEY", CANARY)
        # The per-question path: the preflight would stop the run before any question.
        make_project("[run]\npreflight = false\n", conftest=None, pipeline=textwrap.dedent(f"""\
            [pipeline]
            name = "http"
            url = "{server.url}/rag"
            headers = {{ Authorization = "Bearer ${{CANARY_KEY}}" }}
            """))
        result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.assert_outcomes(failed=6)
        result.stdout.fnmatch_lines([f"*HTTP 302, a redirect to {other.url}/rag, another origin*"])
        assert other.seen == [] and len(server.seen) == 5
        assert CANARY not in (pytester.path / "r.json").read_text(encoding="utf-8")
    finally:
        other.close()


@pytest.mark.parametrize("headers", [
    f'{{ Authorization = "Bearer {CANARY}" }}',
    f'{{ Authorization = "Basic {__import__("base64").b64encode(b"bot:" + CANARY.encode()).decode()}" }}',
])
def test_a_literal_header_key_echoed_alone_reaches_no_file(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer, headers: str,
) -> None:
    """`extra_headers = { Authorization = "Bearer sk-..." }` and a model that echoes the
    token without its scheme (or the decoded user:password of Basic): the answers that
    reach the records, the reports and the answer cache hold *** instead."""
    import base64

    def reply(seen: Seen) -> Reply:
        if seen.method == "GET":
            return Reply(200, {"data": []})
        scheme, _, token = seen.headers.get("Authorization", "").partition(" ")
        told = base64.b64decode(token).decode() if scheme == "Basic" else token
        return Reply(200, {"choices": [{"message": {"content": f"您的密钥 {told} / {scheme}"}}]})

    server.default = reply
    make_project(conftest=None, pipeline=textwrap.dedent(f"""\
        [pipeline]
        name = "builtin"

        [pipeline.chat]
        model = "m"
        base_url = "{server.url}/v1"
        extra_headers = {headers}
        """))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-html", "r.html", "--ragev-samples", "s.jsonl", "-v")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    sent = {seen.headers.get("Authorization") for seen in server.seen}
    assert len(sent) == 1 and CANARY in reply(server.seen[-1]).body["choices"][0][
        "message"]["content"]  # the key was sent, and the model echoes it
    samples = (pytester.path / "s.jsonl").read_text(encoding="utf-8")
    assert "您的密钥 ***" in samples
    output = result.stdout.str() + result.stderr.str()
    assert CANARY not in output
    for path in pytester.path.rglob("*"):
        if path.is_file() and path.name != "ragev.toml":
            assert CANARY.encode() not in path.read_bytes(), path
