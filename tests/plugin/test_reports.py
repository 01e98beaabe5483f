"""End-to-end tests of what a run says: knowledge bases, cache counts, warnings, messages."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset
from tests._pytester import read_json

Project = Callable[..., Path]


KB_CONFTEST = textwrap.dedent(
    """
    import threading
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        with open("kb-builds.txt", "a") as out:
            out.write(f"{settings.variant} {threading.current_thread().name}\\n")
        if settings.options.get("broken"):
            raise ValueError("index server unreachable")
        return {}

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return Answer(retrieved=list(case.pids), text=case.answer)
    """
)


def test_every_knowledge_base_is_built_in_the_main_thread(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project('[[variants]]\nname = "other"\npipeline.top_k = 3\n', conftest=KB_CONFTEST)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-concurrency", "4")
    result.assert_outcomes(passed=11)
    builds = (pytester.path / "kb-builds.txt").read_text().splitlines()
    assert builds == ["None MainThread", "other MainThread"]


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_failed_knowledge_base_is_built_once_and_fails_every_question(
    pytester: pytest.Pytester, make_project: Project, concurrency: str
) -> None:
    make_project(pipeline='[pipeline]\nname = "oracle"\nbroken = true\n', conftest=KB_CONFTEST)
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json",
        "--ragev-concurrency", concurrency,
    )
    result.assert_outcomes(failed=6)
    assert (pytester.path / "kb-builds.txt").read_text().splitlines() == ["None MainThread"]
    errors = {s["error"] for s in read_json(pytester.path / "r.json")["data"]["samples"]}
    assert errors == {
        "KnowledgeBaseFailed: building the knowledge base raised ValueError: "
        "index server unreachable"
    }
    result.stdout.fnmatch_lines(["ragev: verdict FAILED (5 errors)"])


@pytest.mark.slow
def test_answer_cache_counts_add_up_under_xdist(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        "[run]\ncache = true\n",
        conftest=textwrap.dedent(
            """
            import pytest
            from pytest_ragev import Answer

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                return Answer(retrieved=list(case.pids), text=case.answer)
            """
        ),
    )
    args = ("--ragev-config", "ragev.toml", "--ragev-report", "r.json", "-n", "2")
    first = pytester.runpytest_subprocess(*args)
    first.stdout.fnmatch_lines(["ragev: errors 0, *, answer cache 0 hits / 5 misses"])
    second = pytester.runpytest_subprocess(*args)
    second.stdout.fnmatch_lines(["ragev: errors 0, *, answer cache 5 hits / 0 misses"])
    serial = pytester.runpytest("--ragev-config", "ragev.toml")
    serial.stdout.fnmatch_lines(["ragev: errors 0, *, answer cache 5 hits / 0 misses"])


def test_dataset_warnings_reach_the_summary_and_the_report(
    pytester: pytest.Pytester, make_project: Project, mini_data: dict[str, Any]
) -> None:
    make_project()
    qrels = [pair for pair in mini_data["qrels"] if pair[0] != 5]
    qas = [pair for pair in mini_data["qas"] if pair[0] != 4]
    answers = {aid: text for aid, text in mini_data["answers"].items() if aid != 14}
    write_dataset(
        pytester.path / "data", **dict(mini_data, qrels=qrels, qas=qas, answers=answers)
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    expected = [
        "1 question without qrels (first: qid 5): excluded from retrieval means",
        "1 question without a reference answer (first: qid 4): excluded from generation means",
    ]
    result.stdout.fnmatch_lines([f"ragev: warning: {line}" for line in expected])
    assert read_json(pytester.path / "r.json")["data"]["warnings"] == expected


def test_report_params_hold_the_dataset_path_relative_to_the_config(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    assert read_json(pytester.path / "r.json")["data"]["params"]["dataset"]["path"] == "data"


def test_baseline_error_is_said_once(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project('[baseline]\npath = "ragev-baseline.json"\n')
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-profile", "standard", "--ragev-report", "r.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        ["ragev: gate not compared: *ragev-baseline.json was computed with metric profile "
         "'weknora'*"]
    )
    # Once in the ragev summary (the verdict test's FAILED line may quote it as well).
    summary = [line for line in result.stdout.lines if line.startswith("ragev: ")]
    assert sum("was computed with metric profile" in line for line in summary) == 1
    assert "ragev: gate not compared: ragev:" not in result.stdout.str()
    task = read_json(pytester.path / "r.json")["data"]["task"]
    assert task["status"] == 3 and not task["err_msg"].startswith("ragev:")
    assert "ragev:" not in task["err_msg"]


def test_variant_warning_points_at_the_config_file(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        textwrap.dedent(
            """
            [[variants]]
            name = "one"
            pipeline.quality = "bad"

            [[variants]]
            name = "two"
            pipeline.quality = "bad"
            pipeline.extra = 1
            """
        )
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.OK
    # Line 13: the `name = "two"` line (the project writes four lines before the extra).
    result.stdout.fnmatch_lines(
        [
            "*warnings summary*",
            "ragev.toml:13",
            "  */ragev.toml:13: PytestWarning: ragev: variant 'two' changes 2 knobs "
            "(pipeline.extra, pipeline.quality); change one variable at a time*",
        ]
    )
    assert "session.py" not in result.stdout.str()
    assert "variant 'one'" not in result.stdout.str()
