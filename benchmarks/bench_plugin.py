"""Plugin overhead benchmarks (run on demand: ``python benchmarks/bench_plugin.py``).

1. ``pytest --help`` with the plugin installed vs. with it disabled (``-p no:ragev``):
   the plugin must add at most 50 ms.
2. A 10,000-question run with a constant-time pipeline vs. 10,000 bare parametrized
   pytest items: at most 1.5x.
3. 200 questions against a local HTTP server with 100 ms latency at
   ``--ragev-concurrency N``: within 1.3x of 200 x 0.1 s / N.

Each figure is the median of several runs; the machine is noisy, read the ratios.
"""

from __future__ import annotations

import argparse
import http.server
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from pytest_ragev.dataset import write_dataset


def _time(cmd: list[str], cwd: Path, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        samples.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return statistics.median(samples)


def bench_help(repeats: int) -> None:
    # Interleave the two commands so that drift in the machine's load hits both alike.
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        base = [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"]
        with_plugin: list[float] = []
        without: list[float] = []
        for _ in range(repeats):
            with_plugin.append(_time(base, cwd, 1))
            without.append(_time([*base, "-p", "no:ragev"], cwd, 1))
    on, off = statistics.median(with_plugin), statistics.median(without)
    print(
        f"pytest --help: with plugin {on * 1000:.0f} ms, without {off * 1000:.0f} ms "
        f"(medians of {repeats}), overhead {(on - off) * 1000:+.0f} ms (target <= +50 ms)"
    )


def _write_questions(folder: Path, count: int) -> None:
    write_dataset(
        folder,
        queries={qid: f"question number {qid}" for qid in range(1, count + 1)},
        corpus={pid: f"passage number {pid} about topic {pid % 97}" for pid in range(1, count + 1)},
        answers={qid: f"answer number {qid}" for qid in range(1, count + 1)},
        qrels=[(qid, qid) for qid in range(1, count + 1)],
        qas=[(qid, qid) for qid in range(1, count + 1)],
    )


CONSTANT_CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return object()

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return Answer(retrieved=[case.qid, case.qid + 1], text=case.answer)
    """
)


def bench_items(count: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        _write_questions(cwd / "data", count)
        (cwd / "ragev.toml").write_text(
            '[dataset]\npath = "data"\n[pipeline]\nname = "constant"\n', encoding="utf-8"
        )
        (cwd / "conftest.py").write_text(CONSTANT_CONFTEST, encoding="utf-8")
        (cwd / "bare").mkdir()
        (cwd / "bare" / "test_bare.py").write_text(
            "import pytest\n\n"
            f"@pytest.mark.parametrize('qid', range({count}))\n"
            "def test_q(qid):\n    assert qid >= 0\n",
            encoding="utf-8",
        )
        common = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                  "no:hypothesispytest"]
        ours = _time(
            [*common, "--ragev-config", "ragev.toml", "--ragev-concurrency", "1"], cwd, repeats
        )
        bare = _time([*common, "bare"], cwd, repeats)
    print(
        f"{count} questions: ragev {ours:.2f} s, bare parametrized {bare:.2f} s, "
        f"ratio {ours / bare:.2f}x (target <= 1.5x), {ours / count * 1000:.2f} ms/question"
    )


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    latency = 0.1

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        time.sleep(self.latency)
        payload = json.dumps({"answer": f"answer {body['qid']}", "ids": [body["qid"]]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


HTTP_CONFTEST = textwrap.dedent(
    """
    import json, urllib.request
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return object()

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        request = urllib.request.Request(
            settings.options["url"], data=json.dumps({"qid": case.qid}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.load(response)
        return Answer(retrieved=body["ids"], text=body["answer"])
    """
)


def bench_concurrency(count: int, levels: list[int], repeats: int) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/answer"
        with tempfile.TemporaryDirectory() as tmp:
            cwd = Path(tmp)
            _write_questions(cwd / "data", count)
            (cwd / "ragev.toml").write_text(
                f'[dataset]\npath = "data"\n[pipeline]\nname = "http-bench"\nurl = "{url}"\n',
                encoding="utf-8",
            )
            (cwd / "conftest.py").write_text(HTTP_CONFTEST, encoding="utf-8")
            command = [
                sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "-p", "no:hypothesispytest", "--ragev-config", "ragev.toml",
            ]
            # The fixed cost of a run (interpreter, pytest, dataset, scoring): one question.
            startup = _time([*command, "--ragev-limit", "1"], cwd, repeats) - _SlowHandler.latency
            for level in levels:
                elapsed = _time([*command, "--ragev-concurrency", str(level)], cwd, repeats)
                ideal = count * _SlowHandler.latency / level
                print(
                    f"{count} questions x 100 ms at concurrency {level}: {elapsed:.2f} s wall, "
                    f"start-up {startup:.2f} s, pipeline phase {elapsed - startup:.2f} s vs ideal "
                    f"{ideal:.2f} s: ratio {(elapsed - startup) / ideal:.2f}x (target <= 1.3x); "
                    f"wall / ideal {elapsed / ideal:.2f}x"
                )
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--only", choices=("help", "items", "concurrency"))
    args = parser.parse_args()
    if args.only in (None, "help"):
        bench_help(max(args.repeats, 7))
    if args.only in (None, "items"):
        bench_items(args.questions, args.repeats)
    if args.only in (None, "concurrency"):
        bench_concurrency(200, [4, 8], max(args.repeats // 2, 1))


if __name__ == "__main__":
    main()
