"""End to end: answers out of a run (``--ragev-answers-out``) and back in
(``[pipeline] name = "replay"``), and an answers file made by pyarrow alone.

A replay of a run's own export scores every question as the run did (the same
per-question values and means); a file an external engine writes with only
``qid``, ``retrieved_texts`` and ``answer`` is scored, its texts placed on passages as
any pipeline's; a question the file lacks fails naming it; extra or duplicate rows are a
one-line usage error before any question runs.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests._data import FACTS, write_questions
from tests._pytester import SERIAL_AND_XDIST, read_json, run_ragev

#: Chunks that name their passage, bare texts placed by their text, bare ids, a
#: distractor; an empty answer; meta with nested values.
CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer, Chunk

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        gold = case.pids[0]
        distractor = 100_000 + case.qid % 10
        sloppy = settings.options.get("sloppy", False) and case.qid % 3 == 0
        if case.qid % 4 == 0:
            retrieved = [kb_text(kb, distractor, case), gold]
        elif case.qid % 4 == 1:
            retrieved = [Chunk(f"chunk of {case.qid}", gold), distractor]
        elif case.qid % 4 == 2:
            retrieved = [gold, distractor]
        else:
            retrieved = []
        text = "" if case.qid % 7 == 0 else ("不知道。" if sloppy else case.answer or "")
        return Answer(retrieved=retrieved, text=text,
                      meta={"model": "本地", "tokens": {"in": case.qid, "out": 3}})

    def kb_text(kb, pid, case):
        return f"Distractor {pid - 100_000}: 无关的段落 {pid - 100_000}."
    """
)

CONFIG = """\
[dataset]
path = "questions"
id = "answers"

[pipeline]
name = "{name}"
{knobs}
[[variants]]
name = "sloppy"
pipeline = {{ {variant} }}
"""


def write_config(path: Path, name: str, knobs: str = "", variant: str = "") -> None:
    path.write_text(CONFIG.format(name=name, knobs=knobs, variant=variant), encoding="utf-8")


def scores(report: dict[str, Any]) -> dict[str, Any]:
    """What a run scored: per question and mean, for the base configuration and each
    variant (not the settings, which name the pipeline)."""
    data = report["data"]
    return {
        "metric": data["metric"], "samples": data["samples"], "usage": data.get("usage"),
        "variants": {name: (run["metric"], run["samples"])
                     for name, run in data.get("variants", {}).items()},
    }


@pytest.mark.parametrize("dist", SERIAL_AND_XDIST)
def test_replaying_an_export_gives_the_run_again(
    pytester: pytest.Pytester, dist: list[str]
) -> None:
    write_questions(pytester.path / "questions", 40)
    pytester.makeconftest(CONFTEST)
    write_config(pytester.path / "ragev.toml", "hooks", variant="sloppy = true")
    original = run_ragev(pytester, "--ragev-report", "original.json",
                         "--ragev-answers-out", "out/answers.parquet", *dist)
    assert original.ret == pytest.ExitCode.OK, original.stdout.str()

    table = pq.read_table(pytester.path / "out" / "answers.parquet")
    assert table.column_names == ["qid", "variant", "retrieved_ids", "retrieved_texts",
                                  "answer", "meta"]
    assert str(table.schema.field("retrieved_ids").type) == "list<element: int64>"
    rows = {(row["variant"], row["qid"]): row for row in table.to_pylist()}
    assert len(rows) == 80
    assert rows[(None, 5)]["retrieved_ids"] == [5, 100_005]
    assert rows[(None, 5)]["retrieved_texts"] == ["chunk of 5", None]
    assert rows[(None, 4)]["retrieved_ids"] == [None, 4]
    assert rows[(None, 4)]["retrieved_texts"] == ["Distractor 4: 无关的段落 4.", None]
    assert rows[(None, 3)]["retrieved_ids"] == [] and rows[(None, 7)]["answer"] == ""
    assert json.loads(rows[("sloppy", 6)]["meta"]) == {"model": "本地",
                                                       "tokens": {"in": 6, "out": 3}}
    assert rows[("sloppy", 6)]["answer"] == "不知道。"

    # Without the project's hooks: the answers come from the file alone.
    pytester.makeconftest("")
    write_config(pytester.path / "ragev.toml", "replay", 'answers = "out/answers.parquet"')
    replayed = run_ragev(pytester, "--ragev-report", "replayed.json", *dist)
    assert replayed.ret == pytest.ExitCode.OK, replayed.stdout.str()
    assert scores(read_json(pytester.path / "replayed.json")) == \
        scores(read_json(pytester.path / "original.json"))
    params = read_json(pytester.path / "replayed.json")["data"]["params"]["pipeline"]
    assert params["answers"] == "out/answers.parquet" and len(params["answers_sha256"]) == 64


