"""End-to-end tests of the plugin through pytester."""

from __future__ import annotations

import gc
import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests._pytester import read_json

Project = Callable[..., Path]

ORACLE_CONFTEST_TEXT = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return Answer(retrieved=list(case.pids), text=case.answer)
    """
)


def test_plugin_without_config_does_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "ragev:" not in result.stdout.str()


def test_config_only_run_collects_one_item_per_question(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    pytester.makepyfile(test_other="def test_not_collected():\n    assert False\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "-v")
    result.assert_outcomes(passed=6)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*ragev.toml::mini::q1 PASSED*",
            "*ragev.toml::mini::q5 PASSED*",
            "ragev: mini (base configuration), 5 questions, profile weknora",
            "*metric*mean*n*threshold*verdict",
            "*recall*1.000*5*",
            "ragev: verdict passed",
        ]
    )


def test_collect_only_lists_stable_ids(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--collect-only", "-q")
    assert result.stdout.lines[:5] == [f"ragev.toml::mini::q{qid}" for qid in range(1, 6)]


def test_limit_and_selection_by_node_id(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-limit", "2")
    result.assert_outcomes(passed=3)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "ragev.toml::mini::q4")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["ragev: mini (base configuration), 1 questions*"])


def test_threshold_failure_sets_exit_status_and_prints_a_red_line(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[thresholds]\nrecall = 0.5\nprecision = 0.9\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    result.assert_outcomes(passed=5, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Even questions retrieve a distractor first: precision = (1 + 2/3 + 1 + 1/2 + 1) / 5.
    result.stdout.fnmatch_lines(
        [
            "*precision*0.833*5*0.900*FAIL",
            "*recall*1.000*5*0.500*ok",
            "ragev: precision 0.833 < threshold 0.900 (n=5)",
            "ragev: verdict FAILED (1 check)",
        ]
    )


def test_thresholds_that_hold_pass(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project("[thresholds]\nrecall = 0.5\nrougel = 0.9\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.OK


def test_pipeline_error_fails_that_item_and_is_excluded_from_means(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        conftest=textwrap.dedent(
            """
            import pytest
            from pytest_ragev import Answer

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                if case.qid == 3:
                    raise ValueError("backend down")
                return Answer(retrieved=list(case.pids), text=case.answer)
            """
        )
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(
        ["*q3: pipeline raised ValueError: backend down*", "*recall*1.000*4*", "*errors 1*"]
    )
    report = read_json(pytester.path / "r.json")
    (failed,) = [s for s in report["data"]["samples"] if s["error"]]
    assert failed["qid"] == 3 and failed["metrics"] == {}
    assert report["data"]["metric"]["counts"]["recall"] == 4
    assert report["data"]["verdict"]["errors"] == 1


def test_hand_written_tests_feed_the_same_aggregation(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    pytester.makepyfile(
        test_manual=textwrap.dedent(
            """
            def test_rag(ragev_case, ragev_answer, ragev_record, ragev_kb):
                assert "corpus" in ragev_kb
                ragev_record(retrieved=ragev_answer.retrieved, text=ragev_answer.text)
            """
        )
    )
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "test_manual.py", "-v", "--ragev-report", "r.json"
    )
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*test_manual.py::test_rag[[]q1[]] PASSED*", "*recall*1.000*5*"])
    assert len(read_json(pytester.path / "r.json")["data"]["samples"]) == 5


def test_ragev_fixtures_skip_without_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_rag(ragev_case):\n    pass\n")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no ragev config*"])


def test_ragev_record_requires_ragev_case(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    pytester.makepyfile(test_rag="def test_rag(ragev_record):\n    pass\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "test_rag.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ragev_record needs the ragev_case fixture in the same test*"])


def test_custom_metrics_and_report_hook(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project(
        "[thresholds]\nshort_answer = 1.0\n",
        conftest=textwrap.dedent(
            """
            import pytest
            from pytest_ragev import Answer, CustomMetric

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                return Answer(retrieved=list(case.pids), text=case.answer * (1 + case.qid % 2))

            @pytest.hookimpl
            def pytest_ragev_metrics():
                return [CustomMetric("short_answer",
                                     lambda m: float(len(m.generated_text) < 45),
                                     kind="generation")]

            @pytest.hookimpl
            def pytest_ragev_report(report):
                report["data"]["amended"] = True
            """
        ),
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["ragev: short_answer 0.* < threshold 1.000 (n=5)"])
    report = read_json(pytester.path / "r.json")
    assert report["data"]["amended"] is True
    assert "short_answer" in report["data"]["metric"]["custom_metrics"]


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[thresholds]\nrecal = 0.5\n", "*[[]thresholds[]] 'recal' is not a metric; did you mean 'recall'?*"),
        ("[thresholds]\nrecall = 2\n", "*[[]thresholds[]] recall = 2 is invalid; use a number in [[]0, 1[]]*"),
        ("[reprot]\njson = 'x'\n", "*unknown key 'reprot'; did you mean 'report'?*"),
        ("[run]\nconcurrency = 'many'\n", "*[[]run[]] concurrency = 'many' is invalid; use a whole number >= 1*"),
    ],
)
def test_config_errors_are_usage_errors(
    pytester: pytest.Pytester, make_project: Project, toml: str, message: str
) -> None:
    make_project(toml)
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stderr.str()


def test_missing_dataset_folder_and_bad_dataset_are_usage_errors(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project()
    config.write_text('[dataset]\npath = "missing"\n', encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *[[]dataset[]] path = 'missing' does not exist*"])

    make_project()
    (pytester.path / "data" / "qas.parquet").unlink()
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *qas.parquet*"])


def test_missing_config_file(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--ragev-config", "nope.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: nope.toml: ragev config file not found*"])


def test_ini_twin(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project()
    pytester.makeini("[pytest]\nragev_config = ragev.toml\n")
    result = pytester.runpytest("ragev.toml")
    result.assert_outcomes(passed=6)


def test_report_schema(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project("[thresholds]\nrecall = 0.5\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "out/r.json")
    assert result.ret == pytest.ExitCode.OK
    report = read_json(pytester.path / "out" / "r.json")
    assert report["success"] is True
    data = report["data"]
    assert list(data) == ["task", "params", "metric", "samples", "verdict", "errors",
                          "attribution", "usage", "lowest", "schema_version"]
    task = data["task"]
    assert list(task) == [
        "id", "dataset_id", "start_time", "status", "err_msg", "total", "finished"
    ]
    assert re.fullmatch(r"evaluation_\d{13}_[0-9a-f]{8}_mini", task["id"])  # no user name
    assert task["status"] == 2 and task["err_msg"] == ""
    assert task["total"] == task["finished"] == 5
    assert list(data["metric"]["retrieval_metrics"]) == [
        "precision", "recall", "ndcg3", "ndcg10", "mrr", "map"
    ]
    assert list(data["metric"]["generation_metrics"]) == [
        "bleu1", "bleu2", "bleu4", "rouge1", "rouge2", "rougel"
    ]
    assert data["metric"]["retrieval_metrics"]["recall"] == 1.0
    sample = data["samples"][1]
    # WeKnora's keys, then the question's content hash (pairs saved reports after edits).
    assert list(sample) == [
        "qid", "question", "retrieval_gt", "retrieval_ids", "generated_text", "generated_gt",
        "metrics", "error", "hash",
    ]
    assert re.fullmatch(r"[0-9a-f]{16}", sample["hash"])
    assert sample["qid"] == 2 and sample["retrieval_gt"] == [[1, 2]]
    assert sample["retrieval_ids"] == [6, 1, 2]
    assert data["params"]["dataset"]["id"] == "mini"
    assert data["params"]["thresholds"] == {"recall": 0.5}
    assert data["verdict"] == {"passed": True, "failures": [], "errors": 0, "fallbacks": 0}


def test_secrets_never_reach_any_output(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "sk-canary-7f3a9"
    monkeypatch.setenv("RAGEV_TEST_KEY", canary)
    make_project(
        pipeline=textwrap.dedent(
            f"""
            [pipeline]
            name = "oracle"
            api_key = "{canary}"
            chat = {{ api_key_env = "RAGEV_TEST_KEY", token = "{canary}" }}
            """
        )
    )
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "--junitxml", "j.xml", "-v"
    )
    assert result.ret == pytest.ExitCode.OK
    outputs = [result.stdout.str(), result.stderr.str()]
    outputs += [p.read_text(encoding="utf-8") for p in (pytester.path / "r.json",
                                                         pytester.path / "j.xml")]
    for text in outputs:
        assert canary not in text
    params = read_json(pytester.path / "r.json")["data"]["params"]["pipeline"]
    assert params["api_key"] == "***"
    assert params["chat"] == {"api_key_env": "RAGEV_TEST_KEY", "token": "***"}


def test_progress_file_is_rewritten_while_the_run_goes(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        "[run]\nprogress_interval = 0.001\n",
        conftest=textwrap.dedent(
            """
            import json, pathlib, time
            import pytest
            from pytest_ragev import Answer

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                # Longer than progress_interval: each finished item is written before
                # the next question (items faster than the interval may share a write).
                time.sleep(0.02)
                report = pathlib.Path("r.json")
                if report.exists():
                    task = json.loads(report.read_text())["data"]["task"]
                    with open("seen.txt", "a") as seen:
                        seen.write(f"{case.qid} {task['status']} {task['finished']}\\n")
                return Answer(retrieved=list(case.pids), text=case.answer)
            """
        ),
    )
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "-p", "no:randomly"
    )
    assert result.ret == pytest.ExitCode.OK
    seen = (pytester.path / "seen.txt").read_text().split("\n")
    # The file exists from the start: status 1 with nothing finished when q1 is asked.
    assert seen[:5] == ["1 1 0", "2 1 1", "3 1 2", "4 1 3", "5 1 4"]
    assert read_json(pytester.path / "r.json")["data"]["task"]["status"] == 2


def test_the_running_report_shows_the_mean_of_the_answered_questions(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        "[run]\nprogress_interval = 0.001\n",
        conftest=textwrap.dedent(
            """
            import json, pathlib, time
            import pytest
            from pytest_ragev import Answer

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                time.sleep(0.02)
                report = pathlib.Path("r.json")
                if report.exists():
                    metric = json.loads(report.read_text())["data"]["metric"]
                    with open("seen.jsonl", "a") as seen:
                        seen.write(json.dumps([case.qid, metric]) + "\\n")
                # Odd questions retrieve their passage, even ones a distractor only.
                return Answer(retrieved=list(case.pids) if case.qid % 2 else [7],
                              text=case.answer)
            """
        ),
    )
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "--ragev-concurrency", "1"
    )
    assert result.ret == pytest.ExitCode.OK
    seen = dict(json.loads(line) for line in
                (pytester.path / "seen.jsonl").read_text().splitlines())
    assert seen[1] is None  # nothing answered yet, as the original
    # Asked for q4, the report holds q1..q3: recall 1, 0, 1.
    assert seen[4]["counts"]["recall"] == 3
    assert seen[4]["retrieval_metrics"]["recall"] == pytest.approx(2 / 3)
    assert set(seen[4]["generation_metrics"]) == {"bleu1", "bleu2", "bleu4", "rouge1", "rouge2",
                                                  "rougel"}


def test_interrupted_run_leaves_status_3(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project(
        conftest=textwrap.dedent(
            """
            import pytest
            from pytest_ragev import Answer

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                if case.qid == 3:
                    raise KeyboardInterrupt
                return Answer(retrieved=list(case.pids), text=case.answer)
            """
        )
    )
    # In a subprocess: a KeyboardInterrupt must not reach the outer (possibly xdist) run.
    result = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = read_json(pytester.path / "r.json")
    assert report["success"] is False
    assert report["data"]["task"]["status"] == 3
    assert "interrupted" in report["data"]["task"]["err_msg"]
    assert report["data"]["task"]["finished"] == 2


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    data = dict(report["data"])
    data.pop("task")
    return data


@pytest.mark.slow
def test_xdist_parity_with_serial(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project("[thresholds]\nprecision = 0.9\n")
    serial = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "serial.json",
                                "--ragev-samples", "serial.jsonl")
    parallel = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--ragev-report", "xdist.json", "-n", "2",
        "--ragev-samples", "xdist.jsonl",
    )
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED
    parallel.stdout.fnmatch_lines(["ragev: precision 0.833 < threshold 0.900 (n=5)"])
    assert _comparable(read_json(pytester.path / "serial.json")) == _comparable(
        read_json(pytester.path / "xdist.json")
    )
    task = read_json(pytester.path / "xdist.json")["data"]["task"]
    assert task["total"] == task["finished"] == 5
    # --ragev-samples: the controller writes one line per question, as a serial run does.
    samples = {}
    for name in ("serial", "xdist"):
        lines = (pytester.path / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        samples[name] = sorted((json.loads(line) for line in lines), key=lambda s: s["qid"])
    assert [s["qid"] for s in samples["xdist"]] == [1, 2, 3, 4, 5]
    assert samples["serial"] == samples["xdist"]


def test_runs_without_xdist(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project()
    result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "-p", "no:xdist")
    result.assert_outcomes(passed=6)


def test_concurrency_parity(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project(
        conftest=ORACLE_WITH_DELAY,
    )
    one = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-concurrency", "1", "--ragev-report", "one.json"
    )
    four = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-concurrency", "4", "--ragev-report", "four.json",
        "-v",
    )
    one.assert_outcomes(passed=6)
    four.assert_outcomes(passed=6)
    # Items still report in order.
    four.stdout.fnmatch_lines([f"*::q{qid} PASSED*" for qid in range(1, 6)])
    assert _comparable(read_json(pytester.path / "one.json")) == _comparable(
        read_json(pytester.path / "four.json")
    )
    threads = (pytester.path / "threads.txt").read_text().split()
    assert any(name.startswith("ragev") for name in threads)


ORACLE_WITH_DELAY = textwrap.dedent(
    """
    import threading, time
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        time.sleep(0.01 * (6 - case.qid))  # later questions finish first
        with open("threads.txt", "a") as out:
            out.write(threading.current_thread().name + "\\n")
        return Answer(retrieved=[6, *case.pids][: 1 + case.qid % 3], text=case.answer[: 10 * case.qid])
    """
)


def test_variants_get_their_own_items(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project(
        '[[variants]]\nname = "bad"\npipeline.quality = "bad"\n',
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--collect-only", "-q")
    assert "ragev.toml::mini::bad::q3" in result.stdout.lines
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-variant", "bad")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["ragev: mini (variant bad), 5 questions*", "*recall*0.000*5*"])
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-variant", "bda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*did you mean 'bad'?*"])


def test_thresholds_hold_the_base_configuration_and_selected_variants_only(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # The "bad" variant retrieves nothing relevant (recall 0).
    make_project('[thresholds]\nrecall = 0.5\n\n[[variants]]\nname = "bad"\npipeline.quality = "bad"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    result.assert_outcomes(passed=11)
    assert result.ret == pytest.ExitCode.OK  # a variant is an experiment, not the shipped config
    result.stdout.fnmatch_lines(["ragev: verdict passed"])
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-variant", "bad")
    result.assert_outcomes(passed=5, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # selected on its own, it is checked
    result.stdout.fnmatch_lines(["ragev: recall [[]bad[]] 0.000 < threshold 0.500 (n=5)"])

def test_tokenizer_hook_replaces_the_spec_tokenizer(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        conftest=ORACLE_CONFTEST_TEXT
        + textwrap.dedent(
            """
            @pytest.hookimpl
            def pytest_ragev_tokenizer():
                # Every text is one token: only identical answers score.
                return lambda text: [[text.lower()]] if text else []
            """
        )
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    metrics = read_json(pytester.path / "r.json")["data"]["metric"]["generation_metrics"]
    assert metrics["bleu1"] == pytest.approx(1.0)
    assert metrics["bleu2"] == 0.0  # a single token has no bigram


COUNTING_KB = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        with open("kb-builds.txt", "a", encoding="utf-8") as handle:
            handle.write("built\\n")
        return {"corpus": dict(corpus)}

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return Answer(retrieved=list(case.pids), text=case.answer or "")
    """
)


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_a_fully_cached_rerun_builds_no_kb(
    pytester: pytest.Pytester, make_project: Project, concurrency: str
) -> None:
    make_project("[run]\ncache = true\n", conftest=COUNTING_KB)
    args = ("--ragev-config", "ragev.toml", "--ragev-concurrency", concurrency)
    first = pytester.runpytest(*args, "--ragev-report", "first.json")
    first.assert_outcomes(passed=6)
    builds = pytester.path / "kb-builds.txt"
    assert builds.read_text(encoding="utf-8").split() == ["built"]
    rerun = pytester.runpytest(*args, "--ragev-report", "rerun.json")
    rerun.assert_outcomes(passed=6)
    rerun.stdout.fnmatch_lines(["*answer cache 5 hits / 0 misses*"])
    # Every answer came from the cache, also through the prefetch pool: no KB built.
    assert builds.read_text(encoding="utf-8").split() == ["built"]
    assert (read_json(pytester.path / "rerun.json")["data"]["samples"]
            == read_json(pytester.path / "first.json")["data"]["samples"])


