"""End to end: a short gate summary, the power warning, and --ragev-no-baseline."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._oracle import set_quality
from tests._pytester import run_ragev

Project = Callable[..., Path]

BASELINE = '[baseline]\npath = "ragev-baseline.json"\n'
VARIANT = textwrap.dedent(
    """
    [[variants]]
    name = "alt"
    pipeline.quality = "good"
    """
)


def test_the_summary_is_short_unless_full_is_asked_for(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(BASELINE + '[gate]\nmode = "tolerance"\n' + VARIANT)
    run_ragev(pytester, "--ragev-update-baseline")
    short = run_ragev(pytester)
    assert short.ret == pytest.ExitCode.OK
    lines = short.stdout.lines
    assert "ragev: base configuration against the baseline, 5 shared questions: no metric " \
           "changed" in lines
    assert "ragev: variant alt against the baseline, 5 shared questions: no metric changed" \
           in lines
    # The variants table shows alt's means: its own table is not repeated.
    assert not any(line.startswith("ragev: mini (variant alt)") for line in lines)
    assert "ragev: variants against the base configuration:" in lines
    full = run_ragev(pytester, "--ragev-summary=full")
    full.stdout.fnmatch_lines([
        "ragev: mini (variant alt), 5 questions, profile weknora",
        "ragev: base configuration against the baseline, 5 shared questions:",
        "  metric*baseline*current*status",
        "  precision*0.833*0.833*unchanged",
    ])
    assert len(full.stdout.lines) > len(lines) + 20


def test_the_power_warning_is_said_once(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(BASELINE + VARIANT)
    run_ragev(pytester, "--ragev-update-baseline")
    result = run_ragev(pytester)
    warnings = [line for line in result.stdout.lines if "cannot detect" in line]
    # Five questions, the default gate: a 0.05 drop is one question losing its score.
    assert warnings == [
        'ragev: warning: n=5 cannot detect a 0.05 drop at alpha 0.05 (such a drop can be 1 '
        "question losing its whole score, whose paired p-value cannot go below 0.5); consider "
        'mode = "tolerance" for a deterministic or cached pipeline, or more questions'
    ]
    # In tolerance mode the test is not needed: no warning.
    config = pytester.path / "ragev.toml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        BASELINE, BASELINE + '[gate]\nmode = "tolerance"\n'), encoding="utf-8")
    assert "cannot detect" not in run_ragev(pytester).stdout.str()


def test_no_baseline_explores_without_gating_but_keeps_the_thresholds(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(BASELINE + '[gate]\nmode = "tolerance"\n')
    baseline = pytester.path / "ragev-baseline.json"
    # No baseline yet: the flag neither creates it nor fails for it.
    first = run_ragev(pytester, "--ragev-no-baseline")
    assert first.ret == pytest.ExitCode.OK and not baseline.exists()
    first.stdout.fnmatch_lines(["ragev: --ragev-no-baseline: not gated against a baseline this "
                                "run (thresholds still apply)"])
    run_ragev(pytester, "--ragev-update-baseline")
    written = baseline.read_bytes()
    set_quality(config, "bad")
    assert run_ragev(pytester).ret == pytest.ExitCode.TESTS_FAILED  # the gate sees the drop
    obtained = pytester.path / "ragev-baseline.obtained.json"
    obtained.unlink()
    explore = run_ragev(pytester, "--ragev-no-baseline", "--ragev-report", "r.json")
    assert explore.ret == pytest.ExitCode.OK
    assert "< baseline" not in explore.stdout.str()
    assert "baseline" not in json.loads((pytester.path / "r.json").read_text())["data"]
    assert baseline.read_bytes() == written
    assert not obtained.exists()
    # Thresholds still hold.
    config.write_text(config.read_text(encoding="utf-8") + "[thresholds]\nrecall = 0.5\n",
                      encoding="utf-8")
    floors = run_ragev(pytester, "--ragev-no-baseline")
    assert floors.ret == pytest.ExitCode.TESTS_FAILED
    floors.stdout.fnmatch_lines(["ragev: recall 0.000 < threshold 0.500*"])
    # Writing the baseline while switching it off is a contradiction, said at once.
    both = run_ragev(pytester, "--ragev-no-baseline", "--ragev-update-baseline")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    assert "--ragev-no-baseline and --ragev-update-baseline contradict" in (
        both.stdout.str() + both.stderr.str())


def test_the_options_are_documented_in_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--ragev-no-baseline*", "*--ragev-summary=short|full*"])
