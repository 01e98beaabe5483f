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
    make_project(conftest=None, pipeline=textwrap.dedent(f"""\
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
