"""End to end: a conftest's ``pytest_ragev_answer`` that returns ``None`` (#16 item 2).

pluggy then went on to the built-in pipeline, which answered that question instead:
exit 0, with metrics from two pipelines. It is now that question's error.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

Project = Callable[..., Path]

SOMETIMES_NONE = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        if case.qid == 2:
            return None  # a forgotten return on one branch
        return Answer(retrieved=list(case.pids), text=case.answer or "")
    """
)


def test_a_hook_returning_none_fails_that_question_only(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # [pipeline] name = "builtin": the built-in pipeline could answer, and must not.
    make_project(conftest=SOMETIMES_NONE, pipeline='[pipeline]\nname = "builtin"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    result.assert_outcomes(passed=4, failed=2)  # q2, and the verdict (1 question raised)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    result.stdout.fnmatch_lines(["*q2*pytest_ragev_answer (conftest.py) returned None for q2*"])
    samples = {s["qid"]: s for s in json.loads(
        (pytester.path / "r.json").read_text(encoding="utf-8"))["data"]["samples"]}
    assert "returned None for q2" in samples[2]["error"]
    assert samples[2]["retrieval_ids"] == [] and samples[2]["generated_text"] == ""
    assert all(samples[qid]["error"] is None for qid in (1, 3, 4, 5))
