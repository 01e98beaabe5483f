"""The text metrics kept between runs, end to end: a rerun reads them, to the same report."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

#: Every test runs the built-in pipeline in two pytest subprocesses.
pytestmark = pytest.mark.slow

Project = Callable[..., Path]
BUILTIN = '[pipeline]\nname = "builtin"\n'

#: Logs how many (answer, reference) pairs each process tokenized and scored.
COUNT_SCORED = textwrap.dedent(
    """
    import os
    from pathlib import Path

    import pytest_ragev.metrics.generation as generation

    _score_texts = generation.score_texts

    def _counted(hypotheses, references, segment, profile):
        with open(Path(__file__).parent / "scored.log", "a") as log:
            log.write(f"{len(hypotheses)}\\n")
        return _score_texts(hypotheses, references, segment, profile)

    generation.score_texts = _counted
    """
)


def _scored(pytester: pytest.Pytester) -> int:
    log = pytester.path / "scored.log"
    total = sum(int(n) for n in log.read_text().split()) if log.exists() else 0
    log.unlink(missing_ok=True)
    return total


def _kept(pytester: pytest.Pytester) -> int:
    path = pytester.path / ".pytest_cache" / "d" / "ragev" / "answers" / "answers.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        count: int = connection.execute("SELECT count(*) FROM text_scores").fetchone()[0]
    return count


def _samples(pytester: pytest.Pytester, name: str) -> dict[int, dict[str, float]]:
    report = json.loads((pytester.path / name).read_text(encoding="utf-8"))
    return {s["qid"]: s["metrics"] for s in report["data"]["samples"]}


def test_a_rerun_reads_the_text_metrics_the_first_run_kept(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project('[baseline]\npath = "baseline.json"\n', conftest=COUNT_SCORED, pipeline=BUILTIN)
    first = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "--ragev-report", "1.json")
    assert first.ret == pytest.ExitCode.TESTS_FAILED  # no baseline yet: created
    scored_first, kept = _scored(pytester), _kept(pytester)
    assert kept > 0 and scored_first >= kept
    again = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "--ragev-report", "2.json")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()[-2000:]
    again.stdout.fnmatch_lines(["*against the baseline*no metric changed*"])
    assert _samples(pytester, "2.json") == _samples(pytester, "1.json")
    # Only the pairs that cost nothing (an empty answer, one equal to its reference) or
    # that have no reference were tokenized again.
    assert _scored(pytester) == scored_first - kept
    assert _kept(pytester) == kept


def test_no_cache_keeps_and_reads_no_text_metrics(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=COUNT_SCORED, pipeline=BUILTIN)
    assert pytester.runpytest_subprocess("--ragev-config", "ragev.toml").ret == pytest.ExitCode.OK
    scored, kept = _scored(pytester), _kept(pytester)
    result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "--ragev-no-cache")
    assert result.ret == pytest.ExitCode.OK
    assert _scored(pytester) == scored  # everything scored again
    assert _kept(pytester) == kept  # nothing added
