"""Load on ``ragev serve`` while an evaluation runs: pollers, the task's slowdown, POST, lists.

    python benchmarks/bench_server.py [--seconds 10] [--pollers 50] [--rate 11] [--rounds 3]

Starts the real server (uvicorn, one process) on a free 127.0.0.1 port with 1,000
finished tasks already stored and measures from a second process:

* the target of issue #29: ``--pollers`` keep-alive connections polling
  ``GET /api/v1/evaluation?task_id=`` of a running evaluation (the built-in pipeline on
  the sample, answers not cached so the evaluation works) at ``--rate`` requests a
  second each, on a fixed schedule (latency counted from the scheduled time, so a slow
  answer cannot hide the queue behind it), for as long as the evaluation runs:
  requests a second answered and latency percentiles; and the evaluation's own time
  with and without the pollers (``--rounds`` of each, interleaved), whose ratio is the
  slowdown the pollers cause;
* the same pollers as fast as answers come, for ``--seconds`` while evaluations run back
  to back, and ``/healthz`` (no key, no database) under that load as the framework's
  floor;
* ``POST /api/v1/evaluation`` one at a time, and ``GET /api/v1/evaluations`` with 1,000
  stored tasks (the default page and all 1,000 in one page).

The load client is a small asyncio HTTP/1.1 client (no third-party code in the
measuring loop) and shares the two cores with the server and the evaluation: the
figures are for the whole machine under that load. The machine's load average is
printed before and after, since other work on a shared machine moves the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_ragev.server.catalog import SAMPLE  # noqa: E402
from pytest_ragev.server.keys import new_key  # noqa: E402
from pytest_ragev.server.settings import ENV, ServerSettings  # noqa: E402
from pytest_ragev.server.store import Store  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        try:
            return await self._request(method, path, body)
        except (asyncio.IncompleteReadError, ConnectionError):
            # The server closed an idle keep-alive connection: open a new one.
            self.close()
            self.writer = None
            return await self._request(method, path, body)

    async def _request(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {self.key}\r\n"
                f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n")
        self.writer.write(head.encode() + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = next(int(line.split(":", 1)[1]) for line in lines
                      if line.lower().startswith("content-length:"))
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _load(port: int, key: str, path: str, pollers: int, seconds: float | None,
                rate: float | None = None,
                until: asyncio.Event | None = None) -> dict[str, float]:
    """``pollers`` connections for ``seconds`` (or until ``until`` is set); each sends
    ``rate`` requests a second on a fixed schedule (latency counted from the scheduled
    time, so a slow answer cannot hide the queue behind it), or as fast as answers come
    when ``rate`` is ``None``."""
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds if seconds is not None else float("inf")

    def going() -> bool:
        return time.perf_counter() < stop and not (until is not None and until.is_set())

    async def poller(index: int) -> None:
        nonlocal errors
        client = Client(port, key)
        period = 1.0 / rate if rate else 0.0
        due = time.perf_counter() + period * index / max(pollers, 1)
        try:
            while going():
                if period:
                    delay = due - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    if not going():
                        break
                started = due if period else time.perf_counter()
                due += period
                status, _ = await client.request("GET", path)
                latencies.append(time.perf_counter() - started)
                if status != 200:
                    errors += 1
        finally:
            client.close()

    began = time.perf_counter()
    await asyncio.gather(*(poller(i) for i in range(pollers)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "requests": len(latencies), "per_s": len(latencies) / elapsed, "errors": errors,
        "seconds": elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "max_ms": latencies[-1] * 1000,
    }


async def _timed(client: Client, method: str, path: str, body: bytes = b"",
                 repeat: int = 20) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        status, _ = await client.request(method, path, body)
        times.append((time.perf_counter() - started) * 1000)
        assert status == 200, status
    return times


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _seed(workspace: Path, count: int) -> str:
    """1,000 finished tasks with real-sized params and metrics; returns an admin key."""
    store = Store(workspace / "ragev-server.db")
    text, stored = new_key(role="admin", capability="run_evaluations", tenant=1)
    store.add_key(stored)
    metric = {"retrieval_metrics": {m: 0.5 for m in ("precision", "recall", "ndcg3", "ndcg10",
                                                     "mrr", "map")},
              "generation_metrics": {m: 0.25 for m in ("bleu1", "bleu2", "bleu4", "rouge1",
                                                       "rouge2", "rougel")},
              "counts": {"recall": 87}}
    params = {"dataset": {"id": "default", "fingerprint": "f" * 64},
              "pipeline": {"name": "builtin", "chunk_size": 512, "chat": {"model": "extractive"}},
              "metrics": {"profile": "weknora"}, "thresholds": {"recall": 0.9}}
    base_ms = int(time.time() * 1000) - count * 60_000
    for i in range(count):
        store.add_task({
            "id": f"evaluation_1_{base_ms + i * 60_000}_{i:08x}_default", "tenant_id": 1,
            "dataset_id": "default", "config": "default", "knowledge_base_id": "default",
            "variants": [], "status": 2, "total": 87, "finished": 87,
            "created_ms": base_ms + i * 60_000, "start_time": "2026-01-01T00:00:00.000+00:00",
            "end_time": "2026-01-01T00:00:05.000+00:00", "duration": 5.0, "params": params,
            "metric": metric, "verdict": {"passed": True, "failures": [], "errors": 0},
        })
    store.close()
    return text


async def _task_status(client: Client, task_id: str) -> int:
    _, raw = await client.request("GET", f"/api/v1/evaluation?task_id={task_id}")
    return int(json.loads(raw)["data"]["task"]["status"])


async def _evaluation(port: int, key: str, workspace: Path, args: argparse.Namespace, *,
                      polled: bool) -> tuple[float, float, dict[str, float] | None]:
    """One evaluation of the sample, alone or with the pollers on it for as long as it
    runs: (seconds from create to end, pytest's own seconds, the pollers' figures)."""
    client = Client(port, key)
    started = time.perf_counter()
    _, raw = await client.request("POST", "/api/v1/evaluation", b"{}")
    task_id = json.loads(raw)["data"]["id"]
    while await _task_status(client, task_id) == 0:
        await asyncio.sleep(0.02)
    done = asyncio.Event()
    load = (asyncio.create_task(_load(port, key, f"/api/v1/evaluation?task_id={task_id}",
                                      args.pollers, None, rate=args.rate, until=done))
            if polled else None)
    while (status := await _task_status(client, task_id)) < 2:
        await asyncio.sleep(0.2)
    wall = time.perf_counter() - started
    done.set()
    figures = await load if load is not None else None
    client.close()
    assert status == 2, f"the evaluation failed: see {workspace / 'tasks' / task_id}"
    log = (workspace / "tasks" / task_id / "pytest-1.log").read_text(encoding="utf-8")
    found = re.search(r" in ([0-9.]+)s", log)
    return wall, float(found.group(1)) if found else float("nan"), figures


async def _main(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="ragev-bench-"))
    configs, workspace = base / "configs", base / "ws"
    configs.mkdir()
    workspace.mkdir()
    # Answers not cached: every evaluation does its work (the KB comes from the cache).
    (configs / "default.toml").write_text(
        f'[dataset]\npath = "{SAMPLE.as_posix()}"\nid = "default"\n\n'
        '[pipeline]\nname = "builtin"\n\n[run]\ncache = false\n', encoding="utf-8")
    key = _seed(workspace, 1000)
    port = _free_port()
    log = open(base / "server.log", "wb")  # noqa: SIM115 - open for the server's lifetime
    if args.stack == "ragev":
        command = [sys.executable, "-m", "pytest_ragev.cli", "serve", "--workspace",
                   str(workspace), "--configs", str(configs), "--port", str(port)]
        env = dict(os.environ)
    else:
        # The same app under uvicorn's own command, to compare event loops and parsers.
        loop, http = args.stack.split("+")
        settings = ServerSettings(workspace=workspace, configs=configs, port=port)
        env = {**os.environ, ENV: settings.to_env()}
        command = [sys.executable, "-m", "uvicorn", "--factory", "--port", str(port),
                   "--loop", loop, "--http", http, "--log-level", "warning",
                   "--no-access-log", "pytest_ragev.server.app:app_from_environment"]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=base, env=env)
    print(f"machine: {os.cpu_count()} cores, load average before "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        client = Client(port, key)
        for _ in range(200):
            try:
                await client.request("GET", "/healthz")
                break
            except OSError:
                client = Client(port, key)
                await asyncio.sleep(0.1)
        # A first evaluation builds the KB cache; the timed ones load it.
        await _evaluation(port, key, workspace, args, polled=False)
        alone: list[tuple[float, float]] = []
        loaded: list[tuple[float, float]] = []
        polls: list[dict[str, float]] = []
        cpu_alone = cpu_polled = 0.0  # the server's CPU seconds in each kind of run
        for _ in range(args.rounds):
            before = _cpu_seconds(server.pid)
            wall, own, _ = await _evaluation(port, key, workspace, args, polled=False)
            alone.append((wall, own))
            middle = _cpu_seconds(server.pid)
            wall, own, figures = await _evaluation(port, key, workspace, args, polled=True)
            assert figures is not None
            loaded.append((wall, own))
            polls.append(figures)
            cpu_alone += middle - before
            cpu_polled += _cpu_seconds(server.pid) - middle

        # Evaluations back to back for the as-fast-as-answered run.
        body = json.dumps({"dataset_id": "default"}).encode()
        queued = 2 + int(args.seconds)
        post_ms = await _timed(client, "POST", "/api/v1/evaluation", body, repeat=queued)
        _, raw = await client.request("GET", "/api/v1/evaluations?page_size=50&status=1")
        while not json.loads(raw)["data"]["items"]:
            await asyncio.sleep(0.2)
            _, raw = await client.request("GET", "/api/v1/evaluations?page_size=50&status=1")
        running = json.loads(raw)["data"]["items"][0]["task"]["id"]
        detail = f"/api/v1/evaluation?task_id={running}"
        floor_a = await _load(port, key, "/healthz", args.pollers, args.seconds / 2)
        fastest = await _load(port, key, detail, args.pollers, args.seconds)
        _, raw = await client.request("GET", "/api/v1/evaluations?page_size=50&status=1")
        still = len(json.loads(raw)["data"]["items"])
        floor_b = await _load(port, key, "/healthz", args.pollers, args.seconds / 2)
        page_ms = await _timed(client, "GET", "/api/v1/evaluations")
        all_ms = await _timed(client, "GET", "/api/v1/evaluations?page_size=1000")
        client.close()
    finally:
        server.terminate()
        server.wait(30)
        log.close()
    requests = sum(p["requests"] for p in polls)
    rate = requests / sum(p["seconds"] for p in polls)
    p99 = statistics.median(p["p99_ms"] for p in polls)
    med_alone = statistics.median(w for w, _ in alone)
    med_loaded = statistics.median(w for w, _ in loaded)
    own_alone = statistics.median(o for _, o in alone)
    own_loaded = statistics.median(o for _, o in loaded)
    print(f"evaluation of the sample (87 questions, answers not cached), {args.rounds} round(s) "
          "each, interleaved:")
    each_alone = ", ".join(f"{w:.2f}" for w, _ in alone)
    each_loaded = ", ".join(f"{w:.2f}" for w, _ in loaded)
    each_p99 = ", ".join(f"{p['p99_ms']:.1f}" for p in polls)
    print(f"  alone: median {med_alone:.2f} s create to end ({each_alone}), "
          f"pytest's own {own_alone:.2f} s")
    print(f"  with {args.pollers} pollers at {args.rate:g}/s each: median {med_loaded:.2f} s "
          f"({each_loaded}), pytest's own {own_loaded:.2f} s")
    print(f"  slowdown (median with / median alone): {med_loaded / med_alone:.2f} create to end, "
          f"{own_loaded / own_alone:.2f} pytest's own (target <= 1.20)")
    print(f"GET detail by {args.pollers} pollers at {args.rate:g}/s each "
          f"(offered {args.pollers * args.rate:.0f} req/s) while the evaluations ran: "
          f"{rate:.0f} req/s answered, p99 median of the rounds {p99:.1f} ms "
          f"({each_p99}), p50 "
          f"{statistics.median(p['p50_ms'] for p in polls):.1f} ms, max "
          f"{max(p['max_ms'] for p in polls):.1f} ms, {sum(p['errors'] for p in polls):.0f} "
          f"errors of {requests} (target >= 500 req/s, p99 < 50 ms)")
    extra = (cpu_polled - cpu_alone * sum(w for w, _ in loaded) / sum(w for w, _ in alone))
    print(f"  server CPU: {cpu_alone:.2f} s over the runs alone, {cpu_polled:.2f} s over the "
          f"polled ones: {1000 * extra / max(requests, 1):.2f} ms per polled request")
    print(f"GET detail, {args.pollers} pollers as fast as answered, {args.seconds:.0f} s while an "
          f"evaluation ran (still running at the end: {bool(still)}): {fastest['per_s']:.0f} "
          f"req/s, p50 {fastest['p50_ms']:.1f} ms, p99 {fastest['p99_ms']:.1f} ms, "
          f"max {fastest['max_ms']:.1f} ms, {fastest['errors']} errors of {fastest['requests']}")
    floor = (floor_a["per_s"] + floor_b["per_s"]) / 2
    print(f"GET /healthz (floor), same load, before/after: {floor_a['per_s']:.0f} / "
          f"{floor_b['per_s']:.0f} req/s, p99 {floor_a['p99_ms']:.1f} / "
          f"{floor_b['p99_ms']:.1f} ms; detail/healthz throughput ratio "
          f"{fastest['per_s'] / floor:.2f}")
    print(f"POST /api/v1/evaluation: median {statistics.median(post_ms):.1f} ms, "
          f"max {max(post_ms):.1f} ms over {len(post_ms)}")
    print(f"GET /api/v1/evaluations with 1,000 stored: default page (20) median "
          f"{statistics.median(page_ms):.1f} ms; page_size=1000 median "
          f"{statistics.median(all_ms):.1f} ms, max {max(all_ms):.1f} ms")
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--pollers", type=int, default=50)
    parser.add_argument("--stack", default="ragev",
                        help="'ragev' (ragev serve) or LOOP+HTTP for uvicorn, e.g. "
                             "asyncio+h11 or uvloop+httptools")
    parser.add_argument("--rate", type=float, default=11.0,
                        help="requests a second per poller in the paced runs (default 11: "
                             "50 pollers offer 550 a second)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="evaluations timed alone and with the pollers, each (default 3)")
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
