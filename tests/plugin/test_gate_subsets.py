"""End to end: gating and re-baselining when only part of the configurations or questions ran.

``--ragev-variant NAME``, ``-k`` and ``--ragev-limit`` select a subset; each selected run
is compared with its own recorded run, and ``--ragev-update-baseline`` merges the subset
into the file instead of dropping what did not run.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._oracle import set_quality
from tests._pytester import read_json, run_ragev

Project = Callable[..., Path]

# mode "tolerance": the oracle pipeline is deterministic, so every change is real, and
# five questions are too few for a significance test to see anything.
GATED = '[baseline]\npath = "ragev-baseline.json"\n\n[gate]\nmode = "tolerance"\n'
VARIANT = textwrap.dedent(
    """
    [[variants]]
    name = "alt"
    pipeline.quality = "good"
    """
)


def test_a_variant_run_alone_is_gated_against_its_own_recorded_run(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(GATED + VARIANT)
    assert run_ragev(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    set_quality(config, "bad", variant=True)

    for selection in (["--ragev-variant", "alt"], ["-k", "alt"]):
        result = run_ragev(pytester, *selection)
        assert result.ret == pytest.ExitCode.TESTS_FAILED, selection
        result.stdout.fnmatch_lines(["ragev: recall [[]alt[]] 0.000 < baseline 1.000 (Δ −1.000*"])
        assert "internal error" not in result.stdout.str()

    # The base configuration did not change: selected alone, it passes.
    assert run_ragev(pytester, "--ragev-variant", "base").ret == pytest.ExitCode.OK
    # A full run gates the variant too, not only the base run.
    full = run_ragev(pytester)
    assert full.ret == pytest.ExitCode.TESTS_FAILED
    full.stdout.fnmatch_lines(["ragev: recall [[]alt[]] 0.000 < baseline 1.000*"])
    assert "ragev: recall 0.000 < baseline" not in full.stdout.str()


def test_updating_a_subset_of_configurations_keeps_the_others(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(GATED + VARIANT)
    baseline = pytester.path / "ragev-baseline.json"
    run_ragev(pytester, "--ragev-update-baseline")
    recorded = read_json(baseline)
    assert list(recorded["variants"]) == ["alt"]

    base_only = run_ragev(pytester, "--ragev-variant", "base", "--ragev-update-baseline")
    assert base_only.ret == pytest.ExitCode.OK
    base_only.stdout.fnmatch_lines(
        [f"ragev: baseline written to {baseline.name} (updated: base; kept from the previous "
         "file: alt)"]
    )
    assert read_json(baseline)["variants"] == recorded["variants"]

    set_quality(config, "bad", variant=True)
    alt_only = run_ragev(pytester, "--ragev-variant", "alt", "--ragev-update-baseline")
    assert alt_only.ret == pytest.ExitCode.OK
    merged = read_json(baseline)
    assert merged["base"] == recorded["base"]
    assert merged["variants"]["alt"]["metrics"]["recall"]["mean"] == 0.0
    # The degraded variant is now the recorded one: the full run passes.
    assert run_ragev(pytester).ret == pytest.ExitCode.OK


def test_variant_runs_alone_cannot_create_the_baseline(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(GATED + VARIANT)
    baseline = pytester.path / "ragev-baseline.json"
    gated = run_ragev(pytester, "--ragev-variant", "alt")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines(
        [f"ragev: baseline {baseline.name} not found, and the base configuration did not run*"]
    )
    update = run_ragev(pytester, "--ragev-variant", "alt", "--ragev-update-baseline")
    assert update.ret == pytest.ExitCode.USAGE_ERROR
    update.stdout.fnmatch_lines(["ragev: error: *needs the base configuration's run*"])
    assert not baseline.exists()


def test_a_variant_missing_from_the_baseline_is_new_until_recorded(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(GATED)
    baseline = pytester.path / "ragev-baseline.json"
    run_ragev(pytester, "--ragev-update-baseline")
    config.write_text(config.read_text(encoding="utf-8") + VARIANT, encoding="utf-8")
    missing = run_ragev(pytester)
    assert missing.ret == pytest.ExitCode.OK
    missing.stdout.fnmatch_lines(
        ["ragev: warning: variant 'alt' is new, not compared (*has no run of it); record it "
         "with --ragev-update-baseline --ragev-variant alt*"]
    )
    # Its snapshot is in the obtained file, ready to be recorded.
    obtained = read_json(pytester.path / "ragev-baseline.obtained.json")
    assert obtained["variants"]["alt"]["metrics"]["recall"]["mean"] == 1.0
    before = read_json(baseline)["base"]
    assert run_ragev(pytester, "--ragev-variant", "alt", "--ragev-update-baseline").ret == 0
    assert read_json(baseline)["base"] == before
    recorded = run_ragev(pytester)
    assert recorded.ret == pytest.ExitCode.OK and "new, not compared" not in recorded.stdout.str()


def test_limit_is_compared_with_a_full_baseline_on_the_questions_it_ran(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(GATED)
    baseline = pytester.path / "ragev-baseline.json"
    run_ragev(pytester, "--ragev-update-baseline")
    full = read_json(baseline)

    limited = run_ragev(pytester, "--ragev-limit", "2")
    assert limited.ret == pytest.ExitCode.OK
    limited.stdout.fnmatch_lines(
        ["ragev: base configuration against the baseline, 2 shared questions (0 added, "
         "3 removed, 0 changed): no metric changed"]
    )

    set_quality(config, "bad")
    degraded = run_ragev(pytester, "--ragev-limit", "2")
    assert degraded.ret == pytest.ExitCode.TESTS_FAILED
    degraded.stdout.fnmatch_lines(["ragev: recall 0.000 < baseline 1.000 (Δ −1.000*n=2)"])

    # Re-baselining under a limit keeps the full dataset's fingerprint, and says so.
    update = run_ragev(pytester, "--ragev-limit", "2", "--ragev-update-baseline")
    assert update.ret == pytest.ExitCode.OK
    update.stdout.fnmatch_lines(["ragev: warning: --ragev-limit 2: * holds only the first 2*"])
    written = read_json(baseline)
    assert written["dataset"]["fingerprint"] == full["dataset"]["fingerprint"]
    assert [q["qid"] for q in written["base"]["questions"]] == [1, 2]


def test_update_of_deselected_questions_warns_and_lists_them(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(GATED)
    baseline = pytester.path / "ragev-baseline.json"
    # Nothing selected: nothing written, and no claim that the path is missing.
    nothing = run_ragev(pytester, "-k", "nomatch", "--ragev-update-baseline")
    assert nothing.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "needs a baseline path" not in nothing.stdout.str()
    assert not baseline.exists()

    subset = run_ragev(pytester, "-k", "q1 or q2", "--ragev-update-baseline")
    assert subset.ret == pytest.ExitCode.OK
    subset.stdout.fnmatch_lines(
        [f"ragev: warning: {baseline.name} now holds 2 of 5 questions for the base configuration"
         " (*): 3, 4, 5"]
    )
    assert [q["qid"] for q in read_json(baseline)["base"]["questions"]] == [1, 2]
    # A complete run says nothing of the kind.
    complete = run_ragev(pytester, "--ragev-update-baseline")
    assert "now holds" not in complete.stdout.str()


def test_a_partial_update_refuses_a_damaged_file_a_full_one_replaces_it(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(GATED + VARIANT)
    baseline = pytester.path / "ragev-baseline.json"
    baseline.write_text("{not json", encoding="utf-8")
    partial = run_ragev(pytester, "--ragev-variant", "alt", "--ragev-update-baseline")
    assert partial.ret == pytest.ExitCode.USAGE_ERROR
    partial.stdout.fnmatch_lines(["ragev: error: *not valid JSON*run --ragev-update-baseline "
                                  "without --ragev-variant or -k to replace it)"])
    assert baseline.read_text(encoding="utf-8") == "{not json"
    assert run_ragev(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    assert list(read_json(baseline)["variants"]) == ["alt"]
