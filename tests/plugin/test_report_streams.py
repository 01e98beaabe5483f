"""End to end: a report written to a stream (#16 item 3).

``pytest --ragev-report /dev/stdout > build.log`` used to rename a temporary file over
build.log (all of pytest's output lost, only the JSON left), and on a pipe it crashed
with a double traceback. A stream is now written through: the JSON lands after what
pytest printed so far, and a regular report file is still replaced atomically.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Project = Callable[..., Path]


def _report_in(text: str) -> dict[str, Any]:
    """The JSON report printed among pytest's output lines."""
    start = text.index("\n{\n") + 1  # on a line of its own
    report, _ = json.JSONDecoder().raw_decode(text, start)
    assert isinstance(report, dict)
    return report


@pytest.mark.slow
def test_dev_stdout_redirected_to_a_file_keeps_the_log_and_adds_the_report(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    # pytester's subprocess writes its stdout to a file: `pytest ... > build.log`.
    result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml",
                                           "--ragev-report", "/dev/stdout")
    assert result.ret == 0, result.stderr.str()[-3000:]
    out = result.stdout.str()
    assert "test session starts" in out and "ragev: verdict passed" in out
    report = _report_in(out)
    assert report["data"]["task"]["status"] == 2 and len(report["data"]["samples"]) == 5
    assert out.index("test session starts") < out.index('"samples"') < out.index("verdict passed")
    assert "Traceback" not in out + result.stderr.str()


@pytest.mark.slow
def test_under_q_the_report_starts_on_a_line_of_its_own(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    """``pytest -q --ragev-report /dev/stdout > build.log`` used to begin ``...{``: pytest's
    ``ensure_newline`` does not end a line of ``-q`` progress dots."""
    make_project()
    pytester.makepyfile(test_other="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "-q",
                                           "--ragev-report", "/dev/stdout", ".")
    assert result.ret == 0, result.stderr.str()[-3000:]
    out = result.stdout.str()
    lines = out.splitlines()
    assert lines[0].strip(".") == "", lines[:3]  # the progress dots, and only them
    assert lines[0] and lines[1] == "{", lines[:3]
    report = _report_in(out)
    assert report["data"]["task"]["status"] == 2 and len(report["data"]["samples"]) == 5
    end = out.index("\n}\n") + 3  # the report ends its own line too
    assert "passed" in out[end:] and "Traceback" not in out + result.stderr.str()


@pytest.mark.slow
def test_dev_stdout_on_a_pipe_gets_one_report_and_no_traceback(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--ragev-config", "ragev.toml",
         "--ragev-report", "/dev/stdout", "-p", "no:cacheprovider"],
        cwd=pytester.path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stdout.count('"samples"') == 1  # no running reports piled on the stream
    assert _report_in(done.stdout)["data"]["task"]["status"] == 2


def test_a_fifo_gets_the_report_and_stays_a_fifo(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    fifo = pytester.path / "report.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # `cat report.fifo` in another shell
    try:
        result = pytester.runpytest("--ragev-config", "ragev.toml",
                                    "--ragev-report", str(fifo))
        received = b""
        while chunk := os.read(reader, 1 << 16):
            received += chunk
    finally:
        os.close(reader)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert json.loads(received)["data"]["task"]["status"] == 2
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_nobody_reads_is_refused_in_one_line(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    fifo = pytester.path / "report.fifo"
    os.mkfifo(fifo)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", str(fifo),
                                "--ragev-markdown", "r.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    lines = [line for line in out.splitlines() if "could not write the JSON report" in line]
    assert len(lines) == 1 and str(fifo) in lines[0] and "needs a reader" in lines[0]
    assert (pytester.path / "r.md").is_file()  # the other report was written
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
