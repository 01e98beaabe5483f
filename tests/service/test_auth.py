"""Every endpoint x no key / viewer / admin without capability / admin / another tenant."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.service.conftest import Server, create, finished, wait_for

#: Each module starts a real `ragev serve` (seconds), and its tests wait for evaluations.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def done_task(shared_server: Server) -> str:
    """A finished task of tenant 1."""
    admin = shared_server.client(shared_server.keys.admin)
    task = create(admin, config="slow", variant="faster", limit=2)
    wait_for(admin, task["id"], finished)
    return str(task["id"])


@pytest.fixture
def queued_task(shared_server: Server) -> Iterator[str]:
    """A fresh task of tenant 1 (cancelled at the end if still going)."""
    admin = shared_server.client(shared_server.keys.admin)
    task = create(admin, config="slow", variant="faster", limit=2)
    yield str(task["id"])
    admin.post("/api/v1/evaluation/cancel", json={"task_id": task["id"]})


def _call(client: httpx.Client, endpoint: str, task_id: str) -> httpx.Response:
    if endpoint == "create":
        return client.post("/api/v1/evaluation", json={"config": "slow", "limit": 1,
                                                       "variant": "faster"})
    if endpoint == "cancel":
        return client.post("/api/v1/evaluation/cancel", json={"task_id": task_id})
    if endpoint == "detail":
        return client.get("/api/v1/evaluation", params={"task_id": task_id})
    if endpoint == "samples":
        return client.get("/api/v1/evaluation/samples", params={"task_id": task_id})
    if endpoint == "list":
        return client.get("/api/v1/evaluations")
    if endpoint == "datasets":
        return client.get("/api/v1/datasets")
    if endpoint == "configs":
        return client.get("/api/v1/configs")
    raise AssertionError(endpoint)


#: The expected status per endpoint for: no key, viewer, admin without capability, admin,
#: admin with full_access, an admin key of another tenant.
MATRIX = {
    "create": (401, 403, 403, 200, 200, 200),
    "cancel": (401, 403, 403, 200, 200, 404),
    "detail": (401, 200, 200, 200, 200, 404),
    "samples": (401, 200, 200, 200, 200, 404),
    "list": (401, 200, 200, 200, 200, 200),
    "datasets": (401, 200, 200, 200, 200, 200),
    "configs": (401, 200, 200, 200, 200, 200),
}
WHO = ("none", "viewer", "admin_none", "admin", "full", "other")


@pytest.mark.parametrize("endpoint", list(MATRIX))
@pytest.mark.parametrize("who", WHO)
def test_auth_matrix(shared_server: Server, done_task: str, queued_task: str, endpoint: str,
                     who: str) -> None:
    key = None if who == "none" else getattr(shared_server.keys, who)
    client = shared_server.client(key)
    task_id = queued_task if endpoint == "cancel" else done_task
    response = _call(client, endpoint, task_id)
    expected = MATRIX[endpoint][WHO.index(who)]
    assert response.status_code == expected, response.text
    body = response.json()
    assert body["success"] is (expected == 200)
    if expected == 401:
        assert body["error"]["code"] == 1001 and response.headers["www-authenticate"] == "Bearer"
    if expected == 403:
        assert body["error"]["code"] == 1002 and "run_evaluations" in body["error"]["message"]
    if expected == 404:
        # Another tenant's task reads exactly like one that does not exist.
        missing = _call(client, endpoint, task_id + "0")
        assert missing.status_code == 404
        assert body["error"]["message"].replace(task_id, "X") == (
            missing.json()["error"]["message"].replace(task_id + "0", "X"))
    if endpoint == "create" and expected == 200:
        created = body["data"]
        assert created["tenant_id"] == (2 if who == "other" else 1)
        assert created["id"].startswith(f"evaluation_{created['tenant_id']}_")
        client.post("/api/v1/evaluation/cancel", json={"task_id": created["id"]})


@pytest.mark.parametrize("header", ["bearer", "x-api-key", "wrong-secret", "garbage", "revoked"])
def test_key_forms(shared_server: Server, header: str) -> None:
    key = shared_server.keys.viewer
    if header == "bearer":
        headers = {"Authorization": f"Bearer {key}"}
    elif header == "x-api-key":
        headers = {"X-API-Key": key}
    elif header == "wrong-secret":
        headers = {"X-API-Key": key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")}
    elif header == "garbage":
        headers = {"Authorization": "Basic dXNlcjpwYXNz"}
    else:
        from pytest_ragev.server.keys import new_key
        from pytest_ragev.server.store import Store

        text, stored = new_key(role="viewer", capability="none", tenant=1)
        store = Store(shared_server.workspace / "ragev-server.db")
        store.add_key(stored)
        store.revoke_key(stored.key_id)
        store.close()
        headers = {"X-API-Key": text}
    response = httpx.get(f"{shared_server.url}/api/v1/evaluations", headers=headers)
    assert response.status_code == (200 if header in ("bearer", "x-api-key") else 401)


def test_healthz_needs_no_key(shared_server: Server) -> None:
    assert httpx.get(f"{shared_server.url}/healthz").json()["data"]["status"] == "ok"


#: Bodies and queries a handler would refuse with a 400: the key is checked first.
BAD_REQUESTS = [
    ("post", "/api/v1/evaluation", {"content": b'{"dataset_id": '}),  # not JSON
    ("post", "/api/v1/evaluation", {"json": {"limit": "5", "datset_id": "x"}}),
    ("post", "/api/v1/evaluation/cancel", {"content": b"[1, 2]"}),
    ("post", "/api/v1/evaluation/cancel", {"json": {}}),  # task_id missing
    ("get", "/api/v1/evaluation", {}),  # task_id missing
    ("get", "/api/v1/evaluations", {"params": {"page": "0"}}),
    ("get", "/api/v1/evaluation/samples", {"params": {"task_id": "x", "page_size": "9999"}}),
]


@pytest.mark.parametrize(("method", "path", "request_args"), BAD_REQUESTS)
@pytest.mark.parametrize("who", ["none", "garbage", "viewer"])
def test_the_key_is_checked_before_the_request(shared_server: Server, method: str, path: str,
                                               request_args: dict[str, Any], who: str) -> None:
    headers = {"Content-Type": "application/json"}
    if who == "garbage":
        headers["X-API-Key"] = "rgv_nothere_Zm9vYmFy"
    elif who == "viewer":
        headers["X-API-Key"] = shared_server.keys.viewer
    response = httpx.request(method, shared_server.url + path, headers=headers, timeout=30,
                             **request_args)
    # A viewer may read (so its bad query is a 400) but never create or cancel.
    viewer_gets = 400 if method == "get" else 403
    expected = viewer_gets if who == "viewer" else 401
    assert response.status_code == expected, response.text
    assert response.json()["error"]["code"] == {400: 1000, 401: 1001, 403: 1002}[expected]
