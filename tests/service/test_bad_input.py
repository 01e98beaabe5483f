"""Bad input is a 4xx naming the field, never a 500 or a traceback; logs hold no secret."""

from __future__ import annotations

import socket

import httpx
import pytest

from tests.service.conftest import Server

#: Each module starts a real `ragev serve` (seconds), and its tests wait for evaluations.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ('{"dataset_id": "default"', "body", "not valid JSON"),
        ("[1, 2]", "body", "JSON object"),
        ('"text"', "body", "JSON object"),
        ('{"limit": "5"}', "limit", "integer"),
        ('{"limit": 0}', "limit", "greater than or equal to 1"),
        ('{"limit": 2.5}', "limit", "integer"),
        ('{"dataset_id": 7}', "dataset_id", "string"),
        ('{"profile": "fancy"}', "profile", "weknora"),
        ('{"variant": [1]}', "variant", "string"),
        ('{"datset_id": "default"}', "datset_id", "did you mean 'dataset_id'?"),
        ('{"dataset_id": "defualt"}', "dataset_id", "did you mean 'default'?"),
        ('{"knowledge_base_id": "slw"}', "knowledge_base_id", "did you mean 'slow'?"),
        ('{"config": "nope"}', "config", "valid configs:"),
        ('{"chat_id": "extractiv"}', "chat_id", "did you mean 'extractive'?"),
        ('{"rerank_id": "lexcal"}', "rerank_id", "did you mean 'lexical'?"),
        ('{"config": "slow", "variant": "fastr"}', "variant", "did you mean 'faster'?"),
        ('{"dataset_id": "数据集"}', "dataset_id", "no dataset named '数据集'"),
    ],
)
def test_create_rejects_bad_bodies(shared_server: Server, body: str, field: str,
                                   words: str) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    response = admin.post("/api/v1/evaluation", content=body.encode("utf-8"),
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["details"]["field"] == field
    assert words in error["message"] and field in error["message"]
    assert "Traceback" not in response.text


def test_missing_and_bad_query_parameters(shared_server: Server) -> None:
    viewer = shared_server.client(shared_server.keys.viewer)
    for path, params, field in (
        ("/api/v1/evaluation", {}, "task_id"),
        ("/api/v1/evaluation/samples", {}, "task_id"),
        ("/api/v1/evaluations", {"page": "0"}, "page"),
        ("/api/v1/evaluations", {"page_size": "5000"}, "page_size"),
        ("/api/v1/evaluations", {"status": "x"}, "status"),
    ):
        response = viewer.get(path, params=params)
        assert response.status_code == 400, (path, response.text)
        assert response.json()["error"]["details"]["field"] == field
    response = viewer.get("/api/v1/evaluation", params={"task_id": "evaluation_1_0_00_none"})
    assert response.status_code == 404 and response.json()["error"]["code"] == 1003


def test_body_too_large(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    big = b'{"dataset_id": "' + b"x" * 70_000 + b'"}'
    response = admin.post("/api/v1/evaluation", content=big,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["success"] is False

    def chunks():  # no Content-Length: the limit holds while reading
        for _ in range(40):
            yield b" " * 4096

    response = admin.post("/api/v1/evaluation", content=chunks(),
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413


def test_create_answers_on_the_originals_path(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    response = admin.post("/api/v1/evaluation/", json={"config": "nope"})
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "config"


def test_unknown_route_and_wrong_method(shared_server: Server) -> None:
    viewer = shared_server.client(shared_server.keys.viewer)
    response = viewer.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"success": False, "error": {
        "code": 1003, "message": "no route /api/v1/nothing-here", "details": None}}
    response = viewer.delete("/api/v1/evaluation")
    assert response.status_code == 405 and response.json()["error"]["code"] == 1004
    assert "GET" in response.headers["allow"]
    response = viewer.get("/api/v1/evaluation/cancel")
    assert response.status_code == 405


def test_broken_http_does_not_take_the_server_down(shared_server: Server) -> None:
    with socket.create_connection(("127.0.0.1", shared_server.port)) as sock:
        sock.sendall(b"GARBAGE\r\n\r\n")
        sock.recv(1024)
    assert httpx.get(f"{shared_server.url}/healthz").status_code == 200


def test_logs_hold_one_line_per_request_and_no_secret(shared_server: Server) -> None:
    viewer = shared_server.client(shared_server.keys.viewer)
    marker = "/api/v1/evaluations?page_size=3&token=hunter2-secret"
    viewer.get(marker)
    httpx.get(f"{shared_server.url}/api/v1/evaluations",
              headers={"Authorization": f"Bearer {shared_server.keys.admin}x"})
    log = shared_server.log()
    lines = [line for line in log.splitlines() if "page_size=3" in line]
    assert len(lines) == 1 and "token=%2A%2A%2A" in lines[0]
    assert "hunter2" not in log
    for key in vars(shared_server.keys).values():
        secret = key.split("_", 2)[2]
        assert secret not in log
        for path in shared_server.workspace.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    assert "Traceback" not in log


def test_the_openapi_document_lists_what_the_api_answers(shared_server: Server) -> None:
    response = httpx.get(f"{shared_server.url}/openapi.json")
    assert response.status_code == 200
    document = response.json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["ApiKey"] == {**schemes["ApiKey"], "type": "apiKey", "in": "header",
                                 "name": "X-API-Key"}
    assert schemes["Bearer"]["type"] == "http" and schemes["Bearer"]["scheme"] == "bearer"
    # Bad input is a 400 here, never FastAPI's default 422.
    assert "422" not in response.text and "HTTPValidationError" not in response.text
    expected = {
        ("post", "/api/v1/evaluation"): {"200", "400", "401", "403", "413", "503"},
        ("post", "/api/v1/evaluation/cancel"): {"200", "400", "401", "403", "404", "409", "413",
                                                "503"},
        ("get", "/api/v1/evaluation"): {"200", "400", "401", "404"},
        ("get", "/api/v1/evaluation/samples"): {"200", "400", "401", "404"},
        ("get", "/api/v1/evaluations"): {"200", "400", "401"},
        ("get", "/api/v1/datasets"): {"200", "400", "401"},
        ("get", "/api/v1/configs"): {"200", "400", "401"},
        ("get", "/healthz"): {"200"},
    }
    operations = {(method, path): operation for path, item in document["paths"].items()
                  for method, operation in item.items()}
    assert set(operations) == set(expected)
    for key, statuses in expected.items():
        operation = operations[key]
        assert set(operation["responses"]) == statuses, key
        keyed = key[1] != "/healthz"
        assert operation["security"] == ([{"ApiKey": []}, {"Bearer": []}] if keyed else [])
        for status in statuses - {"200"}:
            error = operation["responses"][status]
            assert error["description"] and "ErrorEnvelope" in str(error["content"]), key


def test_samples_of_a_variant_the_task_does_not_run(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    every = admin.post("/api/v1/evaluation", json={"config": "slow", "limit": 1}).json()["data"]
    only = admin.post("/api/v1/evaluation",
                      json={"config": "slow", "limit": 1, "variant": "faster"}).json()["data"]
    for task, variant, words in (
        (every, "fastr", "runs no variant 'fastr'; did you mean 'faster'?"),
        (every, "Базовый", "valid variants: base, faster"),
        (only, "base", "runs no variant 'base';"),  # only the variant runs
    ):
        response = admin.get("/api/v1/evaluation/samples",
                             params={"task_id": task["id"], "variant": variant})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["details"]["field"] == "variant" and words in error["message"]
    for task, variant in ((every, "faster"), (every, "base"), (only, "faster")):
        response = admin.get("/api/v1/evaluation/samples",
                             params={"task_id": task["id"], "variant": variant})
        assert response.status_code == 200, response.text
