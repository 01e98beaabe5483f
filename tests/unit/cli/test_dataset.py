"""The ``ragev`` command: dataset validate/stats/show/sample/convert and group registration."""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_ragev import cli
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.dataset import load_dataset, write_dataset
from tests.unit._cli import run_cli

QUERIES = {i: f"question number {i}?" for i in range(1, 11)}
CORPUS = {100 + i: f"passage {i} text." for i in range(30)}
ANSWERS = {500 + i: f"answer {i}." for i in range(1, 11)}
# Question i is relevant to passages 100+i and 110+i (grade 2 for the second), 120..129 unused.
QRELS = [(i, 100 + i, 1) for i in range(1, 11)] + [(i, 110 + i, 2) for i in range(1, 11)]
QAS = [(i, 500 + i) for i in range(1, 11)]


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    return write_dataset(
        tmp_path / "src", queries=QUERIES, corpus=CORPUS, answers=ANSWERS, qrels=QRELS, qas=QAS
    )


# --- validate / stats / show -------------------------------------------------------------------


def test_validate_ok(capsys: pytest.CaptureFixture[str], dataset_dir: Path) -> None:
    code, out, err = run_cli(capsys, "dataset", "validate", str(dataset_dir))
    assert code == 0 and err == ""
    fingerprint = load_dataset(dataset_dir).fingerprint
    assert out == (
        f"ok: {dataset_dir}: 10 questions, 30 passages, 10 answers; fingerprint {fingerprint}\n"
    )


def test_validate_error_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path
) -> None:
    (dataset_dir / "qas.parquet").unlink()
    code, out, err = run_cli(capsys, "dataset", "validate", str(dataset_dir))
    assert code == 2 and out == ""
    assert err.startswith("ragev: error: ") and err.count("\n") == 1
    assert "qas.parquet is missing" in err and "Traceback" not in err


def test_validate_prints_warnings_but_passes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = write_dataset(tmp_path / "w", queries={1: "q", 2: "r"}, corpus={1: "p"},
                           qrels=[(1, 1)])
    code, out, err = run_cli(capsys, "dataset", "validate", str(folder))
    assert code == 0 and out.startswith("ok: ")
    assert "ragev: warning: 1 question without qrels (first: qid 2)" in err
    assert "ragev: warning: 2 questions without a reference answer" in err


def test_stats_text_and_json(capsys: pytest.CaptureFixture[str], dataset_dir: Path) -> None:
    code, out, _ = run_cli(capsys, "dataset", "stats", str(dataset_dir))
    assert code == 0
    assert "  questions: 10\n" in out
    assert "  avg relevant passages per question: 2.00\n" in out
    assert "  answer coverage: 100.0% (10/10)\n" in out
    assert "  passages referenced by no question: 10\n" in out
    code, out, _ = run_cli(capsys, "dataset", "stats", str(dataset_dir), "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload == {
        "questions": 10,
        "passages": 30,
        "answers": 10,
        "avg_relevant_passages": 2.0,
        "answer_coverage": 100.0,
        "questions_without_qrels": 0,
        "questions_without_answer": 0,
        "unreferenced_passages": 10,
        "fingerprint": load_dataset(dataset_dir).fingerprint,
    }


def test_show(capsys: pytest.CaptureFixture[str], dataset_dir: Path) -> None:
    code, out, _ = run_cli(capsys, "dataset", "show", str(dataset_dir), "-n", "2")
    assert code == 0
    assert out.count("Question (qid=") == 2
    assert "Question (qid=1):\nquestion number 1?\n" in out
    assert "[pid=101] passage 1 text." in out
    assert "[pid=111, grade 2] passage 11 text." in out
    assert "Answer (aid=501):\nanswer 1." in out
    code, out, _ = run_cli(capsys, "dataset", "show", str(dataset_dir), "--qid", "7", "--qid", "3")
    assert code == 0
    assert out.index("qid=7") < out.index("qid=3") and out.count("Question (") == 2


def test_show_unknown_qid(capsys: pytest.CaptureFixture[str], dataset_dir: Path) -> None:
    code, _, err = run_cli(capsys, "dataset", "show", str(dataset_dir), "--qid", "99")
    assert code == 2
    assert "ragev: error: --qid 99:" in err and "ids run from 1 to 10" in err


def test_show_question_without_qrels_or_answer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = write_dataset(tmp_path / "g", queries={1: "lonely"}, corpus={1: "p"})
    code, out, _ = run_cli(capsys, "dataset", "show", str(folder))
    assert code == 0
    assert "Relevant passages: none (no qrels)" in out and "Answer: none" in out


