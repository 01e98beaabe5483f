"""A restart loses nothing: SIGKILL the server mid-run and start it again."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_ragev.server.follow import alive
from pytest_ragev.server.store import Store
from tests.service.conftest import Server, create, finished, wait_for

#: Each module starts a real `ragev serve` (seconds), and its tests wait for evaluations.
pytestmark = pytest.mark.slow


def _running_pid(server: Server, task_id: str) -> int:
    store = Store(server.workspace / "ragev-server.db")
    try:
        row = store.task(task_id)
    finally:
        store.close()
    assert row is not None and row["pid"]
    return int(row["pid"])


def _task_configs(server: Server) -> list[Path]:
    """The task configs (secrets in clear) left in the configs folder."""
    return sorted(server.configs.rglob(".ragev-serve-*.toml"))


def _mid_run(data: dict) -> bool:
    return bool((data["task"]["status"] == 1 and data["task"]["finished"] >= 3)
                or finished(data))


def test_killed_with_its_evaluation_resumes_from_the_answer_cache(
    make_server: Callable[..., Server],
) -> None:
    server = make_server()
    admin = server.client(server.keys.admin)
    done = create(admin, config="slow", variant="faster", limit=3)
    wait_for(admin, done["id"], finished)
    task = create(admin, config="slow", variant="base")
    data = wait_for(admin, task["id"], _mid_run)
    assert data["task"]["status"] == 1
    answered = data["task"]["finished"]
    pid = _running_pid(server, task["id"])
    server.kill()  # kill -9: no shutdown code runs
    os.kill(pid, signal.SIGKILL)  # and the machine's crash took the evaluation too

    server.start()
    admin = server.client(server.keys.admin)
    data = wait_for(admin, task["id"], finished)
    assert data["task"]["status"] == 2, data["task"]
    assert data["task"]["finished"] == data["task"]["total"] == 24
    folder = server.workspace / "tasks" / task["id"]
    second = (folder / "pytest-2.log").read_text(encoding="utf-8")
    hits = int(re.search(r"answer cache (\d+) hits", second).group(1))
    assert hits >= answered  # the answers of the first attempt were not asked again
    # The task finished before the crash is intact.
    before = admin.get("/api/v1/evaluation", params={"task_id": done["id"]}).json()["data"]
    assert before["task"]["status"] == 2 and before["metric"]["retrieval_metrics"]["mrr"]
    assert not _task_configs(server)  # task configs cleaned up


def test_killed_server_adopts_the_evaluation_that_kept_running(
    make_server: Callable[..., Server], configs: Path,
) -> None:
    # A second a question: the evaluation must outlast the restart, which takes many
    # seconds on a loaded machine (else the server finds it ended, which another test
    # covers).
    (configs / "slower.toml").write_text(
        (configs / "slow-long.toml").read_text(encoding="utf-8").replace(
            "delay = 0.5", "delay = 1.0"), encoding="utf-8")
    server = make_server()
    admin = server.client(server.keys.admin)
    task = create(admin, config="slower")
    wait_for(admin, task["id"], _mid_run)
    pid = _running_pid(server, task["id"])
    server.kill()
    server.start()
    admin = server.client(server.keys.admin)
    data = wait_for(admin, task["id"], finished)
    assert data["task"]["status"] == 2
    assert not (server.workspace / "tasks" / task["id"] / "pytest-2.log").exists()
    assert f"adopting its running evaluation (pid {pid})" in server.log()
    assert not _task_configs(server)  # the adopted run's config is removed as well


def test_without_resume_the_interrupted_task_fails_with_the_reason(
    make_server: Callable[..., Server],
) -> None:
    server = make_server()
    admin = server.client(server.keys.admin)
    task = create(admin, config="slow", variant="base")
    wait_for(admin, task["id"], _mid_run)
    pid = _running_pid(server, task["id"])
    server.kill()
    os.kill(pid, signal.SIGKILL)
    server.args = ("--no-resume",)
    server.start()
    data = server.client(server.keys.viewer).get(
        "/api/v1/evaluation", params={"task_id": task["id"]}).json()["data"]
    assert data["task"]["status"] == 3
    assert data["task"]["err_msg"] == "the server stopped while this task ran (resume is off)"
    assert not _task_configs(server)


def test_a_clean_stop_requeues_the_running_task(make_server: Callable[..., Server]) -> None:
    server = make_server()
    admin = server.client(server.keys.admin)
    task = create(admin, config="slow", variant="base")
    wait_for(admin, task["id"], _mid_run)
    server.stop()  # SIGTERM: the runner stops the evaluation and queues it again
    server.start()
    data = wait_for(server.client(server.keys.admin), task["id"], finished)
    assert data["task"]["status"] == 2 and data["task"]["err_msg"] == ""


def test_a_run_that_ended_while_the_server_was_down_keeps_its_result(
    make_server: Callable[..., Server],
) -> None:
    """kill -9 the server; its evaluation goes on alone and finishes; the next start takes
    the finished result from the task's report instead of running the task again."""
    server = make_server()
    admin = server.client(server.keys.admin)
    task = create(admin, config="slow", variant="base")
    wait_for(admin, task["id"], _mid_run)
    pid = _running_pid(server, task["id"])
    server.kill()
    deadline = time.monotonic() + 120
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(pid), "the evaluation did not end on its own"
    server.start()
    data = wait_for(server.client(server.keys.admin), task["id"], finished)
    assert data["task"]["status"] == 2, data["task"]
    assert data["task"]["finished"] == data["task"]["total"] == 24
    assert data["verdict"]["passed"] is True and data["metric"]["retrieval_metrics"]["mrr"]
    folder = server.workspace / "tasks" / task["id"]
    assert not (folder / "pytest-2.log").exists()  # not run a second time
    assert "its evaluation finished while the server was down" in server.log()
    assert not _task_configs(server)