def test_a_file_written_by_pyarrow_alone_is_scored(pytester: pytest.Pytester) -> None:
    write_questions(pytester.path / "questions", 12)
    # What an external engine writes: the texts it retrieved and its answer, no ids,
    # no variant, no meta. Odd questions retrieve their gold passage's text.
    qids = list(range(1, 13))
    texts = [[FACTS[q % 6].format(q=q, n=q * 37 % 1000)] if q % 2 else
             ["Distractor 1: 无关的段落 1."] for q in qids]
    answers = [FACTS[q % 6].format(q=q, n=q * 37 % 1000) for q in qids]
    pq.write_table(pa.table({"qid": qids, "retrieved_texts": texts, "answer": answers}),
                   pytester.path / "engine.parquet")
    write_config(pytester.path / "ragev.toml", "replay", 'answers = "engine.parquet"')
    config = (pytester.path / "ragev.toml").read_text(encoding="utf-8")
    (pytester.path / "ragev.toml").write_text(
        config.split("[[variants]]")[0] + "[thresholds]\nrecall = 0.4\nrougel = 0.99\n",
        encoding="utf-8")
    result = run_ragev(pytester, "--ragev-report", "engine.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    report = read_json(pytester.path / "engine.json")["data"]
    recall = {s["qid"]: s["metrics"]["recall"] for s in report["samples"]}
    assert recall == {q: 1.0 if q % 2 else 0.0 for q in qids}
    assert [s["retrieval_ids"] for s in report["samples"][:2]] == [[1], [100_001]]
    assert report["metric"]["generation_metrics"]["rougel"] == pytest.approx(1.0, abs=1e-6)
    # Gated like any pipeline: a floor it misses fails the run.
    (pytester.path / "ragev.toml").write_text(
        config.split("[[variants]]")[0] + "[thresholds]\nrecall = 0.9\n", encoding="utf-8")
    failed = run_ragev(pytester)
    assert failed.ret == pytest.ExitCode.TESTS_FAILED
    failed.stdout.fnmatch_lines(["*recall 0.500 < threshold 0.900*"])


def test_a_question_the_file_lacks_fails_naming_it(pytester: pytest.Pytester) -> None:
    write_questions(pytester.path / "questions", 6)
    pq.write_table(pa.table({"qid": [1, 2, 4, 6], "retrieved_ids": [[1], [2], [4], [6]],
                             "answer": ["a", "b", "c", "d"]}), pytester.path / "part.parquet")
    write_config(pytester.path / "ragev.toml", "replay", 'answers = "part.parquet"')
    config = (pytester.path / "ragev.toml").read_text(encoding="utf-8")
    (pytester.path / "ragev.toml").write_text(config.split("[[variants]]")[0],
                                              encoding="utf-8")
    result = run_ragev(pytester, "-v")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "q3: pipeline raised MissingAnswer: part.parquet has no row for q3; add its answer to "
        "the file, or deselect the question",
        "q5: pipeline raised MissingAnswer: part.parquet has no row for q5*",
        "ragev: 2 questions raised an error: q3, q5 (MissingAnswer 2)",
    ])


@pytest.mark.parametrize(("table", "message"), [
    ({"qid": [1, 2, 9], "retrieved_ids": [[1], [2], [9]], "answer": ["a", "b", "c"]},
     "ERROR: */ragev.toml: engine.parquet has 1 row(s) for questions or variants the run "
     "does not have (q9); remove them, or point [[]pipeline[]] answers at the file made for this "
     "dataset and config"),
    ({"qid": [1, 2, 2], "retrieved_ids": [[1], [2], [3]], "answer": ["a", "b", "c"]},
     "ERROR: */ragev.toml: [[]pipeline[]] answers = */engine.parquet has two rows for q2; keep "
     "one answer per question and configuration"),
    ({"qid": [1], "variant": ["nope"], "retrieved_ids": [[1]], "answer": ["a"]},
     "ERROR: */ragev.toml: engine.parquet has 1 row(s) for questions or variants the run does "
     "not have (q1 [[]nope[]])*"),
    ({"qid": [1], "retrieved": [[1]], "answer": ["a"]},
     "ERROR: */engine.parquet: unknown column 'retrieved'*"),
    ({"qid": ["1"], "retrieved_ids": [[1]], "answer": ["a"]},
     "ERROR: */engine.parquet: column 'qid' is string, not int64; cast it before writing "
     "the file"),
    ({"qid": [1], "retrieved_ids": [[1]], "answer": ["a"], "meta": ["[1]"]},
     "ERROR: */engine.parquet: the meta of q1 is a JSON list, not an object*"),
])
def test_a_file_that_does_not_fit_is_a_usage_error(
    pytester: pytest.Pytester, table: dict[str, Any], message: str
) -> None:
    write_questions(pytester.path / "questions", 3)
    pq.write_table(pa.table(table), pytester.path / "engine.parquet")
    write_config(pytester.path / "ragev.toml", "replay", 'answers = "engine.parquet"')
    config = (pytester.path / "ragev.toml").read_text(encoding="utf-8")
    (pytester.path / "ragev.toml").write_text(config.split("[[variants]]")[0],
                                              encoding="utf-8")
    result = run_ragev(pytester, "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([message])
    assert len([line for line in result.stderr.lines if line.strip()]) == 1, \
        result.stderr.lines
    assert not (pytester.path / "r.json").exists()