# --- sample ------------------------------------------------------------------------------------


def test_sample_is_deterministic_and_complete(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    outputs = []
    for target, seed in ((a, "3"), (b, "3"), (c, "4")):
        code, out, _ = run_cli(
            capsys, "dataset", "sample", str(dataset_dir), str(target), "--questions", "5",
            "--seed", seed,
        )
        assert code == 0, out
        outputs.append(out)
    assert f"wrote {a}: 5 questions, 10 relevant passages + 2 distractors (seed 3)" in outputs[0]
    first, second, other = load_dataset(a), load_dataset(b), load_dataset(c)
    assert first.fingerprint == second.fingerprint
    assert first.fingerprint != other.fingerprint
    source = load_dataset(dataset_dir)
    assert len(first.pairs) == 5
    for pair in first.pairs:
        assert pair == source.pair(pair.qid)  # passages, grades and answer carried over
    relevant = {pid for pair in first.pairs for pid in pair.pids}
    assert len(relevant) == 10
    distractors = set(first.corpus) - relevant
    assert len(distractors) == 2  # int(0.2 * 10)
    assert distractors <= set(source.corpus)
    assert first.stats.unreferenced_passages == 2


def test_sample_distractor_share_and_errors(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    code, _, _ = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(tmp_path / "x"),
                         "--questions", "10", "--distractors", "0")
    assert code == 0
    assert load_dataset(tmp_path / "x").stats.unreferenced_passages == 0
    code, _, err = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(tmp_path / "x"),
                           "--questions", "2")
    assert code == 2 and "already holds queries.parquet; pass --force" in err
    code, _, _ = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(tmp_path / "x"),
                         "--questions", "2", "--force", "--distractors", "5")
    assert code == 0
    # 4 relevant passages * 5 = 20 wanted, but only 26 others exist: 20 are added.
    assert load_dataset(tmp_path / "x").stats.unreferenced_passages == 20
    code, _, err = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(tmp_path / "y"),
                           "--questions", "11")
    assert code == 2 and "--questions 11 exceeds the 10 questions" in err
    code, _, err = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(dataset_dir),
                           "--questions", "1")
    assert code == 2 and "is the source folder" in err
    code, _, err = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(tmp_path / "z"))
    assert code == 2 and "--questions" in err  # argparse usage error


# --- convert: BEIR -----------------------------------------------------------------------------


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def _beir_from(dataset_dir: Path, target: Path, *, id_prefix: str = "") -> Path:
    """Export a dataset as a BEIR folder (answers as an ``answer`` field of the query)."""
    ds = load_dataset(dataset_dir)
    _write_jsonl(
        target / "corpus.jsonl",
        [{"_id": f"{id_prefix}{pid}", "title": "", "text": text} for pid, text in ds.corpus.items()],
    )
    _write_jsonl(
        target / "queries.jsonl",
        [{"_id": f"{id_prefix}{p.qid}", "text": p.question, "answer": p.answer} for p in ds.pairs]
        + [{"_id": f"{id_prefix}999", "text": "a train-split query"}],
    )
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"{id_prefix}{p.qid}\t{id_prefix}{pid}\t{int(grade)}"
        for p in ds.pairs
        for pid, grade in zip(p.pids, p.grades, strict=True)
    ]
    (target / "qrels").mkdir()
    (target / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    (target / "qrels" / "train.tsv").write_text(f"query-id\tcorpus-id\tscore\n{id_prefix}999\t"
                                                f"{id_prefix}100\t1\n")
    return target


def test_convert_beir_round_trip(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    beir = _beir_from(dataset_dir, tmp_path / "beir")
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                             str(tmp_path / "out"))
    assert code == 0, err
    assert "10 questions, 30 passages, 10 answers, 20 qrels" in out
    source, converted = load_dataset(dataset_dir), load_dataset(tmp_path / "out")
    assert [(p.qid, p.question, p.pids, p.passages, p.grades, p.answer) for p in converted.pairs] \
        == [(p.qid, p.question, p.pids, p.passages, p.grades, p.answer) for p in source.pairs]
    assert dict(converted.corpus) == dict(source.corpus)
    assert not (tmp_path / "out" / "id_map.parquet").exists()
    # The other split holds only the train query.
    code, out, _ = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                           str(tmp_path / "train"), "--split", "train")
    assert code == 0 and "1 questions, 30 passages, 0 answers, 1 qrels" in out


