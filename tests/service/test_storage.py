"""A locked database, a full disk, a read-only workspace (issue #29): each answers in the
original's envelope, loses no task, and the queue moves on once the cause is gone.

The disk tests mount a small tmpfs for the workspace (they need root, else they skip):
only a real filesystem says "no space left" or "read-only" the way a disk does.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import Server, create, finished, wait_for

pytestmark = pytest.mark.slow


def _is_envelope(response: httpx.Response, status: int, code: int, words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert response.json()["success"] is False and error["code"] == code
    assert words in error["message"], error


def test_a_locked_database_answers_503_and_loses_no_task(
    make_server: Callable[..., Server],
) -> None:
    """Another process holds the database write-locked for 12 s while a task runs: a
    create answers 503 in the envelope within the request's patience, reads go on
    answering at once, the running task ends as its report says (not "lost"), and
    creates work again once the lock is gone."""
    server = make_server()
    admin = server.client(server.keys.admin)
    viewer = server.client(server.keys.viewer)
    task = create(admin, config="slow", variant="base")
    wait_for(admin, task["id"], lambda d: d["task"]["status"] == 1)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True)\n"
         "time.sleep(float(sys.argv[2])); db.execute('ROLLBACK')\n",
         str(server.workspace / "ragev-server.db"), "12"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            waiting = pool.submit(admin.post, "/api/v1/evaluation", json={"config": "slow"})
            time.sleep(0.5)
            for request in (lambda: httpx.get(f"{server.url}/healthz", timeout=30),
                            lambda: viewer.get("/api/v1/evaluation",
                                               params={"task_id": task["id"]})):
                asked = time.monotonic()
                assert request().status_code == 200
                assert time.monotonic() - asked < 2.0  # not queued behind the waiting create
            response = waiting.result()
            assert time.monotonic() - started < 10.0
        _is_envelope(response, 503, 1008, "is locked by another process; try again")
        assert response.headers["retry-after"] == "5"
    finally:
        holder.wait(30)
    data = wait_for(admin, task["id"], finished)
    assert data["task"]["status"] == 2, data["task"]  # not "the server lost track"
    assert data["task"]["finished"] == data["task"]["total"] == 24
    again = create(admin, config="slow", variant="faster", limit=2)
    assert wait_for(admin, again["id"], finished)["task"]["status"] == 2
    assert admin.get("/api/v1/evaluations").json()["data"]["total"] == 2  # the refused one: none
    log = server.log()
    assert "Traceback" not in log and "is locked by another process" in log
    # The lock outlasted the runner's patience too: its writes were retried, not lost.
    assert re.search(rf"task {task['id']}: the server's database .* is locked by another "
                     r"process; try again once it lets go; (retrying|trying again)", log), log
    assert re.search(rf"task {task['id']}: the storage works again", log), log


@contextlib.contextmanager
def _mounted(folder: Path, options: str) -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 32 MiB filesystem of its own (a tmpfs), for the workspace."""
    with _mounted(tmp_path / "disk", "size=32m,mode=0755") as folder:
        yield folder


def _fill(folder: Path) -> Path:
    """Fill the filesystem of ``folder`` to the last byte; the file that does it."""
    filler = folder / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)  # unbuffered: no flush to fail
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_loses_no_task_and_the_queue_moves_on(
    make_server: Callable[..., Server], small_disk: Path,
) -> None:
    server = make_server(workspace=small_disk)
    admin = server.client(server.keys.admin)
    running = create(admin, config="slow", variant="base")
    queued = [create(admin, config="slow", variant="faster", limit=3) for _ in range(2)]
    wait_for(admin, running["id"], lambda d: d["task"]["finished"] >= 2 or finished(d))
    filler = _fill(small_disk)
    try:
        response = admin.post("/api/v1/evaluation", json={"config": "slow", "limit": 1})
        # The database may still have room in its log: then the task is accepted; else
        # the answer is the envelope's 503, never a 500 in text.
        if response.status_code != 200:
            _is_envelope(response, 503, 1008, "is full; free space and try again")
        accepted = [response.json()["data"]["id"]] if response.status_code == 200 else []
        time.sleep(6)  # the running task meets the full disk; the queue cannot start
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        states = {item["task"]["id"]: item["task"]["status"] for item in
                  admin.get("/api/v1/evaluations").json()["data"]["items"]}
        assert all(states[task["id"]] == 0 for task in queued), states
    finally:
        filler.unlink()
    first = wait_for(admin, running["id"], finished, timeout=120)
    assert first["task"]["status"] in (2, 3)
    if first["task"]["status"] == 3:
        assert first["task"]["err_msg"], first["task"]  # a reason, never silence
    for task_id in [task["id"] for task in queued] + accepted:
        assert wait_for(admin, task_id, finished, timeout=120)["task"]["status"] == 2
    log = server.log()
    assert "Traceback" not in log, log
    assert "is full" in log


def test_task_folders_that_turn_read_only_keep_the_task_queued(
    make_server: Callable[..., Server], tmp_path: Path,
) -> None:
    """The task folders' filesystem turns read-only: a new task stays queued, saying why,
    and starts once the folders are writable again (the queue moves on, nothing lost)."""
    workspace = tmp_path / "ws"
    with _mounted(workspace / "tasks", "size=16m,mode=0755") as tasks:
        server = make_server(workspace=workspace)
        admin = server.client(server.keys.admin)
        done = create(admin, config="slow", variant="faster", limit=2)
        wait_for(admin, done["id"], finished)
        subprocess.run(["mount", "-o", "remount,ro", str(tasks)], check=True)
        try:
            task = create(admin, config="slow", variant="faster", limit=2)
            waiting = wait_for(admin, task["id"], lambda d: bool(d["task"]["err_msg"]))
            assert waiting["task"]["status"] == 0 and waiting["queue_position"] == 1
            assert waiting["task"]["err_msg"] == (
                f"waiting to start: {tasks / task['id']} is not writable (Read-only file "
                "system); make it writable and try again")
            time.sleep(3)  # it keeps waiting, it is not failed
            assert admin.get("/api/v1/evaluation", params={"task_id": task["id"]}).json()[
                "data"]["task"]["status"] == 0
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(tasks)], check=True)
        data = wait_for(admin, task["id"], finished)
        assert data["task"]["status"] == 2 and data["task"]["err_msg"] == ""
        server.stop()
    assert "Traceback" not in server.log()


def test_a_read_only_workspace_is_refused_at_start_with_the_fix(
    make_server: Callable[..., Server], small_disk: Path, tmp_path: Path,
) -> None:
    (small_disk / "ws").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        for workspace in (small_disk / "ws", small_disk / "new"):
            done = subprocess.run(
                [sys.executable, "-m", "pytest_ragev.cli", "serve", "--workspace",
                 str(workspace), "--configs", str(tmp_path), "--port", "0"],
                capture_output=True, text=True, timeout=60,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
            assert done.returncode == 2, done.stderr
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
            assert lines[0].startswith(f"ragev: error: --workspace {workspace}")
            assert "Read-only file system" in lines[0]
            assert lines[0].endswith(("or pass another --workspace",
                                      "pass a folder you may write to"))
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert not any(small_disk.rglob("*.db"))
