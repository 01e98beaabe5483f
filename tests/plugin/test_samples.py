"""End to end: ``--ragev-samples FILE``, one JSON line per question as the run goes.

Each line is the question's sample as the final JSON report writes it (scored with the
run's own profile, tokenizer and custom metrics) plus its ``variant``; ``ragev serve``
reads these lines for the running mean of its tasks. Under pytest-xdist the controller
writes them: ``test_run.py::test_xdist_parity_with_serial`` compares them with a serial
run's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset

Project = Callable[..., Path]

#: Answers each question with its reference (wrongly for qid 3) and puts in the answer's
#: meta how many lines the samples file held when the question was asked.
COUNTING = textwrap.dedent(
    """
    import os
    import pytest
    from pytest_ragev import Answer, CustomMetric

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        path = os.environ["SAMPLES_FILE"]
        with open(path, encoding="utf-8") as handle:
            seen = sum(1 for line in handle if line.endswith("\\n"))
        if case.qid == 4 and settings.variant == "wider":
            raise TimeoutError("the model did not answer")
        text = "Das weiß ich nicht." if case.qid == 3 else case.answer
        return Answer(retrieved=list(case.pids), text=text, meta={"lines_before": seen})

    @pytest.hookimpl
    def pytest_ragev_metrics():
        return [CustomMetric("answer_chars", lambda m: float(len(m.generated_text)),
                             direction="lower", bounds=(0.0, None))]
    """
)

#: Questions in Chinese, German, Russian and Japanese, one passage and answer each.
FACTS = {
    1: ("长城有多长？", "长城全长超过两万公里。", "长城全长超过两万公里。"),
    2: ("Wann wurde der Kölner Dom fertiggestellt?", "Der Kölner Dom wurde 1880 fertiggestellt.",
        "Der Kölner Dom wurde 1880 fertiggestellt."),
    3: ("Какая самая длинная река в Европе?", "Волга — самая длинная река в Европе.",
        "Самая длинная река в Европе — Волга."),
    4: ("富士山の高さは？", "富士山の高さは3776メートルです。", "富士山は3776メートルです。"),
}


def write_project(pytester: pytest.Pytester, extra: str = "") -> None:
    write_dataset(
        pytester.path / "data",
        queries={qid: fact[0] for qid, fact in FACTS.items()},
        corpus={qid: fact[1] for qid, fact in FACTS.items()},
        answers={10 + qid: fact[2] for qid, fact in FACTS.items()},
        qrels=[(qid, qid) for qid in FACTS], qas=[(qid, 10 + qid) for qid in FACTS],
    )
    (pytester.path / "ragev.toml").write_text(
        '[dataset]\npath = "data"\nid = "multi"\n\n[pipeline]\nname = "counting"\n\n'
        '[run]\nconcurrency = 1\n\n[[variants]]\nname = "wider"\npipeline.k = 2\n'
        + textwrap.dedent(extra),
        encoding="utf-8",
    )
    pytester.makeconftest(COUNTING)


def lines_of(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def final_samples(report: Path) -> dict[tuple[str | None, int], dict[str, Any]]:
    """The final report's samples by (variant, qid)."""
    data = json.loads(report.read_text(encoding="utf-8"))["data"]
    found = {(None, s["qid"]): s for s in data["samples"]}
    for name, block in (data.get("variants") or {}).items():
        found.update({(name, s["qid"]): s for s in block["samples"]})
    return found