def test_convert_beir_renumbers_string_ids(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    beir = _beir_from(dataset_dir, tmp_path / "beir", id_prefix="doc-")
    corpus_rows = [json.loads(line) for line in (beir / "corpus.jsonl").read_text().splitlines()]
    corpus_rows[0]["title"] = "A Title"
    _write_jsonl(beir / "corpus.jsonl", corpus_rows)
    code, out, _ = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                           str(tmp_path / "out"))
    assert code == 0 and "renumbered ids of queries, corpus (see id_map.parquet)" in out
    converted = load_dataset(tmp_path / "out")
    assert converted.corpus[1] == "A Title\npassage 0 text."
    id_map = pq.read_table(tmp_path / "out" / "id_map.parquet").to_pylist()
    assert {"table": "corpus", "id": 1, "source_id": "doc-100"} in id_map
    assert {"table": "queries", "id": 1, "source_id": "doc-1"} in id_map
    source = load_dataset(dataset_dir)
    assert [p.question for p in converted.pairs] == [p.question for p in source.pairs]
    # Passage 100 (the titled one) is a distractor, so the relevant texts are unchanged.
    assert [p.passages for p in converted.pairs] == [p.passages for p in source.pairs]
    assert [len(p.pids) for p in converted.pairs] == [2] * 10


def test_convert_beir_errors(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    beir = _beir_from(dataset_dir, tmp_path / "beir")
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                           str(tmp_path / "o1"), "--split", "dev")
    assert code == 2 and "dev.tsv does not exist (splits found: test, train)" in err
    with (beir / "qrels" / "test.tsv").open("a") as handle:
        handle.write("1\t777\t1\n")
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                           str(tmp_path / "o2"))
    assert code == 2
    assert "test.tsv line 22: corpus-id '777' is not in corpus.jsonl" in err
    (beir / "corpus.jsonl").write_text('{"_id": "1", "text": "ok"}\n{"_id": 2, "text": \n')
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                           str(tmp_path / "o3"))
    assert code == 2 and "corpus.jsonl line 2: not valid JSON" in err
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                           str(tmp_path / "o4"), "--corpus", "x.jsonl")
    assert code == 2 and "--corpus is for --from jsonl" in err


# --- convert: JSONL ----------------------------------------------------------------------------


def test_convert_jsonl_round_trip(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    source = load_dataset(dataset_dir)
    qa_file = _write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": p.qid, "question": p.question, "answer": p.answer, "passages": list(p.passages)}
            for p in source.pairs
        ],
    )
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(tmp_path / "out"))
    assert code == 0, err
    assert "10 questions, 20 passages, 10 answers, 20 qrels" in out
    converted = load_dataset(tmp_path / "out")
    assert [(p.qid, p.question, set(p.passages), p.answer) for p in converted.pairs] == [
        (p.qid, p.question, set(p.passages), p.answer) for p in source.pairs
    ]


def test_convert_jsonl_with_corpus_and_passage_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    corpus = _write_jsonl(
        tmp_path / "corpus.jsonl",
        [{"id": 7, "text": "Seven."}, {"id": "9", "text": "Nine."}, {"id": 11, "text": "Eleven."}],
    )
    qa_file = _write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"question": "Which is seven?", "answer": "Seven.", "passage_ids": [7]},
            {"question": "Shared text?", "passages": ["Nine.", "A new passage."]},
            {"question": "Both?", "passage_ids": ["9"], "passages": ["A new passage."]},
        ],
    )
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                           str(tmp_path / "out"), "--corpus", str(corpus))
    assert code == 0, err
    assert "2 questions without a reference answer" in err  # the warning of the load check
    ds = load_dataset(tmp_path / "out")
    assert [p.qid for p in ds.pairs] == [1, 2, 3]
    assert ds.pair(1).pids == (7,) and ds.pair(1).answer == "Seven."
    assert ds.pair(2).pids == (9, 12)  # "Nine." reuses the corpus id; the new text gets 12
    assert ds.pair(3).pids == (9, 12)
    assert ds.corpus[11] == "Eleven."  # corpus-file passages stay as distractors
    assert ds.stats.unreferenced_passages == 1


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"question": "q"}', "not json"], "qa.jsonl line 2: not valid JSON"),
        (['["a list"]'], "qa.jsonl line 1: holds a list, not a JSON object"),
        (['{"answer": "a"}'], "qa.jsonl line 1: field 'question' is missing"),
        (['{"question": "q", "passages": "text"}'], "field 'passages' must be a list of strings"),
        (['{"question": "q", "passage_ids": [1]}'], "passage id 1 is not a known passage "
         "(no --corpus file given)"),
        (['{"id": 1, "question": "q"}', '{"question": "r"}'], "line 2: has no 'id' but other"),
        (['{"id": 1, "question": "q"}', '{"id": 1, "question": "r"}'], "line 2: id 1 appears"),
        ([""], "holds no questions"),
    ],
)
def test_convert_jsonl_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: list[str], expected: str
) -> None:
    qa_file = tmp_path / "qa.jsonl"
    qa_file.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                           str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1
    assert expected in err, err


