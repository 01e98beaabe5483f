"""Create -> poll -> result, failures, cancel and the queue, against the real server."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest

from tests.service.conftest import Server, create, finished, wait_for

#: Each module starts a real `ragev serve` (seconds), and its tests wait for evaluations.
pytestmark = pytest.mark.slow

TASK_ID = re.compile(r"^evaluation_1_\d{13}_[0-9a-f]{8}_(?P<dataset>[A-Za-z0-9_.-]+)$")


def test_create_poll_success_on_the_sample(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    viewer = shared_server.client(shared_server.keys.viewer)
    started = time.perf_counter()
    task = create(admin, dataset_id="default", knowledge_base_id="", chat_id="", rerank_id="")
    answered = time.perf_counter() - started
    assert answered < 5.0  # returns at once, before the evaluation runs
    match = TASK_ID.match(task["id"])
    assert match and match["dataset"] == "default"
    assert task["tenant_id"] == 1 and task["status"] in (0, 1) and task["err_msg"] == ""

    data = wait_for(viewer, task["id"], finished)
    assert data["task"]["status"] == 2, data
    assert data["task"]["total"] == data["task"]["finished"] == 87
    metric = data["metric"]
    assert set(metric["retrieval_metrics"]) == {"precision", "recall", "ndcg3", "ndcg10", "mrr",
                                                "map"}
    assert set(metric["generation_metrics"]) == {"bleu1", "bleu2", "bleu4", "rouge1", "rouge2",
                                                 "rougel"}
    assert all(isinstance(v, float) for v in metric["retrieval_metrics"].values())
    assert 0.9 < metric["retrieval_metrics"]["recall"] <= 1.0
    assert data["params"]["pipeline"]["name"] == "builtin"
    assert data["params"]["dataset"]["id"] == "default"
    assert data["verdict"]["passed"] is True
    assert data["task"]["end_time"] and data["task"]["duration"] > 0
    assert data["request"]["config"] == "default"
    # The plugin's own report carries the API's task id (--ragev-task-id).
    report = json.loads((shared_server.workspace / "tasks" / task["id"] / "report.json")
                        .read_text(encoding="utf-8"))
    assert report["data"]["task"]["id"] == task["id"]

    # The original's spelling of the routes, with the trailing slash, answers the same.
    again = viewer.get("/api/v1/evaluation/", params={"task_id": task["id"]}).json()["data"]
    assert again["task"] == data["task"]
    page = viewer.get("/api/v1/evaluation/samples",
                      params={"task_id": task["id"], "page": 2, "page_size": 40}).json()["data"]
    assert page["total"] == 87 and len(page["items"]) == 40
    assert page["items"][0]["qid"] == 41 and "metrics" in page["items"][0]


def test_running_mean_while_the_task_runs(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    task = create(admin, config="slow")
    assert task["dataset_id"] == "multi"
    data = wait_for(admin, task["id"], lambda d: (d["task"]["status"] == 1
                    and d["task"]["finished"] >= 4) or finished(d))
    assert data["task"]["status"] == 1, "the slow task ended before it could be polled"
    assert data["task"]["total"] == 48  # 24 questions, base config and one variant
    running = data["metric"]
    assert running is not None
    assert running["counts"]["recall"] >= 1
    assert 0.0 <= running["retrieval_metrics"]["recall"] <= 1.0
    partial = admin.get("/api/v1/evaluation/samples", params={"task_id": task["id"]}).json()
    assert partial["data"]["total"] >= 1
    final = wait_for(admin, task["id"], finished)
    assert final["task"]["status"] == 2
    # Every third question ranks a wrong passage first: MRR (1 + 1 + 1/2) / 3 over each block.
    assert abs(final["metric"]["retrieval_metrics"]["mrr"] - (2 + 0.5) / 3) < 1e-9


def test_failing_configs_end_with_status_3_and_the_reason(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    bad_knob = create(admin, config="broken")
    bad_toml = create(admin, config="typo")
    data = wait_for(admin, bad_knob["id"], finished)
    assert data["task"]["status"] == 3
    assert data["task"]["err_msg"].startswith("broken.toml: [pipeline] chunk_size = -3")
    assert str(shared_server.configs) not in data["task"]["err_msg"]
    data = wait_for(admin, bad_toml["id"], finished)
    assert data["task"]["status"] == 3
    assert "not valid TOML" in data["task"]["err_msg"]
    assert "Traceback" not in data["task"]["err_msg"]


def test_overrides_from_the_model_table_reach_the_run(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    task = create(admin, dataset_id="multi-copy", knowledge_base_id="default",
                  chat_id="extractive-short", rerank_id="lexical2", limit=6, profile="standard")
    data = wait_for(admin, task["id"], finished)
    assert data["task"]["status"] == 2, data["task"]
    pipeline = data["params"]["pipeline"]
    assert pipeline["chat"]["max_tokens"] == 16
    assert pipeline["rerank_model"] == "lexical" and pipeline["rerank_top_k"] == 2
    assert data["params"]["metrics"]["profile"] == "standard"
    assert data["task"]["total"] == 6 and data["task"]["dataset_id"] == "multi-copy"


def test_cancel_a_running_and_a_queued_task(make_server: Callable[..., Server]) -> None:
    server = make_server()  # one at a time: the second waits
    admin = server.client(server.keys.admin)
    first = create(admin, config="slow")
    second = create(admin, config="slow")
    wait_for(admin, first["id"], lambda d: d["task"]["status"] != 0)
    queued = admin.get("/api/v1/evaluation", params={"task_id": second["id"]}).json()["data"]
    assert queued["task"]["status"] == 0 and queued["queue_position"] == 1

    response = admin.post("/api/v1/evaluation/cancel", json={"task_id": second["id"]})
    assert response.status_code == 200
    data = wait_for(admin, second["id"], finished)
    assert data["task"]["status"] == 3 and data["task"]["err_msg"] == "cancelled before it started"

    wait_for(admin, first["id"], lambda d: d["task"]["finished"] >= 2 or finished(d))
    response = admin.post("/api/v1/evaluation/cancel", json={"task_id": first["id"]})
    assert response.status_code == 200, response.text
    data = wait_for(admin, first["id"], finished)
    assert data["task"]["status"] == 3
    assert data["task"]["err_msg"].startswith("cancelled: interrupted by SIGTERM")
    assert 0 < data["task"]["finished"] < data["task"]["total"]
    assert data["metric"]["retrieval_metrics"]["recall"] is not None  # over the answered ones

    again = admin.post("/api/v1/evaluation/cancel", json={"task_id": first["id"]})
    assert again.status_code == 409 and again.json()["error"]["code"] == 1005


def test_two_run_in_parallel_and_a_third_waits(make_server: Callable[..., Server]) -> None:
    server = make_server("--max-parallel", "2")
    admin = server.client(server.keys.admin)
    tasks = [create(admin, config="slow", variant="base") for _ in range(3)]
    ids = [t["id"] for t in tasks]
    seen_two_running = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        # One list answer is one database read: a consistent snapshot of the three.
        items = admin.get("/api/v1/evaluations", params={"page_size": 50}).json()["data"]
        status_of = {item["task"]["id"]: item["task"]["status"] for item in items["items"]}
        statuses = [status_of[task_id] for task_id in ids]
        assert statuses.count(1) <= 2, statuses
        if statuses[:2] == [1, 1]:
            seen_two_running = True
            assert statuses[2] == 0
            third = admin.get("/api/v1/evaluation", params={"task_id": ids[2]}).json()["data"]
            if third["task"]["status"] == 0:
                assert third["queue_position"] == 1
        if statuses[2] == 1:
            assert 2 in statuses[:2]  # the third started only after one of the first ended
        if all(s == 2 for s in statuses):
            break
        time.sleep(0.1)
    assert seen_two_running
    assert statuses == [2, 2, 2]
    health = admin.get("/healthz").json()["data"]
    assert health == {"status": "ok", "running": 0, "queued": 0}


def test_list_is_newest_first_with_filters_and_pages(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    made = [create(admin, config="broken") for _ in range(3)]
    for task in made:
        wait_for(admin, task["id"], finished)
    page = admin.get("/api/v1/evaluations", params={"config": "broken", "page_size": 2}).json()
    data = page["data"]
    assert data["total"] >= 3 and len(data["items"]) == 2
    ids = [item["task"]["id"] for item in data["items"]]
    assert ids[0] == made[-1]["id"] and ids[1] == made[-2]["id"]
    assert all(item["request"]["config"] == "broken" for item in data["items"])
    failed = admin.get("/api/v1/evaluations", params={"status": 3}).json()["data"]
    assert all(item["task"]["status"] == 3 for item in failed["items"])
    other = shared_server.client(shared_server.keys.other)
    assert other.get("/api/v1/evaluations").json()["data"]["total"] == 0


def test_datasets_and_configs(shared_server: Server) -> None:
    viewer = shared_server.client(shared_server.keys.viewer)
    datasets = {d["id"]: d for d in viewer.get("/api/v1/datasets").json()["data"]}
    assert {"default", "multi", "multi-copy", "samples"} <= set(datasets)
    assert datasets["multi-copy"]["source"] == "ragev-server.toml"
    configs = {c["name"]: c for c in viewer.get("/api/v1/configs").json()["data"]}
    assert configs["slow"]["variants"] == ["faster"] and configs["slow"]["pipeline"] == (
        "slowpipe:build")
    assert "not valid TOML" in configs["typo"]["error"]
    assert str(shared_server.configs) not in configs["typo"]["error"]
    assert "extractive-short" in configs["default"]["chat_ids"]
