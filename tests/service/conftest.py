"""The real server for end-to-end tests: `python -m pytest_ragev.cli serve` on a free port.

Each test talks to it over HTTP with httpx on 127.0.0.1. The configs folder holds the
sample config (the built-in sample dataset), a slow pipeline on a small multilingual
dataset (so a run is long enough to poll, cancel and kill), and two broken configs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_ragev.dataset import write_dataset
from pytest_ragev.server.catalog import SAMPLE
from pytest_ragev.server.keys import new_key
from pytest_ragev.server.store import Store
from tests._remote_server import free_port

ROOT = Path(__file__).resolve().parents[2]

#: Questions in several languages, each with its passage and reference answer.
_FACTS = [
    ("Wann wurde der Kölner Dom fertiggestellt?", "Der Kölner Dom wurde 1880 fertiggestellt.",
     "Der Kölner Dom wurde 1880 fertiggestellt."),
    ("长城有多长？", "长城全长超过两万公里，横跨中国北方。", "长城全长超过两万公里。"),
    ("Какая самая длинная река в Европе?", "Волга — самая длинная река в Европе.",
     "Самая длинная река в Европе — Волга."),
    ("富士山の高さはどれくらいですか？", "富士山の高さは3776メートルです。", "富士山は3776メートルです。"),
    ("한국의 수도는 어디입니까?", "대한민국의 수도는 서울입니다.", "한국의 수도는 서울입니다."),
    ("Who wrote the theory of general relativity?",
     "Albert Einstein published the general theory of relativity in 1915.",
     "Albert Einstein wrote it in 1915."),
]


def multilingual_dataset(folder: Path, questions: int = 24) -> None:
    """``questions`` QA pairs cycling through the languages above (one passage each)."""
    queries, corpus, answers, qrels, qas = {}, {}, {}, [], []
    for qid in range(1, questions + 1):
        question, passage, answer = _FACTS[(qid - 1) % len(_FACTS)]
        queries[qid] = f"{question} ({qid})"
        corpus[qid] = f"{passage} [{qid}]"
        answers[1000 + qid] = answer
        qrels.append((qid, qid))
        qas.append((qid, 1000 + qid))
    write_dataset(folder, queries=queries, corpus=corpus, answers=answers, qrels=qrels, qas=qas)


SLOW_PIPELINE = '''
import time
from pytest_ragev import Answer

class Slow:
    def __init__(self, settings):
        self.delay = float(settings.options.get("delay", 0.15))

    def answer(self, case):
        time.sleep(self.delay)
        # Every third question retrieves a wrong passage first: metrics below 1.
        ids = [case.pids[0] + 1, case.pids[0]] if case.qid % 3 == 0 else list(case.pids)
        return Answer(retrieved=ids, text=case.answer or "")

def build(settings):
    return Slow(settings)
'''


#: Mode "a": the right passage, a clipped answer for odd questions; mode "b": a wrong
#: passage first for odd questions, the reference answer. B against A: retrieval
#: regresses, generation improves, on the same questions.
TRADEOFF_PIPELINE = '''
from pytest_ragev import Answer

class Tradeoff:
    def __init__(self, settings):
        self.mode = settings.options.get("mode", "a")

    def answer(self, case):
        odd = case.qid % 2 == 1
        if self.mode == "a":
            text = (case.answer or "")[:4] if odd else (case.answer or "")
            return Answer(retrieved=list(case.pids), text=text)
        ids = [case.pids[0] + 1, case.pids[0]] if odd else list(case.pids)
        return Answer(retrieved=ids, text=case.answer or "")

def build(settings):
    return Tradeoff(settings)
'''


@pytest.fixture(scope="session")
def configs_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A configs folder, written once; tests copy it when they change it."""
    folder = tmp_path_factory.mktemp("configs")
    multilingual_dataset(folder / "data" / "multi")
    (folder / "slowpipe.py").write_text(SLOW_PIPELINE, encoding="utf-8")
    (folder / "default.toml").write_text(
        f'[dataset]\npath = "{SAMPLE.as_posix()}"\nid = "samples"\n\n'
        '[pipeline]\nname = "builtin"\n\n[thresholds]\nrecall = 0.9\n', encoding="utf-8")
    (folder / "slow.toml").write_text(
        '[dataset]\npath = "data/multi"\nid = "multi"\n\n'
        '[pipeline]\nname = "slowpipe:build"\ndelay = 0.15\n\n'
        '[run]\ncache = true\nconcurrency = 1\n\n'
        '[[variants]]\nname = "faster"\npipeline.delay = 0.05\n', encoding="utf-8")
    (folder / "tradeoff.py").write_text(TRADEOFF_PIPELINE, encoding="utf-8")
    (folder / "tradeoff.toml").write_text(
        '[dataset]\npath = "data/multi"\nid = "multi"\n\n'
        '[pipeline]\nname = "tradeoff:build"\nmode = "a"\n\n'
        '[[variants]]\nname = "b"\npipeline.mode = "b"\n', encoding="utf-8")
    # Long enough that a killed server restarts while its evaluation still runs.
    (folder / "slow-long.toml").write_text(
        '[dataset]\npath = "data/multi"\nid = "multi"\n\n'
        '[pipeline]\nname = "slowpipe:build"\ndelay = 0.5\n\n'
        '[run]\ncache = true\nconcurrency = 1\n', encoding="utf-8")
    (folder / "broken.toml").write_text(
        '[dataset]\npath = "data/multi"\n\n[pipeline]\nname = "builtin"\nchunk_size = -3\n',
        encoding="utf-8")
    (folder / "typo.toml").write_text('[dataset\npath = "data/multi"\n', encoding="utf-8")
    (folder / "ragev-server.toml").write_text(
        '[datasets.multi-copy]\npath = "data/multi"\n\n'
        '[chat.extractive-short]\nmodel = "extractive"\nmax_tokens = 16\n\n'
        '[rerank.lexical2]\nrerank_model = "lexical"\nrerank_top_k = 2\n', encoding="utf-8")
    return folder


