"""End to end: bad datasets, baselines and answers are one line each, never a wrong result.

Each case was found by a fault campaign: before the fix, a negative passage id let a junk
chunk score recall 1.0, invalid UTF-8 crashed pytest with INTERNALERROR, a hand-edited
NaN silently took a question out of the gate, a baseline nested 100k levels deep crashed
the run, and ``retrieved="Paris"`` was scored as five one-character chunks.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_ragev.dataset import write_dataset

Project = Callable[..., Path]
BASELINE = '[baseline]\npath = "ragev-baseline.json"\n'

JUNK_RETRIEVER = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        # A chunk found in no passage: the metrics give it the placeholder id -1.
        return Answer(retrieved=["Zufälliger Text, der in keinem Absatz steht."],
                      text=case.answer or "")
    """
)


def assert_one_error_line(result: pytest.RunResult, *parts: str) -> str:
    """The run stopped with a usage error: one ``ragev: error:`` line, no traceback."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    lines = [line for line in output.splitlines() if "ragev: error:" in line or "ERROR: " in line]
    assert len(lines) == 1, lines
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def assert_gate_not_compared(result: pytest.RunResult, *parts: str) -> str:
    """The baseline could not be used: exit 4, its reason in one line, no traceback."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    lines = [line for line in output.splitlines() if line.startswith("ragev: gate not compared:")]
    assert len(lines) == 1, lines
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def test_a_negative_passage_id_is_refused_not_matched_by_junk(
    pytester: pytest.Pytester, mini_data: dict[str, Any]
) -> None:
    """Passage -1 relevant, a chunk that matches nothing: that chunk used to "find" it."""
    corpus = {**mini_data["corpus"], -1: "Der Eiffelturm wurde 1889 fertiggestellt."}
    write_dataset(pytester.path / "data", **dict(mini_data, corpus=corpus,
                                                 qrels=[(1, -1), *mini_data["qrels"]]))
    (pytester.path / "ragev.toml").write_text(
        '[dataset]\npath = "data"\n\n[pipeline]\nname = "junk"\n\n[thresholds]\nrecall = 0.5\n',
        encoding="utf-8",
    )
    pytester.makeconftest(JUNK_RETRIEVER)
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert_one_error_line(
        result, "corpus.parquet: column 'id' row 7 holds -1, a negative passage id",
        "renumber the passages",
    )


@pytest.mark.parametrize("table", ["queries", "corpus", "answers"])
def test_invalid_utf8_in_a_text_column_names_file_column_and_row(
    pytester: pytest.Pytester, make_project: Project, mini_data: dict[str, Any], table: str
) -> None:
    make_project()
    rows = dict(mini_data[table])
    ids = sorted(rows)
    texts = [rows[i].encode("utf-8") for i in ids]
    texts[2] = "Größe: ".encode("latin-1") + texts[2]  # 0xf6 is not UTF-8 on its own
    pq.write_table(
        pa.table({"id": ids, "text": pa.array(texts, pa.binary()).view(pa.string())}),
        pytester.path / "data" / f"{table}.parquet",
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert_one_error_line(
        result, f"{table}.parquet: column 'text' row 2 (byte 0xf6 at byte 2) is not valid UTF-8",
    )


def test_a_table_that_is_a_folder_is_not_called_missing(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    target = pytester.path / "data" / "queries.parquet"
    target.unlink()
    target.mkdir()  # what Spark writes for one "file"
    line = assert_one_error_line(
        pytester.runpytest("--ragev-config", "ragev.toml"),
        "queries.parquet is a folder, not a Parquet file",
    )
    assert "is missing" not in line


def test_retrieved_as_a_string_fails_the_question_with_the_fix(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=textwrap.dedent(
        """
        import pytest
        from pytest_ragev import Answer

        @pytest.hookimpl
        def pytest_ragev_answer(case, kb, settings):
            return Answer(retrieved="Paris", text=case.answer or "")
        """
    ), pipeline='[pipeline]\nname = "stringly"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=6)
    result.stdout.fnmatch_lines(
        ["*Answer.retrieved is the str 'Paris', not a list; wrap it: retrieved=[[]'Paris'[]]*"]
    )
    samples = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]["samples"]
    assert all(row["retrieval_ids"] == [] and "not a list" in row["error"] for row in samples)


@pytest.mark.parametrize(
    ("value", "shown"),
    [("NaN", "NaN"), ("5.0", "5.0")],  # the other values: tests/unit/gate/test_baseline.py
)
def test_a_hand_edited_baseline_value_outside_0_1_is_refused(
    pytester: pytest.Pytester, make_project: Project, value: str, shown: str
) -> None:
    make_project(BASELINE)
    created = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    assert created.ret == pytest.ExitCode.OK
    baseline = pytester.path / "ragev-baseline.json"
    data = json.loads(baseline.read_text(encoding="utf-8"))
    assert data["base"]["questions"][1]["qid"] == 2
    data["base"]["questions"][1]["metrics"]["mrr"] = "MARK"
    edited = json.dumps(data, indent=2).replace('"MARK"', value)
    baseline.write_text(edited, encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert_gate_not_compared(
        result, f"base.questions[1].metrics.mrr (qid 2) is {shown}, not a number in [0, 1]",
    )
    assert baseline.read_text(encoding="utf-8") == edited


def test_a_baseline_nested_100k_levels_deep_is_one_line(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(BASELINE)
    baseline = pytester.path / "ragev-baseline.json"
    deep = "[" * 100_000 + "]" * 100_000
    baseline.write_text(deep, encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "-p", "no:cacheprovider")
    assert_gate_not_compared(result, "ragev-baseline.json nests arrays or objects too deeply")
    assert baseline.read_text(encoding="utf-8") == deep


@pytest.mark.parametrize(
    ("retrieved", "message"),
    [
        ('"Paris"', "ragev_record(retrieved=...) is the str 'Paris', not a list; wrap it: "
                    "retrieved=[[]'Paris'[]]*"),
        ('{"北京": 1, "上海": 2}', "ragev_record(retrieved=...) is a dict, which has no rank order*"),
        ("{1, 2}", "ragev_record(retrieved=...) is a set, which has no rank order*"),
    ],
    ids=["str", "dict", "set"],
)
def test_ragev_record_refuses_retrieved_that_is_not_a_list(
    pytester: pytest.Pytester, make_project: Project, retrieved: str, message: str
) -> None:
    """A hand-written test's ``retrieved="Paris"`` used to become five one-character chunks."""
    make_project()
    pytester.makepyfile(test_manual=textwrap.dedent(
        f"""
        def test_rag(ragev_case, ragev_record):
            ragev_record(retrieved={retrieved}, text=ragev_case.answer or "")
        """
    ))
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "test_manual.py", "--ragev-report", "r.json"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=6)  # five questions and the verdict: five errors
    result.stdout.fnmatch_lines([f"E*TypeError: {message}", "*errors 5*"])
    assert "attribution.py" not in result.stdout.str()  # the failure shows the test's call
    samples = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]["samples"]
    assert len(samples) == 5
    assert all(row["retrieval_ids"] == [] and "ragev_record(retrieved=...) is" in row["error"]
               for row in samples)
