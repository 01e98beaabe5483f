"""End to end: a report or baseline that cannot be written (#16 item 8).

Disk full, a folder where the file must go, a folder that cannot be made: before the fix
each became INTERNALERROR with a traceback and exit 3. Now it is one line naming the file
and the cause, every other output is still written, the previous file stays as it was,
and the run exits with status 4. (Run as root here, so "read-only" is a file standing
where a folder must go, which no user can write through; "disk full" is /dev/full.)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

Project = Callable[..., Path]


def _one_error(result: pytest.RunResult, *parts: str) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    # (The verdict's FAILED line may quote the first failure line: not a second report.)
    # A running report that fails warns once, early; the end says it as the error.
    assert out.count("could not write the running report") <= 1
    lines = [line for line in out.splitlines() if "could not write" in line
             and not line.startswith("FAILED ") and "running report" not in line]
    assert len(lines) == 1, lines
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def test_a_report_path_that_is_a_folder_is_one_line_and_the_rest_is_written(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    (pytester.path / "out.json").mkdir()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "out.json",
                                "--ragev-markdown", "r.md", "--ragev-html", "r.html",
                                "--junitxml", "junit.xml")
    # Named by its absolute path, not as typed.
    line = _one_error(result, f"could not write the JSON report {pytester.path / 'out.json'}:",
                      "Is a directory", "the path is a folder: name a file, such as one inside it")
    assert line.startswith("ragev: error: ") and "free space" not in line
    assert (pytester.path / "r.md").read_text(encoding="utf-8").strip()
    assert "<html" in (pytester.path / "r.html").read_text(encoding="utf-8").lower()
    assert "ragev" in (pytester.path / "junit.xml").read_text(encoding="utf-8")
    assert (pytester.path / "out.json").is_dir()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_under_the_markdown_report_keeps_the_json_report(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-markdown", "/dev/full")
    _one_error(result, "could not write the Markdown report /dev/full", "No space left")
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert len(report["data"]["samples"]) == 5


def test_a_baseline_that_cannot_be_written_is_one_line_in_the_report_too(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project('[baseline]\npath = "baselines/ragev-baseline.json"\n')
    (pytester.path / "baselines").write_text("a file where the folder must go",
                                             encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    line = _one_error(result, "could not write the baseline", "ragev-baseline.json",
                      "a file stands where a folder of the path must be: move it, or point "
                      "[baseline] path (--ragev-baseline) at another file")
    assert "free space" not in line
    task = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]["task"]
    assert task["status"] == 3 and task["err_msg"].startswith("could not write the baseline")
    assert (pytester.path / "baselines").read_text(encoding="utf-8").startswith("a file")


@pytest.mark.parametrize(("value", "cause"), [
    ("float('nan')", "holds a NaN or an infinity"),
    ("{'eine Menge'}", "it is not JSON (Object of type set is not JSON serializable)"),
])
def test_a_report_that_cannot_be_written_does_not_stay_running(
    pytester: pytest.Pytester, make_project: Project, value: str, cause: str
) -> None:
    make_project()
    # A value strict JSON refuses, put in by a report hook: never half a file, and the
    # file is not left as the run's last running report either.
    pytester.makeconftest(
        pytester.path.joinpath("conftest.py").read_text(encoding="utf-8") + "\n"
        "@pytest.hookimpl\n"
        "def pytest_ragev_report(report):\n"
        f"    report['data']['extra'] = {value}\n"
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    _one_error(result, "could not write the JSON report", "r.json", cause,
               "pytest_ragev_report hooks")
    task = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]["task"]
    assert task["status"] == 3 and "could not write the JSON report" in task["err_msg"]


def test_a_fifo_nobody_reads_is_one_line_with_the_fix_for_a_fifo(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    os.mkfifo(pytester.path / "bericht.fifo")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-html", "bericht.fifo",
                                "--ragev-report", "r.json")
    line = _one_error(result, "could not write the HTML report", "bericht.fifo",
                      "no process reads the FIFO: start its reader first, or choose another "
                      "path")
    assert "free space" not in line and "writable" not in line
    assert json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["success"]


#: A disk that fills up once the run has started: the rename of an atomic write of r.json
#: fails with ENOSPC for every report but the pending one written at the start (and, with
#: ``NO_ROOM_IN_PLACE``, so does writing r.json in place).
FULL_DISK = '''
import errno
import json
import os

NO_ROOM_IN_PLACE = {in_place}
_replace, _open = os.replace, os.open


def _full(path):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def _replace_on_a_full_disk(src, dst, *args, **kwargs):
    if os.path.basename(dst) == "r.json":
        with open(src, encoding="utf-8") as handle:
            if json.load(handle)["data"]["task"]["status"] != 0:
                _full(dst)
    return _replace(src, dst, *args, **kwargs)


def _open_on_a_full_disk(path, flags, *args, **kwargs):
    if NO_ROOM_IN_PLACE and flags & os.O_TRUNC and os.path.basename(path) == "r.json":
        _full(path)
    return _open(path, flags, *args, **kwargs)


os.replace = _replace_on_a_full_disk
os.open = _open_on_a_full_disk
'''


@pytest.mark.parametrize(
    ("in_place", "fate"),
    [(False, "this run's pending report there was rewritten in place as a failure report"),
     (True, "this run's pending report there was removed (no poller waits on it)")],
    ids=["rewritten", "removed"],
)
def test_a_full_disk_does_not_leave_the_report_pending(
    pytester: pytest.Pytester, make_project: Project, in_place: bool, fate: str
) -> None:
    make_project()
    pytester.makeconftest(
        pytester.path.joinpath("conftest.py").read_text(encoding="utf-8")
        + FULL_DISK.format(in_place=in_place)
    )
    result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml",
                                           "--ragev-report", "r.json", "--ragev-markdown", "r.md")
    line = _one_error(result, "could not write the JSON report ",
                      f"r.json: No space left on device; {fate} and the other reports were written")
    assert (pytester.path / "r.md").read_text(encoding="utf-8").strip()
    report = pytester.path / "r.json"
    if in_place:
        assert not report.exists()
    else:
        task = json.loads(report.read_text(encoding="utf-8"))["data"]["task"]
        assert task["status"] == 3 and "No space left on device" in task["err_msg"]
    assert "status 0" not in line