def test_knowledge_bases_are_torn_down_before_the_end_of_the_run(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # A knowledge base can be as large as its corpus; the end of the run (scoring, the
    # baseline, the reports) never reads it, so it is released before that starts, and
    # torn down once.
    make_project()
    pytester.makeconftest(
        textwrap.dedent(
            """
            import pytest
            from pytest_ragev import Answer

            events = []

            @pytest.hookimpl
            def pytest_ragev_build_knowledge_base(corpus, settings):
                return {"Wissensbasis": "知识库"}

            @pytest.hookimpl
            def pytest_ragev_teardown_knowledge_base(kb, settings):
                events.append("teardown")

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                return Answer(retrieved=list(case.pids), text=case.answer)

            @pytest.hookimpl
            def pytest_ragev_report(report):
                events.append("report")

            def pytest_unconfigure(config):
                with open("events.txt", "w", encoding="utf-8") as handle:
                    handle.write(" ".join(events))
            """
        )
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    result.assert_outcomes(passed=6)
    assert (pytester.path / "events.txt").read_text(encoding="utf-8") == "teardown report"


_LIVE_TEXTS_CONFTEST = """
import gc
import json
import os

import pytest
from pytest_ragev import Answer, Chunk

MARK = "Abschnitt 片段 "
# This run's own texts: an earlier in-process run of the same test module may still
# hold its records (pytester keeps what it ran) and must not count here.
RUN = " " + os.path.basename(os.getcwd())
{metrics}

@pytest.hookimpl
def pytest_ragev_answer(case, kb, settings):
    chunks = [Chunk(text=f"{{MARK}}{{case.qid}}-{{rank}}{{RUN}}", passage_id=pid)
              for rank, pid in enumerate(case.pids)]
    return Answer(retrieved=chunks, text=case.answer)

def _ours(text):
    return str(text).startswith(MARK) and str(text).endswith(RUN)

@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    result = yield
    # After the end of the run, while pytest still holds every report: the records still
    # alive that hold retrieved texts, and the texts the reports carry.
    live = sum(1 for obj in gc.get_objects() if type(obj).__name__ == "Record"
               and any(_ours(item) for item in obj.retrieved))
    carried = sorted(text.removesuffix(RUN) for item in session.items
                     for name, value in item.user_properties
                     if name == "ragev" for text in json.loads(value)["retrieved"])
    with open("live.json", "w", encoding="utf-8") as handle:
        json.dump({{"live": live, "carried": carried}}, handle, ensure_ascii=False)
    return result
"""


@pytest.mark.parametrize(("custom_metric", "junit"), [(False, True), (True, True),
                                                     (False, False), (True, False)])
def test_the_run_keeps_retrieved_texts_only_where_they_are_read(
    pytester: pytest.Pytester, make_project: Project, custom_metric: bool, junit: bool
) -> None:
    # The records the run keeps to its end hold the retrieved chunk texts only when a
    # custom metric may read them, and the test reports (which pytest keeps to the end
    # too) only when JUnit writes them or a custom metric reads them: a few KB a
    # question, 300 MB over 100,000 questions.
    metrics = ('\n@pytest.hookimpl\ndef pytest_ragev_metrics():\n    from pytest_ragev import '
               'CustomMetric\n    return [CustomMetric("chunks_seen", lambda m: float(bool('
               'm.retrieved_texts)), kind="retrieval")]\n' if custom_metric else "")
    make_project(conftest=_LIVE_TEXTS_CONFTEST.format(metrics=metrics))
    result = pytester.runpytest_inprocess("--ragev-config", "ragev.toml", "--ragev-report",
                                          "r.json", *(["--junitxml", "junit.xml"] if junit else []))
    result.assert_outcomes(passed=6)
    live = json.loads((pytester.path / "live.json").read_text(encoding="utf-8"))
    if junit or custom_metric:
        assert live["carried"][:2] == ["Abschnitt 片段 1-0", "Abschnitt 片段 2-0"]
    else:
        assert live["carried"] == []
    if junit:
        assert "Abschnitt 片段 1-0" in (pytester.path / "junit.xml").read_text(encoding="utf-8")
    if custom_metric:
        assert live["live"] >= 5
        means = read_json(pytester.path / "r.json")["data"]["metric"]["custom_metrics"]
        assert means["chunks_seen"] == 1.0
    else:
        assert live["live"] == 0
    # Whatever the reports carry, the metrics are the same.
    assert read_json(pytester.path / "r.json")["data"]["metric"]["retrieval_metrics"][
        "recall"] == 1.0


FREEZE_PROBE_CONFTEST = textwrap.dedent(
    """
    import gc
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return Answer(retrieved=list(case.pids), text=case.answer,
                      meta={"frozen": gc.get_freeze_count()})
    """
)


def test_the_questions_run_with_the_collected_objects_frozen_and_thawed_at_the_end(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    """The items and what collection made are out of the garbage collector's full
    traversals while the questions run, and handed back when the session ends."""
    make_project(conftest=FREEZE_PROBE_CONFTEST)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    result.assert_outcomes(passed=6)
    samples = read_json(pytester.path / "r.json")["data"]["samples"]
    assert len(samples) == 5 and all(s["meta"]["frozen"] > 0 for s in samples)
    assert gc.get_freeze_count() == 0


def test_a_run_without_a_ragev_config_freezes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import gc\n\ndef test_probe():\n    assert gc.get_freeze_count() == 0\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
