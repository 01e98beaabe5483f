"""Where CI tools look: the verdict as a test, JUnit properties, -v scores, per-question floors."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._oracle import ORACLE_CONFTEST
from tests._pytester import SERIAL_AND_XDIST

Project = Callable[..., Path]


def junit_cases(path: Path) -> dict[str, ElementTree.Element]:
    root = ElementTree.parse(path).getroot()
    return {f"{case.get('classname')}.{case.get('name')}": case for case in root.iter("testcase")}


@pytest.mark.parametrize("dist", SERIAL_AND_XDIST)
def test_a_failed_verdict_is_a_failed_test_in_the_summary_and_junit(
    pytester: pytest.Pytester, make_project: Project, dist: list[str]
) -> None:
    make_project("[thresholds]\nprecision = 0.9\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--junitxml", "j.xml", *dist)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines([
        "FAILED ragev.toml::mini::verdict - ragev: precision 0.833 < thresh*",
    ])
    assert result.stdout.lines[-1].startswith("=") and "1 failed, 5 passed" in result.stdout.lines[-1]
    suite = ElementTree.parse(pytester.path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1" and suite.get("tests") == "6"
    (verdict,) = [case for name, case in junit_cases(pytester.path / "j.xml").items()
                  if name.endswith("verdict")]
    failure = verdict.find("failure")
    assert failure is not None
    assert failure.get("message") == "ragev: precision 0.833 < threshold 0.900 (n=5)"


def test_a_passing_verdict_is_a_passing_test(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[thresholds]\nrecall = 0.5\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "-v")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*ragev.toml::mini::verdict PASSED*[[]100%[]]"])


def test_junit_testcase_properties_are_json_with_the_questions_metrics(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--junitxml", "j.xml")
    assert result.ret == pytest.ExitCode.OK
    q2 = junit_cases(pytester.path / "j.xml")["ragev.toml.mini.q2"]
    (prop,) = [p for p in q2.iter("property") if p.get("name") == "ragev"]
    record = json.loads(prop.get("value") or "")  # JSON, not a Python repr
    assert record["qid"] == 2 and record["question"] == "How tall is the Eiffel Tower?"
    # q2 retrieves a distractor first: precision 2/3, recall 1.
    assert record["metrics"]["precision"] == pytest.approx(2 / 3)
    assert record["metrics"]["recall"] == 1.0 and "rougel" in record["metrics"]


def test_verbose_item_lines_show_the_key_scores(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project('[[variants]]\nname = "bad"\npipeline.quality = "bad"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml", "-v", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "*ragev.toml::mini::q2 PASSED recall 1.00 rougel 1.00*",
        "*ragev.toml::mini::bad::q2 PASSED recall 0.00 rougel 0.00*",
    ])
    quiet = pytester.runpytest("--ragev-config", "ragev.toml")
    assert "recall 1.00" not in quiet.stdout.str()


def test_item_thresholds_fail_the_questions_below_them_and_the_verdict(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # Even questions retrieve a distractor first: their precision is 2/3 or 1/2.
    make_project("[item_thresholds]\nprecision = 0.9\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines([
        "FAILED ragev.toml::mini::q2 - ragev: q2 precision 0.667 < item threshol*",
        "FAILED ragev.toml::mini::q4 - ragev: q4 precision 0.500 < item threshol*",
    ])
    result.stdout.fnmatch_lines(["ragev: 2 question(s) below their [item_thresholds]: q2, q4"])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert report["data"]["verdict"]["passed"] is False
    # Below a floor is not an error: the question is scored and counted.
    assert report["data"]["verdict"]["errors"] == 0
    assert report["data"]["metric"]["counts"]["precision"] == 5


def test_an_unknown_item_threshold_metric_is_a_usage_error(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[item_thresholds]\nrecal = 0.5\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: *[[]item_thresholds[]] 'recal' is not a metric; did you mean 'recall'?"])


def test_a_custom_metric_out_of_range_stops_the_run_at_the_first_question(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=ORACLE_CONFTEST + textwrap.dedent(
        """
        from pytest_ragev import CustomMetric

        @pytest.hookimpl
        def pytest_ragev_metrics():
            return [CustomMetric("länge", lambda m: float(len(m.generated_text)))]
        """
    ))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-concurrency", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # Stopped at q1: the other questions never ran.
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["ragev: error: custom metric 'länge' returned * for q1*"])
    task = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]["task"]
    assert task["status"] == 3 and "custom metric 'länge'" in task["err_msg"]


def test_update_baseline_without_a_path_fails_before_any_question(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --ragev-update-baseline needs a baseline path; set "
                                 "[[]baseline[]] path in *ragev.toml or pass --ragev-baseline PATH"])
    assert "q1" not in result.stdout.str()
    (pytester.path / "taken").mkdir()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline",
                                "--ragev-baseline", "taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --ragev-update-baseline: the baseline path * is a folder*"])
