"""Keys never reach output: not with ``pytest -l`` (frame locals), not in error messages.

A canary key is sent to a real server on 127.0.0.1 that echoes it back in its errors.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_ragev.core.errors import PipelineError
from pytest_ragev.pipelines.remote import _env, _retry
from pytest_ragev.pipelines.remote.chat import ChatClient, ChatConfig
from tests._remote_server import Reply, ScriptedServer, Seen

CANARY = "sk-CANARY-7f3a9c"
Project = Callable[..., Path]


def echo(status: int) -> Callable[[Seen], Reply]:
    def reply(seen: Seen) -> Reply:
        told = f"{seen.headers.get('Authorization')} {seen.headers.get('X-Token')}"
        return Reply(status, {"error": {"message": f"rejected {told}"}})

    return reply


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
