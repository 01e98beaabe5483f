"""End to end: each gate mode, relative tolerances, the correction, and baselines refused (exit 4).

The oracle pipeline of ``conftest.py`` is deterministic: ``quality = "bad"`` drops every
metric of all five questions to 0 (precision from 0.833, the others from 1.000).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

Project = Callable[..., Path]

BASELINE = '[baseline]\npath = "ragev-baseline.json"\n'


def _degrade(config: Path) -> None:
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('name = "oracle"\n', 'name = "oracle"\nquality = "bad"\n', 1),
                      encoding="utf-8")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--ragev-config", "ragev.toml", "-p", "no:cacheprovider", *args)


def _gated(pytester: pytest.Pytester, make_project: Project, gate: str) -> pytest.RunResult:
    """Record a baseline under ``gate``, degrade the pipeline, run again."""
    config = make_project(BASELINE + textwrap.dedent(gate))
    assert _run(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    _degrade(config)
    return _run(pytester)


@pytest.mark.parametrize(
    ("mode", "ret"),
    [
        ("significant", pytest.ExitCode.OK),  # within max_drop = 1: not beyond the tolerance
        ("tolerance", pytest.ExitCode.OK),
        ("any", pytest.ExitCode.TESTS_FAILED),  # significant, even within the tolerance
    ],
)
def test_modes_with_a_tolerance_nothing_exceeds(
    pytester: pytest.Pytester, make_project: Project, mode: str, ret: pytest.ExitCode
) -> None:
    gate = f'[gate]\nmode = "{mode}"\nmax_drop = 1.0\ncorrection = "none"\n'
    result = _gated(pytester, make_project, gate)
    assert result.ret == ret
    if mode == "any":
        result.stdout.fnmatch_lines(["ragev: recall 0.000 < baseline 1.000 (Δ −1.000, *p=0.03*"])
    else:
        result.stdout.fnmatch_lines(["*recall*1.000*0.000*within tolerance*"])


def test_max_drop_pct_globally_and_per_metric(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    gate = """
    [gate]
    mode = "tolerance"
    max_drop_pct = 100

    [gate.metrics.precision]
    max_drop_pct = 50
    """
    result = _gated(pytester, make_project, gate)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["ragev: precision 0.000 < baseline 0.833 (Δ −0.833*"])
    failures = [line for line in result.stdout.lines if "< baseline" in line]
    assert len(failures) == 1  # a 100 % drop is not beyond a 100 % tolerance


def test_holm_correction_and_correction_none(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # Five questions: each metric's p is 1/32; Holm-corrected over twelve metrics about 0.38.
    corrected = _gated(pytester, make_project, '[gate]\ncorrection = "holm"\n')
    assert corrected.ret == pytest.ExitCode.OK
    corrected.stdout.fnmatch_lines(["*recall*1.000*0.000*−1.000*0.3[78]?*not significant*"])
    config = pytester.path / "ragev.toml"
    config.write_text(
        config.read_text(encoding="utf-8").replace('correction = "holm"', 'correction = "none"'),
        encoding="utf-8",
    )
    alone = _run(pytester)
    assert alone.ret == pytest.ExitCode.TESTS_FAILED
    alone.stdout.fnmatch_lines(["ragev: recall 0.000 < baseline 1.000 (*p=0.03?, n=5)"])


def test_default_correction_is_maxt(pytester: pytest.Pytester, make_project: Project) -> None:
    # No [gate] table: the metrics broke together, and max-T keeps the single-metric 1/32.
    result = _gated(pytester, make_project, "")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["ragev: recall 0.000 < baseline 1.000 (*p=0.03? (max-T, 12 metrics), n=5)"]
    )


def _baseline_json(pytester: pytest.Pytester) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (pytester.path / "ragev-baseline.json").read_text(encoding="utf-8")
    )
    return data


def _write_baseline(pytester: pytest.Pytester, data: dict[str, object]) -> None:
    (pytester.path / "ragev-baseline.json").write_text(json.dumps(data), encoding="utf-8")


def test_other_metric_profile_is_a_usage_error(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(BASELINE)
    _run(pytester, "--ragev-update-baseline")
    result = _run(pytester, "--ragev-profile", "standard")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        ["ragev: error: *metric profile 'weknora'*'standard'*not comparable*"
         "--ragev-update-baseline"]
    )


def test_other_schema_version_is_a_usage_error(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(BASELINE)
    _run(pytester, "--ragev-update-baseline")
    data = _baseline_json(pytester)
    data["schema_version"] = 2
    _write_baseline(pytester, data)
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["ragev: error: *schema_version 2*upgrade pytest-ragev or*"])


def test_no_shared_question_is_a_usage_error(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(BASELINE)
    _run(pytester, "--ragev-update-baseline")
    data = _baseline_json(pytester)
    base = data["base"]
    assert isinstance(base, dict)
    for question in base["questions"]:
        question["qid"] += 100
    _write_baseline(pytester, data)
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["ragev: error: *share no question (5 in the baseline, 5 now)*"])


def test_maxt_correction_sees_what_every_metric_shows(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # All twelve metrics broke on the same five questions: max-T's adjusted p stays at
    # the single-metric 1/32, where Holm's is twelve times that.
    result = _gated(pytester, make_project, '[gate]\ncorrection = "maxt"\n')
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["ragev: recall 0.000 < baseline 1.000 (*p=0.03? (max-T, 12 metrics), n=5)"]
    )
