"""Load on ``ragev serve`` while an evaluation runs: pollers, POST latency, the list of 1,000.

    python benchmarks/bench_server.py [--seconds 10] [--pollers 50]

Starts the real server (uvicorn, one process) on a free 127.0.0.1 port with 1,000
finished tasks already stored, keeps the built-in pipeline evaluating the sample
dataset for the whole run (tasks queued back to back, so one evaluation process is
always busy), and measures from a second process:

* ``--pollers`` keep-alive connections polling ``GET /api/v1/evaluation?task_id=``
  of the running task as fast as they can, for ``--seconds``; throughput and latency
  percentiles. The same load on ``/healthz`` (no key, no database) runs interleaved
  before and after as the framework's floor, and the ratio is printed.
* ``POST /api/v1/evaluation`` one at a time (median and max of 20).
* ``GET /api/v1/evaluations`` with 1,000 stored tasks: the default page and all
  1,000 in one page (median of 20 each).

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


async def _load(port: int, key: str, path: str, pollers: int, seconds: float,
                rate: float | None = None) -> dict[str, float]:
    """``pollers`` connections for ``seconds``; each sends ``rate`` requests a second on a
    fixed schedule (latency counted from the scheduled time, so a slow answer cannot hide
    the queue behind it), or as fast as answers come when ``rate`` is ``None``."""
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def poller(index: int) -> None:
        nonlocal errors
        client = Client(port, key)
        period = 1.0 / rate if rate else 0.0
        due = time.perf_counter() + period * index / max(pollers, 1)
        try:
            while time.perf_counter() < stop:
                if period:
                    delay = due - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
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


async def _main(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="ragev-bench-"))
    configs, workspace = base / "configs", base / "ws"
    configs.mkdir()
    workspace.mkdir()
    (configs / "default.toml").write_text(
        f'[dataset]\npath = "{SAMPLE.as_posix()}"\n\n[pipeline]\nname = "builtin"\n',
        encoding="utf-8")
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
        body = json.dumps({"dataset_id": "default"}).encode()
        # Evaluations back to back for the whole measurement (each ~4-8 s on the sample).
        queued = 2 + int(args.seconds)
        post_ms = await _timed(client, "POST", "/api/v1/evaluation", body, repeat=queued)
        _, raw = await client.request("GET", "/api/v1/evaluations?page_size=50&status=1")
        while not json.loads(raw)["data"]["items"]:
            await asyncio.sleep(0.2)
            _, raw = await client.request("GET", "/api/v1/evaluations?page_size=50&status=1")
        running = json.loads(raw)["data"]["items"][0]["task"]["id"]
        detail = f"/api/v1/evaluation?task_id={running}"
        floor_a = await _load(port, key, "/healthz", args.pollers, args.seconds / 2)
        cpu_before = _cpu_seconds(server.pid)
        paced = await _load(port, key, detail, args.pollers, args.seconds, rate=args.rate)
        cpu_paced = _cpu_seconds(server.pid) - cpu_before
        polls = await _load(port, key, detail, args.pollers, args.seconds)
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
    floor = (floor_a["per_s"] + floor_b["per_s"]) / 2
    print(f"GET detail, {args.pollers} pollers at {args.rate:g}/s each, {args.seconds:.0f} s "
          f"while an evaluation ran: {paced['per_s']:.0f} req/s, p50 {paced['p50_ms']:.1f} ms, "
          f"p99 {paced['p99_ms']:.1f} ms, max {paced['max_ms']:.1f} ms, {paced['errors']} errors "
          f"of {paced['requests']}")
    print(f"  server CPU in the paced run: {cpu_paced:.2f} s over {args.seconds:.0f} s "
          f"({100 * cpu_paced / args.seconds:.0f}% of one core), "
          f"{1000 * cpu_paced / max(paced['requests'], 1):.2f} ms per request")
    print(f"GET detail, {args.pollers} pollers as fast as answered, {args.seconds:.0f} s while an "
          f"evaluation ran (still running at the end: {bool(still)}): {polls['per_s']:.0f} req/s, "
          f"p50 {polls['p50_ms']:.1f} ms, p99 {polls['p99_ms']:.1f} ms, "
          f"max {polls['max_ms']:.1f} ms, {polls['errors']} errors of {polls['requests']}")
    print(f"GET /healthz (floor), same load, before/after: {floor_a['per_s']:.0f} / "
          f"{floor_b['per_s']:.0f} req/s, p99 {floor_a['p99_ms']:.1f} / "
          f"{floor_b['p99_ms']:.1f} ms; detail/healthz throughput ratio "
          f"{polls['per_s'] / floor:.2f}")
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
    parser.add_argument("--rate", type=float, default=10.0,
                        help="requests a second per poller in the paced run (default 10)")
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
