"""End to end: the eval set grows, shrinks and gets edited in the same PR as the code.

Questions are paired with the baseline by qid and content hash: the unchanged ones are
compared, the added, removed and edited ones listed; ``[gate] strict_dataset = true``
restores the strict refusal, and a baseline that cannot be used still leaves every
report behind (exit status 4).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset

Project = Callable[..., Path]

# The oracle pipeline is deterministic: every change is real ("tolerance", max_drop 0).
GATED = '[baseline]\npath = "ragev-baseline.json"\n\n[gate]\nmode = "tolerance"\n'
REPORTS = ("--ragev-report", "r.json", "--ragev-markdown", "r.md", "--ragev-html", "r.html")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--ragev-config", "ragev.toml", "-p", "no:cacheprovider", *args)


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _edit_dataset(pytester: pytest.Pytester, mini: dict[str, Any]) -> None:
    """Question 5 removed, 6 added, question 2's qrels edited (its precision changes)."""
    queries = {**{q: t for q, t in mini["queries"].items() if q != 5},
               6: "Where is the Louvre? 卢浮宫在哪里？"}
    answers = {**mini["answers"], 16: "The Louvre is in Paris."}
    qrels = [(q, p) for q, p in mini["qrels"] if q != 5 and (q, p) != (2, 1)] + [(6, 6)]
    qas = [(q, a) for q, a in mini["qas"] if q != 5] + [(6, 16)]
    write_dataset(pytester.path / "data", queries=queries, corpus=mini["corpus"],
                  answers=answers, qrels=qrels, qas=qas)


def test_added_removed_and_edited_questions_do_not_void_the_baseline(
    pytester: pytest.Pytester, make_project: Project, mini_data: dict[str, Any]
) -> None:
    make_project(GATED)
    assert _run(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    _edit_dataset(pytester, mini_data)
    result = _run(pytester, *REPORTS)
    # Question 2's precision fell from 2/3 to 1/2 because its qrels changed, not the
    # pipeline: it is listed as changed and not compared, so nothing regressed.
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([
        "ragev: base configuration against the baseline, 3 shared questions (1 added, "
        "1 removed, 1 changed): no metric changed",
        "ragev: verdict passed",
    ])
    assert "< baseline" not in result.stdout.str()
    comparison = _load(pytester.path / "r.json")["data"]["baseline"]["comparisons"][0]
    assert (comparison["added"], comparison["removed"], comparison["changed"]) == ([6], [5], [2])
    assert comparison["common_questions"] == 3
    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "Not compared: 1 added (6), 1 removed (5), 1 changed (2)." in markdown
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert '<li class="changed"><b>1 changed</b>' in html


def test_strict_dataset_refuses_the_edit_and_still_writes_every_report(
    pytester: pytest.Pytester, make_project: Project, mini_data: dict[str, Any]
) -> None:
    make_project(GATED + "strict_dataset = true\n")
    _run(pytester, "--ragev-update-baseline")
    _edit_dataset(pytester, mini_data)
    result = _run(pytester, *REPORTS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "ragev: mini (base configuration), 5 questions, profile weknora",
        "ragev: gate not compared: *the data changed and [[]gate[]] strict_dataset = true: "
        "re-baseline with --ragev-update-baseline, or unset strict_dataset*",
        "ragev: verdict FAILED (gate not compared, exit status 4)",
    ])
    data = _load(pytester.path / "r.json")["data"]
    assert data["baseline"]["compared"] is False and len(data["samples"]) == 5
    assert "strict_dataset = true" in (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "strict_dataset = true" in (pytester.path / "r.html").read_text(encoding="utf-8")


def test_a_baseline_of_an_earlier_pytest_ragev_is_one_line_until_rewritten(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    """Nothing was released before 0.2.0: a pre-release layout is refused in one line
    that says how to rewrite it, and every report is still written (exit 4)."""
    make_project(GATED)
    baseline = pytester.path / "ragev-baseline.json"
    _run(pytester, "--ragev-update-baseline")
    data = _load(baseline)
    data["schema_version"] = 2
    baseline.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    refused = _run(pytester, "--ragev-report", "r.json")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stdout.fnmatch_lines([
        f"ragev: gate not compared: {baseline.name} was made by an earlier pytest-ragev "
        "(schema_version 2); rewrite it with --ragev-update-baseline"])
    assert _load(pytester.path / "r.json")["data"]["baseline"]["compared"] is False
    assert _run(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    assert _load(baseline)["schema_version"] == 3
    assert _run(pytester).ret == pytest.ExitCode.OK


VARIANTS = textwrap.dedent(
    """
    [[variants]]
    name = "k20"
    pipeline.quality = "good"

    [[variants]]
    name = "rerank"
    pipeline.quality = "bad"
    """
)


def test_new_variants_are_named_in_one_warning_unless_all_are_required(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(GATED)
    _run(pytester, "--ragev-update-baseline")
    config.write_text(config.read_text(encoding="utf-8") + VARIANTS, encoding="utf-8")
    result = _run(pytester, "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    warnings = [line for line in result.stdout.lines if "new, not compared" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        "ragev: warning: variant 'k20', 'rerank' are new, not compared"
    )
    assert warnings[0].endswith("record them with --ragev-update-baseline --ragev-variant k20 "
                                "--ragev-variant rerank (the other runs in the file are kept)")
    assert _load(pytester.path / "r.json")["data"]["baseline"]["new_variants"] == [
        "k20", "rerank"]
    obtained = _load(pytester.path / "ragev-baseline.obtained.json")
    assert sorted(obtained["variants"]) == ["k20", "rerank"]

    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('mode = "tolerance"\n',
                                   'mode = "tolerance"\nrequire_all_variants = true\n'),
                      encoding="utf-8")
    required = _run(pytester, "--ragev-report", "r.json")
    assert required.ret == pytest.ExitCode.USAGE_ERROR
    required.stdout.fnmatch_lines([
        "ragev: gate not compared: *has no run of variant 'k20', 'rerank' (it has: none) and "
        "[[]gate[]] require_all_variants = true; record them with --ragev-update-baseline "
        "--ragev-variant k20 --ragev-variant rerank*",
    ])
    # Its own metrics are still printed and reported.
    required.stdout.fnmatch_lines(["ragev: variants against the base configuration:"])
    assert _load(pytester.path / "r.json")["data"]["variants"]["rerank"]["metric"][
        "retrieval_metrics"]["recall"] == 0.0
