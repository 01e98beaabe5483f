"""End to end: settings that cannot work are one line at session start (#16 item 14).

``--ragev-update-baseline`` without a baseline path used to be reported only after every
question ran; ``--ragev-concurrency 0`` said what was wrong but not what to write; an
empty path on the command line (``--ragev-report ''``, a shell variable that was not set)
fell back to the config's path or to nothing without a word.
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


@pytest.mark.parametrize(
    ("flag", "example", "instead"),
    [
        ("--ragev-report", "ragev-report.json", "[report] json"),
        ("--ragev-markdown", "ragev.md", "[report] markdown"),
        ("--ragev-html", "ragev.html", "[report] html"),
        ("--ragev-baseline", "ragev-baseline.json", "[baseline] path"),
        ("--ragev-config", "ragev.toml", "the ragev_config ini key"),
    ],
)
def test_an_empty_path_option_is_refused_with_the_fix(
    pytester: pytest.Pytester, make_project: Project, flag: str, example: str, instead: str
) -> None:
    make_project('[report]\njson = "r.json"\nmarkdown = "r.md"\nhtml = "r.html"\n\n'
                 '[baseline]\npath = "ragev-baseline.json"\n', conftest=MARKING)
    for written in (f"{flag}=", " "):
        args = ["--ragev-config", "ragev.toml", "--ragev-update-baseline"]
        args += [written] if written.endswith("=") else [flag, written]
        line = _usage_line(pytester.runpytest(*args))
        shown = "''" if written.endswith("=") else "' '"
        assert line.startswith(f"ERROR: {flag} {shown} is "), line
        assert f"pass a file path, e.g. {flag} {example}, or leave the option out to use " \
               f"{instead}, if set" in line
    assert not (pytester.path / "answered.txt").exists()
    # Nothing was written to the config's paths instead.
    assert not [p.name for p in pytester.path.iterdir()
                if p.name in ("r.json", "r.md", "r.html", "ragev-baseline.json")]