# --- the command framework ---------------------------------------------------------------------


def test_usage_errors_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys)
    assert code == 2 and "usage: ragev" in err
    code, _, err = run_cli(capsys, "dataset")
    assert code == 2 and "validate" in err and "convert" in err
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and "dataset" in out
    code, _, err = run_cli(capsys, "nosuchgroup")
    assert code == 2 and "invalid choice" in err


def test_register_group(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[argparse.Namespace] = []

    def hello(args: argparse.Namespace) -> int:
        seen.append(args)
        if args.fail:
            raise ConfigError("bad [report] key 'x'; remove it")
        return 5

    def configure(commands: cli.CommandAdder) -> None:
        parser = commands.add("hello", help="say hello", handler=hello)
        parser.add_argument("--fail", action="store_true")

    cli.register_group("demo", help="a demo group", configure=configure)
    try:
        code, _, _ = run_cli(capsys, "demo", "hello")
        assert code == 5 and seen and not seen[0].fail
        code, _, err = run_cli(capsys, "demo", "hello", "--fail")
        assert code == 2 and err == "ragev: error: bad [report] key 'x'; remove it\n"
        code, out, _ = run_cli(capsys, "--help")
        assert "demo" in out and "a demo group" in out
    finally:
        cli._GROUPS.pop("demo")


def test_register_group_by_module_name(capsys: pytest.CaptureFixture[str]) -> None:
    cli.register_group(
        "lazy", help="lazily imported", configure="pytest_ragev.cli.dataset:configure"
    )
    try:
        code, _, err = run_cli(capsys, "lazy", "validate", "/does/not/exist")
        assert code == 2 and "does not exist" in err
    finally:
        cli._GROUPS.pop("lazy")


def test_module_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest_ragev.cli", "dataset", "stats", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("ragev: error: dataset folder ")
    assert "Traceback" not in result.stderr


# --- faults: one line each, non-zero exit, nothing half-written --------------------------------


def _only_error(code: int, out: str, err: str, *expected: str) -> None:
    assert code == 2, err
    assert err.startswith("ragev: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "wrote" not in out
    for part in expected:
        assert part in err, err


def _no_staging_left(folder: Path) -> None:
    assert [path.name for path in folder.iterdir() if path.name.endswith(".tmp")] == []


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """``folder`` made read-only for this process, even as root (then: immutable)."""
    os.chmod(folder, 0o555)
    immutable = False
    if _writable(folder) and shutil.which("chattr"):
        immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True,
                                   check=False).returncode == 0
    try:
        if _writable(folder):
            pytest.skip("cannot make a read-only folder here (root without chattr)")
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=False)
        os.chmod(folder, 0o755)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """An empty folder this process cannot create anything in."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    with read_only(folder):
        yield folder


def _writable(folder: Path) -> bool:
    probe = folder / ".probe"
    try:
        probe.mkdir()
    except OSError:
        return False
    probe.rmdir()
    return True


def test_validate_invalid_utf8_is_one_line(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path
) -> None:
    texts = [text.encode() for text in QUERIES.values()]
    texts[4] = "Frage über Straßen?".encode("cp1252")
    pq.write_table(pa.table({"id": list(QUERIES), "text": pa.array(texts, pa.binary())
                             .view(pa.string())}), dataset_dir / "queries.parquet")
    _only_error(*run_cli(capsys, "dataset", "validate", str(dataset_dir)),
                "queries.parquet: column 'text' row 4 (byte 0xfc at byte 6) is not valid UTF-8")


def test_sample_negative_seed_is_one_line_before_loading(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(out_dir),
                             "--questions", "2", "--seed", "-1")
    _only_error(code, out, err, "--seed must be 0 or more, got -1")
    assert not out_dir.exists()
    _no_staging_left(tmp_path)


def test_convert_jsonl_that_is_not_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    qa_file = tmp_path / "qa.jsonl"
    qa_file.write_bytes(
        json.dumps({"question": "Wer schrieb Faust?", "passages": ["Goethe."]}).encode() + b"\n"
        + '{"question": "Qui a écrit Candide ?", "passages": ["Voltaire."]}\n'.encode("latin-1")
    )
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(out_dir))
    _only_error(code, out, err, f"{qa_file} line 2: not valid UTF-8 (byte 0xe9 at column 21)")
    assert not out_dir.exists()
    _no_staging_left(tmp_path)


def test_convert_beir_qrels_that_are_not_utf8(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    beir = _beir_from(dataset_dir, tmp_path / "beir")
    (beir / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\n1\t100\t1\n\xff\n")
    _only_error(*run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                         str(tmp_path / "out")), "qrels/test.tsv line 3: not valid UTF-8")


def test_convert_reads_a_byte_order_mark(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    qa_file = tmp_path / "qa.jsonl"
    qa_file.write_bytes(b"\xef\xbb\xbf" + json.dumps(
        {"question": "谁写了《红楼梦》？", "passages": ["曹雪芹写了《红楼梦》。"]},
        ensure_ascii=False).encode() + b"\r\n")
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                           str(tmp_path / "out"))
    assert code == 0, err
    assert load_dataset(tmp_path / "out").pairs[0].question == "谁写了《红楼梦》？"


@pytest.mark.parametrize("line", ["[" * 100_000 + "]" * 100_000,
                                  '{"question": "q", "meta": ' + "{\"a\": " * 100_000 + "1"
                                  + "}" * 100_000 + "}"])
def test_convert_jsonl_nested_100k_deep(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str
) -> None:
    qa_file = tmp_path / "deep.jsonl"
    qa_file.write_text('{"question": "q", "passages": ["p"]}\n' + line + "\n", encoding="utf-8")
    _only_error(*run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                         str(tmp_path / "out")), f"{qa_file} line 2: nested too deeply to read")
    assert not (tmp_path / "out").exists()


def test_destination_in_a_read_only_folder(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, read_only_dir: Path
) -> None:
    for argv in (["sample", str(dataset_dir), str(read_only_dir / "out"), "--questions", "2"],
                 ["sample", str(dataset_dir), str(read_only_dir / "a" / "b"), "--questions", "2"]):
        code, out, err = run_cli(capsys, "dataset", *argv)
        err = "\n".join(line for line in err.splitlines(keepends=True)
                        if not line.startswith("ragev: warning:"))
        _only_error(code, out, err, f"creating a folder in {read_only_dir} failed",
                    "choose a destination in a folder you can write to")
        assert list(read_only_dir.iterdir()) == []


def test_destination_under_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qa_file = tmp_path / "qa.jsonl"
    qa_file.write_text('{"question": "Как дела?", "passages": ["Хорошо."]}\n', encoding="utf-8")
    _only_error(*run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                         str(qa_file / "out")), f"{qa_file} is a file, not a folder")


def test_read_only_destination_keeps_its_files(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path
) -> None:
    out_dir = write_dataset(tmp_path / "out", queries={1: "alt"}, corpus={1: "alt"},
                            qrels=[(1, 1)])
    before = {path.name: path.read_bytes() for path in out_dir.iterdir()}
    with read_only(out_dir):
        code, out, err = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(out_dir),
                                 "--questions", "2", "--force")
    err = "".join(line for line in err.splitlines(keepends=True)
                  if not line.startswith("ragev: warning:"))
    _only_error(code, out, err, f"cannot write {out_dir} (", "nothing was written")
    assert {path.name: path.read_bytes() for path in out_dir.iterdir()} == before
    _no_staging_left(tmp_path)


def test_a_rename_failing_part_way_puts_the_old_files_back(
    capsys: pytest.CaptureFixture[str], dataset_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Renames into one folder fail together in practice; if one ever fails late, the
    files already replaced are restored (fault injected: the third rename fails)."""
    out_dir = write_dataset(tmp_path / "out", queries={1: "alt"}, corpus={1: "alt"},
                            qrels=[(1, 1)])
    before = {path.name: path.read_bytes() for path in out_dir.iterdir()}
    real_replace = os.replace
    calls: list[str] = []

    def flaky(source: Any, target: Any) -> None:
        calls.append(str(target))
        if len(calls) == 3:
            raise OSError(errno.EIO, "Input/output error")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", flaky)
    code, out, err = run_cli(capsys, "dataset", "sample", str(dataset_dir), str(out_dir),
                             "--questions", "2", "--force")
    monkeypatch.undo()
    err = "".join(line for line in err.splitlines(keepends=True)
                  if not line.startswith("ragev: warning:"))
    _only_error(code, out, err, f"cannot write {out_dir} (Input/output error)")
    assert {path.name: path.read_bytes() for path in out_dir.iterdir()} == before
    _no_staging_left(tmp_path)
