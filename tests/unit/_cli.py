"""The ``ragev`` command as its unit tests call it: in-process, its output captured."""

from __future__ import annotations

import pytest

from pytest_ragev import cli


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``ragev ARGV`` in this process: its exit code, standard output and standard error."""
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(code: int, err: str, *parts: str) -> None:
    """A usage error (exit 2) said in one ``ragev: error:`` line holding every part, no traceback."""
    assert code == 2, err
    assert err.startswith("ragev: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "ragev: error: ragev:" not in err
    for part in parts:
        assert part in err, err
