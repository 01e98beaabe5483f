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

from tests._oracle import set_quality
from tests._pytester import run_ragev

Project = Callable[..., Path]

BASELINE = '[baseline]\npath = "ragev-baseline.json"\n'


def _gated(pytester: pytest.Pytester, make_project: Project, gate: str) -> pytest.RunResult:
    """Record a baseline under ``gate``, degrade the pipeline, run again."""
    config = make_project(BASELINE + textwrap.dedent(gate))
    assert run_ragev(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    set_quality(config, "bad")
    return run_ragev(pytester)


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
    # Under the table, once: in tolerance mode the p column is not read.
    note = ('  (mode = "tolerance" for every metric: the verdict reads only the change '
            "against the tolerance; the p column is shown, not used)")
    assert result.stdout.lines.count(note) == (1 if mode == "tolerance" else 0)


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
    failures = {line for line in result.stdout.lines
                if "< baseline" in line and line.startswith("ragev: ")}
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
    alone = run_ragev(pytester)
    assert alone.ret == pytest.ExitCode.TESTS_FAILED
    alone.stdout.fnmatch_lines(["ragev: recall 0.000 < baseline 1.000 (*p=0.03?, n=5)"])


@pytest.mark.parametrize(
    "gate",
    [
        pytest.param("", id="default"),  # no [gate] table: max-T is the default correction
        pytest.param('[gate]\ncorrection = "maxt"\n', id="explicit"),
    ],
)
def test_maxt_correction_sees_what_every_metric_shows(
    pytester: pytest.Pytester, make_project: Project, gate: str
) -> None:
    # All twelve metrics broke on the same five questions: max-T's adjusted p stays at
    # the single-metric 1/32, where Holm's is twelve times that.
    result = _gated(pytester, make_project, gate)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["ragev: recall 0.000 < baseline 1.000 (*p=0.03? (max-T, 12 metrics), n=5)"]
    )


def test_other_metric_profile_is_not_compared_and_every_report_is_written(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(BASELINE)
    run_ragev(pytester, "--ragev-update-baseline")
    result = run_ragev(pytester, "--ragev-profile", "standard", "--ragev-report", "r.json",
                       "--ragev-markdown", "r.md", "--ragev-html", "r.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "ragev: mini (base configuration), 5 questions, profile standard",
        "  recall*1.000*5*",
        "ragev: gate not compared: *metric profile 'weknora'*'standard'*not comparable*"
        "--ragev-update-baseline, or set [[]metrics[]] profile back",
        "ragev: verdict FAILED (gate not compared, exit status 4)",
    ])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert report["metric"]["retrieval_metrics"]["recall"] == 1.0
    assert report["baseline"]["compared"] is False
    assert "metric profile 'weknora'" in report["baseline"]["not_compared"]
    assert report["task"]["err_msg"].startswith("gate not compared: ")
    assert "**Gate not compared** with the baseline" in (pytester.path / "r.md").read_text(
        encoding="utf-8")
    assert "Gate not compared</b>" in (pytester.path / "r.html").read_text(encoding="utf-8")


Edit = Callable[[dict[str, object]], None]


def _edit_baseline(pytester: pytest.Pytester, edit: Edit) -> None:
    """Apply ``edit`` to the recorded baseline JSON in place."""
    path = pytester.path / "ragev-baseline.json"
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _bump_schema_version(data: dict[str, object]) -> None:
    data["schema_version"] = 4


def _shift_qids(data: dict[str, object]) -> None:
    base = data["base"]
    assert isinstance(base, dict)
    for question in base["questions"]:
        question["qid"] += 100


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        pytest.param(_bump_schema_version,
                     "ragev: gate not compared: *schema_version 4*upgrade pytest-ragev or*",
                     id="other_schema_version"),
        pytest.param(_shift_qids,
                     "ragev: gate not compared: *share no unchanged question (5 in the "
                     "baseline, 5 now)*",
                     id="no_shared_question"),
    ],
)
def test_edited_baseline_is_not_compared(
    pytester: pytest.Pytester, make_project: Project, edit: Edit, line: str
) -> None:
    make_project(BASELINE)
    run_ragev(pytester, "--ragev-update-baseline")
    _edit_baseline(pytester, edit)
    result = run_ragev(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([line])
