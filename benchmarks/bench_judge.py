"""Judged metrics: what judging adds to a run's wall time, and what a rerun costs.

Run on demand (not part of the test suite)::

    python benchmarks/bench_judge.py                      # 400 questions, 100 ms judge
    python benchmarks/bench_judge.py --questions 200 --judge-ms 50 --repeats 3

A judge on 127.0.0.1 (an OpenAI-compatible chat endpoint written here) answers every
request after ``--judge-ms`` with a fixed verdict. A conftest pipeline answers each
question at once. The same ``pytest --ragev-config`` run is timed, ``--repeats`` times,
interleaved, in fresh processes:

* **without a judge** (``[metrics] judged`` empty);
* **with a judge, cold**: ``judged = ["correctness"]``, an empty verdict store, at
  ``--ragev-concurrency 8``: one judge call per question;
* **rerun**: the same again with the store the cold run wrote: no judge call.

It prints the medians, the time judging added (cold − without) against the ideal
``questions × judge time / 8`` (target: <= 1.3x), and the judge calls of the rerun
(target: 0).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pytest_ragev.dataset import write_dataset

CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return dict(corpus)

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return Answer(retrieved=list(case.pids), text=kb[case.pids[0]])
    """
)


class Judge:
    """A chat endpoint that answers after ``delay`` seconds and counts the calls."""

    def __init__(self, delay: float) -> None:
        self.calls = 0
        lock = threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the preflight's GET /models
                self._send({"data": [{"id": "judge"}]})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    judge.calls += 1
                time.sleep(delay)
                verdict = json.dumps({"score": 1, "reason": "the reference's facts"})
                self._send({"choices": [{"message": {"content": verdict}}],
                            "usage": {"prompt_tokens": 200, "completion_tokens": 12}})

            def _send(self, body: Any) -> None:
                payload = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def project(root: Path, questions: int) -> None:
    corpus = {q: f"Passage {q}: the answer to question {q} is {q * 7}." for q in
              range(1, questions + 1)}
    write_dataset(root / "data", queries={q: f"What is the answer to question {q}?"
                                          for q in corpus},
                  corpus=corpus, answers={10_000 + q: corpus[q] for q in corpus},
                  qrels=[(q, q) for q in corpus], qas=[(q, 10_000 + q) for q in corpus])
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")


def config(root: Path, judge_url: str | None) -> None:
    judged = (f'[metrics]\njudged = ["correctness"]\n[judge]\nbase_url = "{judge_url}"\n'
              'model = "judge"\nstore = "verdicts.jsonl"\n') if judge_url else ""
    (root / "ragev.toml").write_text(
        '[dataset]\npath = "data"\nid = "bench"\n[pipeline]\nname = "oracle"\n' + judged,
        encoding="utf-8")


def timed(root: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--ragev-config", "ragev.toml", "-q",
         "--ragev-concurrency", "8", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=root, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"pytest failed ({result.returncode}):\n{result.stdout[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--judge-ms", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    judge = Judge(args.judge_ms / 1000)
    without, cold, rerun, rerun_calls = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project(root, args.questions)
        for _ in range(args.repeats):
            config(root, None)
            without.append(timed(root))
            config(root, judge.url)
            (root / "verdicts.jsonl").unlink(missing_ok=True)
            before = judge.calls
            cold.append(timed(root))
            assert judge.calls - before == args.questions, judge.calls - before
            before = judge.calls
            rerun.append(timed(root))
            rerun_calls.append(judge.calls - before)
        shutil.rmtree(root / "data")
    a, c, r = (statistics.median(x) for x in (without, cold, rerun))
    ideal = args.questions * args.judge_ms / 1000 / 8
    print(f"{args.questions} questions, judge {args.judge_ms:g} ms, concurrency 8, medians of "
          f"{args.repeats}: without a judge {a:.2f} s, with a judge (cold) {c:.2f} s, rerun "
          f"{r:.2f} s")
    print(f"judging added {c - a:.2f} s; ideal {ideal:.2f} s; ratio {(c - a) / ideal:.2f}x "
          f"(target <= 1.3x); rerun judge calls {max(rerun_calls)} (target 0); rerun vs "
          f"without {r / a:.2f}x")


if __name__ == "__main__":
    main()
