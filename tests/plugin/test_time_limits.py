"""End to end: a hung pipeline cannot hold a run (#16 item 6).

``[run] timeout`` fails the one question whose call takes too long (the call is
abandoned); ``[run] deadline`` stops the run once it has answered for that long (status
3, exit 2); and Ctrl-C or SIGTERM under ``--ragev-concurrency`` > 1 abandons the running
calls instead of waiting for them forever. Every run is a subprocess with a hard
timeout: without the fix it would hang, and the test fails instead of hanging the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._pytester import read_json

#: Every test runs pytest in a subprocess and waits out a timeout, a deadline or a signal.
pytestmark = pytest.mark.slow

Project = Callable[..., Path]

#: Long enough that no run may wait for it, short enough to free its thread eventually.
HANG_S = 120

HANGS_ON = textwrap.dedent(
    """
    import pathlib, time
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        if case.qid == {qid}:
            pathlib.Path("hung.txt").write_text("q{qid} hängt", encoding="utf-8")
            time.sleep({hang})
        return Answer(retrieved=list(case.pids), text=case.answer or "")
    """
)


def _run(folder: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--ragev-config", "ragev.toml",
         "--ragev-report", "r.json", "-p", "no:cacheprovider", *args],
        cwd=folder, capture_output=True, text=True, timeout=timeout, check=False,
    )


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_a_question_past_the_timeout_fails_alone(
    pytester: pytest.Pytester, make_project: Project, concurrency: str
) -> None:
    make_project("[run]\ntimeout = 1.5\n", conftest=HANGS_ON.format(qid=3, hang=HANG_S))
    done = _run(pytester.path, "--ragev-concurrency", concurrency)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    samples = {s["qid"]: s for s in read_json(pytester.path / "r.json")["data"]["samples"]}
    assert samples[3]["error"].startswith(
        "QuestionTimeout: no answer within [run] timeout = 1.5 s; the call was abandoned")
    assert all(samples[qid]["error"] is None for qid in (1, 2, 4, 5))
    # q3, and the verdict (one question raised an error).
    assert "2 failed, 4 passed" in done.stdout.splitlines()[-1]


def test_the_deadline_stops_the_run_with_status_3(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[run]\ndeadline = 2\n", conftest=HANGS_ON.format(qid=2, hang=HANG_S))
    done = _run(pytester.path, "--ragev-concurrency", "2")
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    task = read_json(pytester.path / "r.json")["data"]["task"]
    assert task["status"] == 3
    assert task["err_msg"].startswith("interrupted by [run] deadline = 2 s")
    assert task["finished"] < task["total"] == 5
    assert "[run] deadline = 2 s passed" in done.stdout + done.stderr


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_abandons_hung_calls_under_concurrency(
    pytester: pytest.Pytester, make_project: Project, signum: signal.Signals
) -> None:
    make_project(conftest=HANGS_ON.format(qid=2, hang=HANG_S))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--ragev-config", "ragev.toml", "--ragev-report",
         "r.json", "-p", "no:cacheprovider", "--ragev-concurrency", "3"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A suite started from a script in the background inherits SIGINT ignored
        # (POSIX shells do that for `cmd &`): the child gets the default handler back,
        # so Python turns the signal into KeyboardInterrupt as in a terminal.
        preexec_fn=_default_sigint,
    )
    try:
        marker = pytester.path / "hung.txt"
        for _ in range(600):  # until the pipeline hangs (at most a minute)
            if marker.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), "the pipeline never reached the hanging question"
        time.sleep(0.5)  # the main thread now waits for q2's call
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)  # without the fix: waits for the hung call
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:] + err[-3000:]
    assert "INTERNALERROR" not in out + err
    task = read_json(pytester.path / "r.json")["data"]["task"]
    assert task["status"] == 3 and task["err_msg"].startswith("interrupted")