def test_one_line_per_question_as_the_run_goes_equal_to_the_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_project(pytester)
    monkeypatch.setenv("SAMPLES_FILE", str(pytester.path / "samples.jsonl"))
    (pytester.path / "samples.jsonl").write_text("a line of an earlier run\n", encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-samples", "samples.jsonl")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # q4 of the variant raised
    lines = lines_of(pytester.path / "samples.jsonl")
    assert len(lines) == 8  # 4 questions x (base, wider); the earlier run's line is gone
    # Each question saw the lines of every question answered before it: each line is
    # written when its question ends (the one that raised has no meta).
    assert sorted(line["meta"]["lines_before"] for line in lines if "meta" in line) == list(
        range(7))
    final = final_samples(pytester.path / "r.json")
    assert len(final) == 8
    for line in lines:
        variant = line.pop("variant")
        assert variant in (None, "wider")
        sample = final[(variant, line["qid"])]
        # The report's own sample, key for key (the variant's names its variant).
        assert line == {k: v for k, v in sample.items() if k != "variant"}
        assert sample.get("variant") == variant
    by_key = {(line["variant"], line["qid"]): line
              for line in lines_of(pytester.path / "samples.jsonl")}
    assert by_key[(None, 1)]["metrics"]["rougel"] == pytest.approx(1.0)
    assert by_key[(None, 3)]["metrics"]["rougel"] == pytest.approx(0.0)
    assert by_key[(None, 3)]["metrics"]["answer_chars"] == len("Das weiß ich nicht.")
    failed = by_key[("wider", 4)]
    assert failed["error"].startswith("TimeoutError: the model did not answer")
    assert failed["metrics"] == {}


def test_the_runs_tokenizer_scores_the_lines(pytester: pytest.Pytester,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # One token for any text: every answer matches its reference word for word.
    write_project(pytester, '\n[metrics]\ntokenizer = "onetoken:cut"\n')
    (pytester.path / "onetoken.py").write_text(
        "def cut(text):\n    return [['x']] if text.strip() else []\n", encoding="utf-8")
    monkeypatch.setenv("SAMPLES_FILE", str(pytester.path / "s.jsonl"))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-samples", "s.jsonl", "--ragev-variant", "base")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    lines = {line["qid"]: line for line in lines_of(pytester.path / "s.jsonl")}
    # The wrong German answer to the Russian question scores 1.0 with this tokenizer
    # (0.0 with the default one): the lines use the run's tokenizer.
    assert lines[3]["metrics"]["rouge1"] == pytest.approx(1.0)
    final = final_samples(pytester.path / "r.json")
    assert all(line["metrics"] == final[(None, qid)]["metrics"] for qid, line in lines.items())


def test_japanese_tokenizer(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fugashi")
    pytest.importorskip("unidic_lite")
    write_project(pytester, '\n[metrics]\ntokenizer = "ja"\n')
    monkeypatch.setenv("SAMPLES_FILE", str(pytester.path / "s.jsonl"))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-samples", "s.jsonl", "--ragev-variant", "base")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    final = final_samples(pytester.path / "r.json")
    for line in lines_of(pytester.path / "s.jsonl"):
        assert line["metrics"] == final[(None, line["qid"])]["metrics"]


def test_a_stream_is_written_through(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--ragev-config", "ragev.toml", "-q",
         "--ragev-samples", "/dev/stdout", "-p", "no:cacheprovider"],
        cwd=pytester.path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    lines = [json.loads(line[line.index("{"):]) for line in done.stdout.splitlines()
             if '"qid"' in line]
    assert sorted(line["qid"] for line in lines) == [1, 2, 3, 4, 5]
    assert all(line["variant"] is None and "recall" in line["metrics"] for line in lines)
    assert "ragev: verdict passed" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("target", ["data", "ragev.toml/s.jsonl"])
def test_an_unwritable_path_is_a_usage_error_before_any_question(
    pytester: pytest.Pytester, make_project: Project, target: str,
) -> None:
    make_project()  # "data" is the dataset's folder, ragev.toml a file
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-samples", target)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --ragev-samples: cannot write *{target}: *; "
                                 "choose a path in a writable folder"])
    assert "Traceback" not in result.stderr.str()
    result.stdout.no_fnmatch_line("*passed*")


def test_the_option_is_in_the_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--ragev-samples=FILE*"])