@pytest.fixture
def configs(configs_template: Path, tmp_path: Path) -> Path:
    """A private copy of the configs folder (the server writes task configs into it)."""
    import shutil

    target = tmp_path / "configs"
    shutil.copytree(configs_template, target)
    return target


@dataclass
class Keys:
    """One key per role the auth matrix needs."""

    admin: str
    full: str
    admin_none: str
    viewer: str
    other: str


def make_keys(workspace: Path) -> Keys:
    store = Store(workspace / "ragev-server.db")
    made: dict[str, str] = {}
    for name, role, capability, tenant in (
        ("admin", "admin", "run_evaluations", 1), ("full", "admin", "full_access", 1),
        ("admin_none", "admin", "none", 1), ("viewer", "viewer", "none", 1),
        ("other", "admin", "run_evaluations", 2),
    ):
        text, stored = new_key(role=role, capability=capability, tenant=tenant, name=name)
        store.add_key(stored)
        made[name] = text
    store.close()
    return Keys(**made)


@dataclass
class Server:
    """A running ``ragev serve`` process."""

    workspace: Path
    configs: Path
    port: int
    keys: Keys
    args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(default_factory=Path)
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        self.starts += 1
        self.log_path = self.workspace.parent / f"server-{self.port}-{self.starts}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("RAGEV_SERVE_SETTINGS", None)
        with open(self.log_path, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pytest_ragev.cli", "serve", "--workspace",
                 str(self.workspace), "--configs", str(self.configs), "--port", str(self.port),
                 *self.args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server did not start: {self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def log(self) -> str:
        return "".join(p.read_text(encoding="utf-8", errors="replace")
                       for p in sorted(self.workspace.parent.glob(f"server-{self.port}-*.log")))

    def client(self, key: str | None = None, **headers: str) -> httpx.Client:
        if key is not None:
            headers = {"X-API-Key": key, **headers}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def kill_children(self) -> None:
        """End evaluation processes a killed server left behind (they run detached)."""
        store = Store(self.workspace / "ragev-server.db")
        try:
            for row in store.unfinished():
                if row["pid"]:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(row["pid"]), signal.SIGKILL)
        finally:
            store.close()


@pytest.fixture
def make_server(tmp_path: Path, configs: Path) -> Iterator[Callable[..., Server]]:
    """Start servers on free ports (stopped, and their children ended, at teardown).

    ``configs`` replaces the copy of the test configs; ``start=False`` returns the server
    unstarted (its ``start()`` raises when the process exits instead of answering).
    """
    servers: list[Server] = []

    def make(*args: str, workspace: Path | None = None, configs_folder: Path | None = None,
             start: bool = True) -> Server:
        ws = workspace or tmp_path / f"ws{len(servers)}"
        ws.mkdir(parents=True, exist_ok=True)
        keys = make_keys(ws)
        server = Server(workspace=ws, configs=configs_folder or configs, port=free_port(),
                        keys=keys, args=args)
        servers.append(server)
        return server.start() if start else server

    yield make
    for server in servers:
        server.stop()
        server.kill_children()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory,
                  configs_template: Path) -> Iterator[Server]:
    """One server for tests that only read or that make fast tasks."""
    import shutil

    base = tmp_path_factory.mktemp("shared")
    shutil.copytree(configs_template, base / "configs")
    ws = base / "ws"
    ws.mkdir()
    server = Server(workspace=ws, configs=base / "configs", port=free_port(),
                    keys=make_keys(ws), args=("--max-parallel", "2"))
    server.start()
    yield server
    server.stop()
    server.kill_children()


def wait_for(client: httpx.Client, task_id: str, done: Callable[[dict[str, Any]], bool],
             timeout: float = 90.0) -> dict[str, Any]:
    """Poll ``GET /api/v1/evaluation`` until ``done(data)``; the last answer's data."""
    deadline = time.monotonic() + timeout
    data: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = client.get("/api/v1/evaluation", params={"task_id": task_id})
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        if done(data):
            return data
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} never got there; last: {data}")


def logged_in(server: Server, key: str) -> httpx.Client:
    """A client logged in to the dashboard with ``key`` (its session cookie kept)."""
    client = httpx.Client(base_url=server.url, timeout=30)
    assert client.post("/login", data={"key": key}).status_code == 303
    return client


def finished(data: dict[str, Any]) -> bool:
    return bool(data["task"]["status"] in (2, 3))


def create(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/api/v1/evaluation", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data
