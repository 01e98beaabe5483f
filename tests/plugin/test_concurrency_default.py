"""End to end: a conftest pipeline that waits gets more calls at once, said in one line
(issue #31: 5 configurations x 175 questions took 22.2 s at the default, 4.8 s at
``--ragev-concurrency 8``, and nothing hinted)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._pytester import read_json, run_ragev

Project = Callable[..., Path]

#: Waits 30 ms per answer (a model behind a socket), and records how many calls overlap.
WAITING = textwrap.dedent(
    """
    import threading
    import time

    import pytest
    from pytest_ragev import Answer

    _lock = threading.Lock()
    _now = [0, 0]  # calls in flight, the most seen at once

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        with _lock:
            _now[0] += 1
            _now[1] = max(_now)
        time.sleep(0.03)
        with _lock:
            _now[0] -= 1
        return Answer(retrieved=list(case.pids), text=case.answer or "",
                      meta={"overlap": _now[1]})
    """
)


def test_a_waiting_conftest_pipeline_gets_more_calls_at_once_and_says_so(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=WAITING, pipeline="")
    result = run_ragev(pytester, "--ragev-report", "r.json")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        "ragev: note: the pipeline's first 4 answers waited *% of their * s (on a model or "
        "a service, not on the CPU): 8 calls now run at once; set ?run? concurrency (or "
        "--ragev-concurrency) to choose",
    ])
    samples = read_json(pytester.path / "r.json")["data"]["samples"]
    assert [s["qid"] for s in samples] == [1, 2, 3, 4, 5]
    assert all(s["error"] is None for s in samples)
    # Chosen by the user: nothing is measured, nothing said.
    chosen = run_ragev(pytester, "--ragev-concurrency", "1")
    assert chosen.ret == 0
    assert "calls now run at once" not in chosen.stdout.str()


def test_a_computing_conftest_pipeline_keeps_the_default(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=WAITING.replace("time.sleep(0.03)",
                                          "sum(i * i for i in range(300_000))"), pipeline="")
    result = run_ragev(pytester)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert "calls now run at once" not in result.stdout.str()
