"""End to end: custom metrics that read the question, the retrieved texts and the answer's
meta, unbounded lower-is-better figures gated by a ceiling, and the summary's latency
percentiles and token totals."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._pytester import SERIAL_AND_XDIST

Project = Callable[..., Path]

METERED = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer, Chunk, CustomMetric

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return dict(corpus)

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        # The first passage as an id, a chunk of the next one as text.
        retrieved = [case.pids[0], *(Chunk(text=kb[p][:30]) for p in case.pids[1:])]
        usage = {"prompt_tokens": 200 + case.qid, "completion_tokens": 10 * case.qid}
        return Answer(retrieved=retrieved, text=case.answer,
                      meta={"latency_s": case.qid / 10, **usage})

    def mentions_the_question(m):
        # The case: a one-word check that the answer repeats the question's subject.
        return float(m.question.split()[-1].rstrip("?").lower() in m.generated_text.lower())

    @pytest.hookimpl
    def pytest_ragev_metrics():
        return [
            CustomMetric("latency_s", lambda m: m.meta["latency_s"], direction="lower",
                         bounds=(0.0, None)),
            CustomMetric("context_chars", lambda m: float(sum(map(len, m.retrieved_texts))),
                         direction="lower", bounds=(0.0, None)),
            CustomMetric("on_topic", mentions_the_question, kind="generation"),
            CustomMetric("first_is_gold", lambda m: float(m.retrieval_ids[0] in
                                                          m.retrieval_gt[0])),
        ]
    """
)


def test_custom_metrics_read_the_case_and_unbounded_ones_have_ceilings(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # Thresholds in seconds and characters: outside [0, 1], which the twelve keep.
    make_project("[thresholds]\nlatency_s = 0.25\ncontext_chars = 500\nrecall = 0.9\n",
                 conftest=METERED)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-markdown", "r.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "  latency_s       0.300      5      0.250  FAIL",
        "  context_chars  74.000      5    500.000  ok",
        "  on_topic        0.800      5 *",
        "  pipeline: conftest hooks (conftest.py)",
        "  latency p50 0.30 s, p95 0.48 s (5 answers); tokens 1015 prompt + 150 completion "
        "= 1165 (5 answers)",
        "*",
        "ragev: latency_s 0.300 > threshold 0.250 (n=5)",
    ])
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    custom = data["metric"]["custom_metrics"]
    # q2 retrieves passage 1 by id and 30 characters of passage 2; the others one passage each.
    corpus_chars = [69, 69 + 30, 70, 66, 66]
    assert custom["context_chars"] == pytest.approx(sum(corpus_chars) / 5)
    assert custom["first_is_gold"] == 1.0  # a one-argument metric, as before
    # "completed", "tower", "everest", "python" are in their answers; "china" is not.
    assert custom["on_topic"] == pytest.approx(0.8)
    assert data["usage"]["latency_s"] == {"p50": pytest.approx(0.3), "p95": pytest.approx(0.48),
                                          "n": 5}
    assert data["usage"]["tokens"] == {"prompt": 1015, "completion": 150, "total": 1165, "n": 5}
    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "| latency_s | 0.300 | ≤ 0.250 | 5 | ❌ unmet |" in markdown
    assert "latency p50 0.30 s, p95 0.48 s (5 answers)" in markdown


def test_a_bounded_metric_out_of_its_range_is_one_line(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # Without bounds=(0.0, None) a metric's values must lie in [0, 1].
    make_project(conftest=textwrap.dedent(
        """
        import pytest
        from pytest_ragev import Answer, CustomMetric

        @pytest.hookimpl
        def pytest_ragev_answer(case, kb, settings):
            return Answer(retrieved=list(case.pids), text=case.answer,
                          meta={"latency_s": case.qid / 2})

        @pytest.hookimpl
        def pytest_ragev_metrics():
            return [CustomMetric("latency_s", lambda m: m.meta["latency_s"], direction="lower")]
        """
    ))
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "ragev: error: custom metric 'latency_s' returned 1.5 for q3; return a finite number "
        "in [[]0, 1[]]"])


def test_a_baseline_with_unbounded_metrics_gates_the_next_run(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    """A context_chars mean of 74 is no damage: only the twelve lie in [0, 1]. The baseline
    check refused every metric outside [0, 1], so such a baseline never loaded."""
    make_project('[baseline]\npath = "ragev-baseline.json"\n', conftest=METERED)
    created = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    assert created.ret == pytest.ExitCode.OK
    baseline = json.loads((pytester.path / "ragev-baseline.json").read_text(encoding="utf-8"))
    assert baseline["base"]["metrics"]["context_chars"]["mean"] > 1
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert "gate not compared" not in result.stdout.str()


def test_an_item_ceiling_on_a_lower_is_better_metric_fails_the_slow_questions(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # latency_s is q/10 s: q4 (0.4 s) and q5 (0.5 s) are above the 0.35 s ceiling.
    make_project("[item_thresholds]\nlatency_s = 0.35\n", conftest=METERED)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines([
        "FAILED ragev.toml::mini::q4 - ragev: q4 latency_s 0.400 > item threshol*",
        "FAILED ragev.toml::mini::q5 - ragev: q5 latency_s 0.500 > item threshol*",
    ])
    result.stdout.fnmatch_lines(["ragev: 2 question(s) below their [item_thresholds]: q4, q5"])
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert data["verdict"]["passed"] is False and data["verdict"]["errors"] == 0
    assert data["metric"]["counts"]["latency_s"] == 5


@pytest.mark.parametrize("dist", SERIAL_AND_XDIST)
def test_a_custom_metric_reads_the_chunk_texts_without_junit_and_under_xdist(
    pytester: pytest.Pytester, make_project: Project, dist: list[str]
) -> None:
    # Without --junitxml a test report carries the chunk texts only because a custom
    # metric reads them: under xdist they cross the channel to the controller, where
    # the records are scored, and context_chars counts the same characters.
    make_project(conftest=METERED)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                *dist)
    assert result.ret == pytest.ExitCode.OK
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert data["metric"]["custom_metrics"]["context_chars"] == 74.0
    by_qid = {sample["qid"]: sample["metrics"] for sample in data["samples"]}
    assert by_qid[2]["context_chars"] == 69 + 30


@pytest.mark.parametrize("dist", SERIAL_AND_XDIST)
def test_a_questions_junit_metrics_are_the_reports_custom_ones_too(
    pytester: pytest.Pytester, make_project: Project, dist: list[str]
) -> None:
    # --junitxml scores each question when it is answered; a custom metric then reads the
    # same case and passage texts as at the end of the run (q2's first passage is an id).
    make_project(conftest=METERED)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--junitxml", "j.xml", *dist)
    assert result.ret == pytest.ExitCode.OK
    root = ElementTree.parse(pytester.path / "j.xml").getroot()
    at_item = {
        json.loads(prop.get("value") or "")["qid"]: json.loads(prop.get("value") or "")["metrics"]
        for prop in root.iter("property") if prop.get("name") == "ragev"
    }
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    at_end = {sample["qid"]: sample["metrics"] for sample in data["samples"]}
    assert at_item[2]["context_chars"] == 69 + 30
    assert at_item == at_end
