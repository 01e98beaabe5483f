"""``clients.endpoint``: the knobs every service table shares, read with the table's label
in every message, and the client that sends JSON by them (against a real server on
127.0.0.1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_ragev import ConfigError, PipelineError
from pytest_ragev.clients import ENDPOINT_KEYS, EndpointClient, EndpointConfig
from pytest_ragev.core.tables import Table
from tests._remote_server import Reply, ScriptedServer, closed_url

CANARY = "sk-endpoint-5d1e-never-print"
LABELS = ["[pipeline.chat]", "[judge]", "[pipeline.embedding]", "[pipeline.rerank]"]


#: The retries' waits are recorded, not slept through (``waits`` in tests/unit/conftest.py).
pytestmark = pytest.mark.usefixtures("waits")


def config(label: str, **table: Any) -> EndpointConfig:
    opts = Table(table, where=label, source="ragev.toml")
    opts.check_keys(ENDPOINT_KEYS)
    return EndpointConfig.from_table(opts)


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"model": "m"}, "{label} base_url is required"),
        ({"base_url": "127.0.0.1:8000", "model": "m"}, "{label} base_url = '127.0.0.1:8000' is invalid"),
        ({"base_url": "http://u:pw@h/v1", "model": "m"}, "keep credentials out of the URL"),
        ({"base_url": "http://h"}, "{label} model is required"),
        ({"base_url": "http://h", "model": ""}, "{label} model = '' is invalid"),
        ({"base_url": "http://h", "model": "m", "timeuot": 3}, "unknown key {label} 'timeuot'; did you mean 'timeout'?"),
        ({"base_url": "http://h", "model": "m", "timeout": 0}, "{label} timeout = 0 is invalid"),
        ({"base_url": "http://h", "model": "m", "max_retries": -1}, "{label} max_retries = -1 is invalid"),
        ({"base_url": "http://h", "model": "m", "api_key_env": "$KEY"}, "give the NAME of the environment variable"),
        ({"base_url": "http://h", "model": "m", "extra_headers": {"X": 1}}, "{label} extra_headers.X = 1 is invalid"),
        ({"base_url": "http://h", "model": "m", "max_consecutive_failures": 1.5}, "{label} max_consecutive_failures = 1.5"),
    ],
)
def test_every_message_names_the_table(label: str, table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(label, **table)
    text = str(caught.value)
    assert text.startswith("ragev.toml: ") and "\n" not in text
    assert message.format(label=label) in text
    assert "pw" not in text


def test_defaults_snapshot_and_identity_hold_no_secret() -> None:
    cfg = config("[pipeline.embedding]", base_url="http://h:8080/v1/", model="bge-m3",
                 api_key_env="EMB_KEY",
                 extra_headers={"Authorization": f"Bearer {CANARY}", "X-Org": "${ORG}"})
    assert cfg.base_url == "http://h:8080/v1" and cfg.url("/embeddings") == "http://h:8080/v1/embeddings"
    assert (cfg.timeout, cfg.max_retries, cfg.retry_backoff, cfg.max_consecutive_failures) == (60.0, 3, 0.5, 5)
    snapshot = cfg.snapshot()
    assert json.loads(json.dumps(snapshot)) == snapshot
    assert snapshot["extra_headers"] == {"Authorization": "***", "X-Org": "${ORG}"}
    assert snapshot["api_key_env"] == "EMB_KEY"
    assert cfg.identity() == {"base_url": "http://h:8080/v1", "model": "bge-m3"}
    assert CANARY not in repr(cfg) and CANARY not in repr(EndpointClient(cfg))


def test_post_sends_the_key_from_the_environment_and_names_the_table(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGEV_EP_KEY", CANARY)
    server.script.append(Reply(200, {"ok": True}))
    client = EndpointClient(config("[judge]", base_url=server.url + "/v1", model="judge-7b",
                                   api_key_env="RAGEV_EP_KEY", extra_headers={"X-Team": "qa"}))
    response = client.post("chat/completions", {"frage": "Wie hoch?", "问题": "多高"})
    assert response.body == {"ok": True} and response.attempts == 1
    (seen,) = server.seen
    assert seen.path == "/v1/chat/completions" and seen.method == "POST"
    assert seen.headers["Authorization"] == f"Bearer {CANARY}"
    assert seen.headers["X-Team"] == "qa"
    assert seen.body == {"frage": "Wie hoch?", "问题": "多高"}
    # A server that echoes the key in a refusal: the message names the table, not the key.
    server.default = lambda seen: Reply(401, {"error": {"message": f"bad key {CANARY}"}})
    with pytest.raises(PipelineError) as caught:
        client.post("chat/completions", {})
    text = str(caught.value)
    assert text.startswith("[judge] model 'judge-7b': HTTP 401")
    assert "check the key in $RAGEV_EP_KEY" in text and CANARY not in text


def test_retries_429_with_retry_after_then_opens_the_breaker(
    server: ScriptedServer, waits: list[float]
) -> None:
    server.script.append(Reply(429, {"error": "slow down"}, {"Retry-After": "3"}))
    server.script.append(Reply(200, {"data": []}))
    client = EndpointClient(config("[pipeline.rerank]", base_url=server.url, model="bge-reranker",
                                   max_retries=1, max_consecutive_failures=2))
    assert client.post("rerank", {}).attempts == 2 and waits == [3.0]
    server.default = lambda seen: Reply(500, {"error": "kaputt"})
    for _ in range(2):
        with pytest.raises(PipelineError, match=r"failed after 2 attempt\(s\), last: HTTP 500: kaputt"):
            client.post("rerank", {})
    sent = len(server.seen)
    with pytest.raises(PipelineError, match=r"not sent: .* raise \[pipeline.rerank\] "
                                            r"max_consecutive_failures"):
        client.post("rerank", {})
    assert len(server.seen) == sent


def test_missing_environment_and_the_unset_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGEV_EP_GONE", raising=False)
    monkeypatch.delenv("RAGEV_EP_ORG", raising=False)
    client = EndpointClient(config("[pipeline.embedding]", base_url="http://127.0.0.1:9/v1",
                                   model="m", api_key_env="RAGEV_EP_GONE",
                                   extra_headers={"X-Org": "${RAGEV_EP_ORG}"}))
    assert client.missing_environment() == [
        "[pipeline.embedding] api_key_env = 'RAGEV_EP_GONE': the environment variable "
        "RAGEV_EP_GONE is not set; export RAGEV_EP_GONE=... or remove api_key_env for a "
        "server without authentication",
        "[pipeline.embedding] extra_headers refer to ${RAGEV_EP_ORG}, which is not set; "
        "export RAGEV_EP_ORG=... before running pytest",
    ]
    with pytest.raises(PipelineError, match=r"header 'X-Org' refers to \$\{RAGEV_EP_ORG\}"):
        client.post("embeddings", {})
    monkeypatch.setenv("RAGEV_EP_ORG", "team-7")
    with pytest.raises(PipelineError, match="RAGEV_EP_GONE is not set"):
        client.post("embeddings", {})


def test_preflight(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGEV_EP_KEY", CANARY)
    client = EndpointClient(config("[pipeline.embedding]", base_url=server.url + "/v1",
                                   model="m", api_key_env="RAGEV_EP_KEY"))
    server.script.append(Reply(404, {"error": "no such route"}))
    assert client.preflight() is None  # a server without /models is still there
    assert server.seen[-1].path == "/v1/models" and server.seen[-1].method == "GET"
    server.script.append(Reply(403, {"error": f"denied {CANARY}"}))
    reason = client.preflight()
    assert reason is not None and reason.startswith(
        "[pipeline.embedding] model 'm': preflight: HTTP 403") and CANARY not in reason
    dead = EndpointClient(config("[pipeline.embedding]", base_url=closed_url() + "/v1", model="m"))
    reason = dead.preflight()
    assert reason is not None and "cannot connect" in reason
