"""End-to-end tests of a run's life cycle: signals, crashed workers, progress, the verdict."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._pytester import read_json

Project = Callable[..., Path]


def pipeline(body: str) -> str:
    """A conftest whose pipeline runs ``body`` (with ``case`` in scope) before answering."""
    return textwrap.dedent(
        """
        import json, os, pathlib, signal, threading, time
        import pytest
        from pytest_ragev import Answer

        @pytest.hookimpl
        def pytest_ragev_answer(case, kb, settings):
        {body}
            return Answer(retrieved=list(case.pids), text=case.answer)
        """
    ).format(body=textwrap.indent(textwrap.dedent(body), "    "))


# ---------------------------------------------------------------------- SIGTERM
def test_sigterm_ends_the_run_like_ctrl_c(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=pipeline(
        """
        if case.qid == 3:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this at once
        """
    ))
    result = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "--ragev-concurrency", "1"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    task = read_json(pytester.path / "r.json")["data"]["task"]
    assert task["status"] == 3
    assert task["err_msg"] == "interrupted by SIGTERM before every question was answered"
    assert (task["finished"], task["total"]) == (2, 5)
    verdict = read_json(pytester.path / "r.json")["data"]["verdict"]
    assert verdict["passed"] is False
    assert verdict["failures"] == ["ragev: run interrupted by SIGTERM: 2 of 5 questions answered"]
    result.stdout.fnmatch_lines(
        [
            "ragev: run interrupted by SIGTERM: 2 of 5 questions answered",
            "ragev: verdict FAILED (interrupted by SIGTERM)",
        ]
    )
    assert "verdict passed" not in result.stdout.str()


@pytest.mark.slow
def test_sigterm_to_the_xdist_controller_leaves_status_3(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # The worker's parent is the controller: what `timeout` or `docker stop` signal.
    make_project(conftest=pipeline(
        """
        if case.qid == 3:
            os.kill(os.getppid(), signal.SIGTERM)
            time.sleep(5)
        """
    ))
    result = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "-n", "2"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    task = read_json(pytester.path / "r.json")["data"]["task"]
    assert task["status"] == 3
    assert task["err_msg"].startswith("interrupted by SIGTERM")
    assert task["total"] == 5 and task["finished"] < 5


def test_sigterm_handler_is_restored_after_the_run(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    import signal

    make_project(conftest=pipeline(
        """
        with open("handler.txt", "a") as out:
            out.write(getattr(signal.getsignal(signal.SIGTERM), "__name__", "-") + "\\n")
        """
    ))
    before = signal.getsignal(signal.SIGTERM)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-concurrency", "1")
    assert result.ret == pytest.ExitCode.OK
    assert set((pytester.path / "handler.txt").read_text().split()) == {"_on_sigterm"}
    assert signal.getsignal(signal.SIGTERM) is before


# ---------------------------------------------------------------------- crashed workers
@pytest.mark.slow
def test_crashed_worker_counts_its_question_as_an_error(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=pipeline(
        """
        if case.qid == 3:
            os._exit(1)
        """
    ))
    result = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "-n", "2"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    data = read_json(pytester.path / "r.json")["data"]
    assert [s["qid"] for s in data["samples"]] == [1, 2, 3, 4, 5]
    (crashed,) = [s for s in data["samples"] if s["error"]]
    assert crashed["qid"] == 3 and crashed["metrics"] == {}
    assert "crashed while running 'ragev.toml::mini::q3'" in crashed["error"]
    assert data["verdict"]["errors"] == 1 and data["verdict"]["passed"] is False
    assert data["task"]["finished"] == data["task"]["total"] == 5
    assert data["metric"]["counts"]["recall"] == 4
    result.stdout.fnmatch_lines(
        ["ragev: errors 1, *", "ragev: verdict FAILED (1 error)"]
    )


# ---------------------------------------------------------------------- progress file
STALE = {
    "success": True,
    "data": {"task": {"id": "evaluation_old_1_deadbeef_mini", "status": 2, "total": 99,
                      "finished": 99}},
}


def test_progress_file_is_pending_then_running_with_the_new_task(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        "[run]\nprogress_interval = 0.001\n",
        conftest=pipeline(
            """
            # Each item lasts well over progress_interval, so every finished item is
            # written before the next question is asked (fast items may share a write).
            time.sleep(0.02)
            task = json.loads(pathlib.Path("r.json").read_text())["data"]["task"]
            with open("seen.txt", "a") as seen:
                seen.write(f"{task['id']} {task['status']} {task['finished']} {task['total']}\\n")
            """
        ) + textwrap.dedent(
            """
            @pytest.hookimpl(tryfirst=True)
            def pytest_runtestloop(session):
                task = json.loads(pathlib.Path("r.json").read_text())["data"]["task"]
                pathlib.Path("loop.txt").write_text(
                    f"{task['id']} {task['status']} {task['finished']} {task['total']}"
                )
            """
        ),
    )
    (pytester.path / "r.json").write_text(json.dumps(STALE), encoding="utf-8")
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "-p", "no:randomly"
    )
    assert result.ret == pytest.ExitCode.OK
    task_id = read_json(pytester.path / "r.json")["data"]["task"]["id"]
    assert task_id != STALE["data"]["task"]["id"]
    # Before the first item: pending, with this run's id and total.
    assert (pytester.path / "loop.txt").read_text() == f"{task_id} 0 0 5"
    seen = (pytester.path / "seen.txt").read_text().splitlines()
    assert seen == [f"{task_id} 1 {n} 5" for n in range(5)]


@pytest.mark.slow
def test_progress_total_under_xdist_is_known_before_the_end(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        "[run]\nprogress_interval = 0.001\n",
        conftest=pipeline(
            """
            task = json.loads(pathlib.Path("r.json").read_text())["data"]["task"]
            with open(f"seen-{os.getpid()}.txt", "a") as seen:
                seen.write(f"{task['id']} {task['status']} {task['finished']} {task['total']}\\n")
            """
        ),
    )
    (pytester.path / "r.json").write_text(json.dumps(STALE), encoding="utf-8")
    result = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "-n", "2"
    )
    assert result.ret == pytest.ExitCode.OK
    task_id = read_json(pytester.path / "r.json")["data"]["task"]["id"]
    seen = [
        line.split()
        for path in pytester.path.glob("seen-*.txt")
        for line in path.read_text().splitlines()
    ]
    assert len(seen) == 5
    for seen_id, status, finished, total in seen:
        # The workers start only after the controller wrote the new task (status 0 or 1).
        assert seen_id == task_id and status in ("0", "1")
        assert total == "5" and int(finished) < 5


def test_hand_written_and_generated_items_count_questions_once(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[run]\nprogress_interval = 0.001\n")
    pytester.makepyfile(
        test_manual=textwrap.dedent(
            """
            import json, pathlib

            def test_rag(ragev_case, ragev_answer, ragev_record):
                task = json.loads(pathlib.Path("r.json").read_text())["data"]["task"]
                with open("seen.txt", "a") as seen:
                    seen.write(f"{task['finished']}/{task['total']}\\n")
                ragev_record(retrieved=ragev_answer.retrieved, text=ragev_answer.text)
            """
        )
    )
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "test_manual.py", "ragev.toml", "--ragev-limit", "3",
        "--ragev-report", "r.json", "-p", "no:randomly",
    )
    result.assert_outcomes(passed=7)
    assert (pytester.path / "seen.txt").read_text().split() == ["0/3", "1/3", "2/3"]
    task = read_json(pytester.path / "r.json")["data"]["task"]
    assert task["finished"] == task["total"] == 3
    result.stdout.fnmatch_lines(["ragev: 3 duplicate records*"])


def test_a_hand_written_test_failing_before_recording_has_finished(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    pytester.makepyfile(
        test_manual=textwrap.dedent(
            """
            def test_rag(ragev_case, ragev_answer, ragev_record):
                assert ragev_case.qid != 2, "no answer worth recording"
                ragev_record(retrieved=ragev_answer.retrieved, text=ragev_answer.text)
            """
        )
    )
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "test_manual.py", "--ragev-report", "r.json"
    )
    result.assert_outcomes(passed=5, failed=1)
    task = read_json(pytester.path / "r.json")["data"]["task"]
    # The run went to its end: not "4 of 5", which reads as a run still going.
    assert (task["status"], task["finished"], task["total"]) == (2, 5, 5)

# ---------------------------------------------------------------------- empty runs
def test_collect_only_leaves_the_report_alone(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    report = pytester.path / "co.json"
    report.write_text(json.dumps(STALE), encoding="utf-8")
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--collect-only", "--ragev-report", "co.json"
    )
    assert result.ret == pytest.ExitCode.OK
    assert read_json(report) == STALE
    assert "ragev:" not in result.stdout.str()


def test_ini_twin_with_only_unrelated_tests_prints_no_verdict(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project('[report]\njson = "r.json"\n')
    pytester.makeini("[pytest]\nragev_config = ragev.toml\n")
    pytester.makepyfile(test_other="def test_ok():\n    assert True\n")
    result = pytester.runpytest("test_other.py")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "ragev:" not in result.stdout.str()
    assert not (pytester.path / "r.json").exists()


def test_ctrl_c_fails_the_verdict(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project(conftest=pipeline(
        """
        if case.qid == 4:
            raise KeyboardInterrupt
        """
    ))
    result = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "--ragev-concurrency", "1"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    data = read_json(pytester.path / "r.json")["data"]
    assert data["verdict"]["passed"] is False
    assert data["task"]["err_msg"] == "interrupted before every question was answered"
    result.stdout.fnmatch_lines(
        ["ragev: run interrupted: 3 of 5 questions answered", "ragev: verdict FAILED (interrupted)"]
    )


def test_every_question_erroring_fails_the_verdict(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=pipeline('raise ConnectionError("backend down")\n'))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    result.assert_outcomes(failed=6)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["ragev: verdict FAILED (5 errors)"])
    assert "verdict passed" not in result.stdout.str()
    verdict = read_json(pytester.path / "r.json")["data"]["verdict"]
    assert verdict["passed"] is False and verdict["errors"] == 5


def test_exitfirst_stop_is_not_a_finished_run(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=pipeline(
        """
        if case.qid == 2:
            raise ConnectionError("backend down")
        """
    ))
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "-x",
        "--ragev-concurrency", "1",
    )
    result.assert_outcomes(passed=1, failed=2)
    task = read_json(pytester.path / "r.json")["data"]["task"]
    assert task["status"] == 3 and (task["finished"], task["total"]) == (2, 5)
    assert task["err_msg"] == (
        "stopped early (stopping after 1 failures) before every question was answered"
    )
    result.stdout.fnmatch_lines(
        ["ragev: verdict FAILED (1 error, stopped early (stopping after 1 failures))"]
    )


def test_ini_twin_with_unrelated_tests_does_not_load_the_dataset(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    (pytester.path / "data" / "qas.parquet").unlink()  # loading it would be a usage error
    pytester.makeini("[pytest]\nragev_config = ragev.toml\n")
    pytester.makepyfile(test_other="def test_ok():\n    assert True\n")
    result = pytester.runpytest("test_other.py")
    assert result.ret == pytest.ExitCode.OK
    # Collecting the config file (here: the whole folder) loads it, and says what is wrong.
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *qas.parquet*"])


def test_an_unrelated_test_with_a_q1_parameter_does_not_load_the_dataset(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # A parameter id that looks like a question ("q1") is not a ragev_case test.
    make_project()
    (pytester.path / "data" / "qas.parquet").unlink()  # loading it would be a usage error
    pytester.makeini("[pytest]\nragev_config = ragev.toml\n")
    pytester.makepyfile(
        test_other="import pytest\n\n@pytest.mark.parametrize('x', ['q1'])\n"
        "def test_ok(x):\n    assert x\n"
    )
    result = pytester.runpytest("test_other.py")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK


def test_ini_twin_with_hand_written_tests_loads_and_validates_after_collection(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[thresholds]\nrecall = 0.5\n")
    pytester.makeini("[pytest]\nragev_config = ragev.toml\n")
    pytester.makepyfile(
        test_rag=textwrap.dedent(
            """
            def test_rag(ragev_case, ragev_answer, ragev_record):
                ragev_record(retrieved=ragev_answer.retrieved, text=ragev_answer.text)
            """
        )
    )
    result = pytester.runpytest("test_rag.py")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*recall*1.000*5*0.500*ok", "ragev: verdict passed"])
    config = pytester.path / "ragev.toml"
    config.write_text(config.read_text().replace("recall", "recal"))
    result = pytester.runpytest("test_rag.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *'recal' is not a metric; did you mean 'recall'?*"])
    # Nothing ran. (Not "test_rag" alone: "pytest_ragev" contains it, and pytest may
    # name the plugin in a warning.)
    assert "test_rag.py" not in result.stdout.str() and " passed" not in result.stdout.str()
