"""End to end: settings that cannot work are one line at session start (#16 item 14).

``--ragev-update-baseline`` without a baseline path used to be reported only after every
question ran; ``--ragev-concurrency 0`` said what was wrong but not what to write.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

Project = Callable[..., Path]

#: Writes a marker file when a question is answered: nothing may run before the error.
MARKING = textwrap.dedent(
    """
    import pytest
    from pathlib import Path
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        Path("answered.txt").write_text("这个问题已经回答了", encoding="utf-8")
        return Answer(retrieved=list(case.pids), text=case.answer or "")
    """
)


def _usage_line(result: pytest.RunResult) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    lines = [line for line in out.splitlines() if "error:" in line.lower()]
    assert len(lines) == 1, lines
    return lines[0]


def test_update_baseline_without_a_path_stops_before_any_question(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(conftest=MARKING)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    line = _usage_line(result)
    assert "--ragev-update-baseline needs a baseline path" in line
    assert f"set [baseline] path in {config.resolve()} or pass --ragev-baseline PATH" in line
    assert not (pytester.path / "answered.txt").exists()


@pytest.mark.parametrize("flag", ["--ragev-concurrency", "--ragev-limit"])
def test_a_count_below_one_names_the_fix(
    pytester: pytest.Pytester, make_project: Project, flag: str
) -> None:
    make_project(conftest=MARKING)
    result = pytester.runpytest("--ragev-config", "ragev.toml", flag, "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # pytest's own "usage:" line comes first; the error is one line after it.
    (line,) = [line for line in result.stderr.lines if f"argument {flag}" in line]
    assert f"argument {flag}: '0' is less than 1; pass a whole number >= 1, e.g. {flag} " in line
    assert not (pytester.path / "answered.txt").exists()
