"""Every unusable dataset raises ``DatasetError`` with one line: file, column, row/value, fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_ragev.core.errors import DatasetError, RagevError
from pytest_ragev.dataset import load_dataset, write_dataset

QUERIES = {1: "first question", 2: "second question", 3: "third question"}
CORPUS = {10: "passage ten", 11: "passage eleven", 12: "passage twelve"}
ANSWERS = {100: "answer one", 101: "answer two", 102: "answer three"}
QRELS = [(1, 10), (2, 11), (3, 12)]
QAS = [(1, 100), (2, 101), (3, 102)]


def _folder(tmp_path: Path, **overrides: Any) -> Path:
    parts: dict[str, Any] = {
        "queries": QUERIES,
        "corpus": CORPUS,
        "answers": ANSWERS,
        "qrels": QRELS,
        "qas": QAS,
    }
    parts.update(overrides)
    return write_dataset(tmp_path / "ds", **parts)


def _error(folder: Path) -> str:
    with pytest.raises(DatasetError) as caught:
        load_dataset(folder)
    message = str(caught.value)
    assert "\n" not in message, message
    assert isinstance(caught.value, RagevError)
    return message


def _put(folder: Path, name: str, columns: dict[str, Any]) -> None:
    pq.write_table(pa.table(columns), folder / name)


def test_missing_folder(tmp_path: Path) -> None:
    message = _error(tmp_path / "nowhere")
    assert "nowhere" in message and "does not exist" in message
    assert "queries.parquet" in message  # says what belongs there


def test_path_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file.parquet"
    target.write_bytes(b"x")
    message = _error(target)
    assert "is a file, not a folder" in message


@pytest.mark.parametrize(
    "name", ["queries.parquet", "corpus.parquet", "answers.parquet", "qrels.parquet", "qas.parquet"]
)
def test_missing_file(tmp_path: Path, name: str) -> None:
    folder = _folder(tmp_path)
    (folder / name).unlink()
    message = _error(folder)
    assert f"{folder / name} is missing" in message
    assert "write an empty table" in message


def test_not_a_parquet_file(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "corpus.parquet").write_text("id,text\n1,hello\n")
    message = _error(folder)
    assert "corpus.parquet is not a readable Parquet file" in message
    assert "re-write it as Parquet" in message


@pytest.mark.parametrize(
    ("name", "columns", "missing"),
    [
        ("queries.parquet", {"qid": [1], "text": ["q"]}, "id"),
        ("corpus.parquet", {"id": [10], "passage": ["p"]}, "text"),
        ("qrels.parquet", {"qid": [1], "doc": [10]}, "pid"),
        ("qas.parquet", {"query": [1], "aid": [100]}, "qid"),
    ],
)
def test_missing_column(tmp_path: Path, name: str, columns: dict[str, Any], missing: str) -> None:
    folder = _folder(tmp_path)
    _put(folder, name, columns)
    message = _error(folder)
    assert f"{name} has no column '{missing}'" in message
    assert "(columns: " + ", ".join(columns) + ")" in message
    assert "the file needs columns" in message


def test_string_id_that_is_not_an_integer(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    _put(folder, "corpus.parquet", {"id": ["10", "11", "p-12"], "text": ["a", "b", "c"]})
    message = _error(folder)
    assert "corpus.parquet: column 'id' row 2 holds 'p-12', not an integer" in message
    assert "strings of digits" in message


def test_string_id_beyond_int64(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    _put(folder, "queries.parquet", {"id": ["1", "2", "99999999999999999999"], "text": ["a"] * 3})
    message = _error(folder)
    assert "queries.parquet: column 'id' row 2 holds '99999999999999999999'" in message
    assert "does not fit in int64" in message


def test_uint64_id_beyond_int64(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    _put(
        folder,
        "qas.parquet",
        {"qid": [1, 2], "aid": pa.array([100, 2**63 + 5], pa.uint64())},
    )
    message = _error(folder)
    assert f"qas.parquet: column 'aid' row 1 holds {2**63 + 5}" in message


@pytest.mark.parametrize(
    ("name", "columns", "column", "kind"),
    [
        ("queries.parquet", {"id": [1.0, 2.0, 3.0], "text": ["a", "b", "c"]}, "id", "double"),
        ("qrels.parquet", {"qid": [1], "pid": [True]}, "pid", "bool"),
        ("corpus.parquet", {"id": [10, 11, 12], "text": [1, 2, 3]}, "text", "int64"),
        ("qrels.parquet", {"qid": [1], "pid": [10], "score": ["high"]}, "score", "string"),
    ],
)
def test_wrong_type(
    tmp_path: Path, name: str, columns: dict[str, Any], column: str, kind: str
) -> None:
    folder = _folder(tmp_path)
    _put(folder, name, columns)
    message = _error(folder)
    assert f"{name}: column '{column}' has type {kind}" in message
    assert "store" in message


@pytest.mark.parametrize(
    ("name", "columns", "column", "row"),
    [
        ("corpus.parquet", {"id": pa.array([10, None, 12], pa.int64()), "text": ["a"] * 3}, "id", 1),
        ("queries.parquet", {"id": [1, 2, 3], "text": ["a", "b", None]}, "text", 2),
        ("qrels.parquet", {"qid": [1, 2], "pid": [10, 11], "score": [1, None]}, "score", 1),
    ],
)
def test_nulls(tmp_path: Path, name: str, columns: dict[str, Any], column: str, row: int) -> None:
    folder = _folder(tmp_path)
    _put(folder, name, columns)
    message = _error(folder)
    assert f"{name}: column '{column}' row {row} is null" in message


def test_score_not_finite(tmp_path: Path) -> None:
    folder = _folder(tmp_path, qrels=[(1, 10, 1.0), (2, 11, float("nan"))])
    message = _error(folder)
    assert "qrels.parquet: column 'score' row 1 holds nan" in message


@pytest.mark.parametrize(
    ("part", "rows", "name"),
    [
        ("queries", [(1, "a"), (2, "b"), (1, "c")], "queries.parquet"),
        ("corpus", [(10, "a"), (11, "b"), (12, "c"), (11, "d")], "corpus.parquet"),
        # n ids spanning exactly n values, one repeated: caught although most are offsets
        ("corpus", [(10, "a"), (13, "b"), (11, "c"), (11, "d")], "corpus.parquet"),
        ("answers", [(100, "a"), (100, "b")], "answers.parquet"),
    ],
)
def test_duplicate_ids(tmp_path: Path, part: str, rows: list[tuple[int, str]], name: str) -> None:
    folder = _folder(tmp_path, **{part: rows})
    message = _error(folder)
    duplicate = next(row_id for row_id, _ in rows if [r for r, _ in rows].count(row_id) > 1)
    first, second = [index for index, (row_id, _) in enumerate(rows) if row_id == duplicate]
    assert f"{name}: column 'id' holds {duplicate} twice (rows {first} and {second})" in message
    assert "give every row its own id" in message


def test_duplicate_qrels_pair(tmp_path: Path) -> None:
    folder = _folder(tmp_path, qrels=[(1, 10), (2, 11), (1, 10, 2)])
    message = _error(folder)
    assert "qrels.parquet: columns 'qid','pid' hold the pair (1, 10) twice (rows 0 and 2)" in message
    assert "keep one row per pair" in message


def test_two_answers_for_one_question(tmp_path: Path) -> None:
    folder = _folder(tmp_path, qas=[(1, 100), (2, 101), (1, 102)])
    message = _error(folder)
    assert "qas.parquet: column 'qid' holds 1 twice (rows 0 and 2)" in message
    assert "keep one answer row per question" in message


@pytest.mark.parametrize(
    ("part", "rows", "expected"),
    [
        ("qrels", [(1, 10), (7, 11)], "qrels.parquet: column 'qid' row 1 refers to question 7, "
         "which queries.parquet does not contain"),
        ("qrels", [(1, 10), (2, 11), (3, 99)], "qrels.parquet: column 'pid' row 2 refers to "
         "passage 99, which corpus.parquet does not contain"),
        ("qas", [(1, 100), (8, 101)], "qas.parquet: column 'qid' row 1 refers to question 8"),
        ("qas", [(1, 555)], "qas.parquet: column 'aid' row 0 refers to answer 555, which "
         "answers.parquet does not contain"),
    ],
)
def test_unknown_references(tmp_path: Path, part: str, rows: list[Any], expected: str) -> None:
    message = _error(_folder(tmp_path, **{part: rows}))
    assert expected in message
    assert "fix the id or add the" in message


def test_qas_pointing_into_empty_answers(tmp_path: Path) -> None:
    message = _error(_folder(tmp_path, answers=[], qas=[(1, 100)]))
    assert "refers to answer 100, which answers.parquet does not contain" in message


@pytest.mark.parametrize(("part", "noun"), [("queries", "question"), ("corpus", "passage")])
def test_empty_queries_or_corpus(tmp_path: Path, part: str, noun: str) -> None:
    message = _error(_folder(tmp_path, **{part: [], "qrels": [], "qas": []}))
    assert f"{part}.parquet has no rows; a dataset needs at least one {noun}" in message


# --- negative passage ids (they would collide with the placeholders of unmatched chunks) ------


@pytest.mark.parametrize("ids", [[10, -3, 11], ["10", " -3 ", "11"]])
def test_negative_passage_id(tmp_path: Path, ids: list[Any]) -> None:
    folder = _folder(tmp_path)
    _put(folder, "corpus.parquet", {"id": ids, "text": ["zehn", "minus drei", "elf"]})
    _put(folder, "qrels.parquet", {"qid": [1], "pid": [10]})
    assert _error(folder) == (
        f"{folder / 'corpus.parquet'}: column 'id' row 1 holds -3, a negative passage id; "
        "passage ids must be 0 or more (negative ids mark retrieved chunks that match no "
        "passage): renumber the passages, e.g. add the same offset to every id in "
        "corpus.parquet and every pid in qrels.parquet"
    )


def test_zero_and_negative_question_ids_stay_valid(tmp_path: Path) -> None:
    folder = _folder(tmp_path, queries={-2: "минус два?", 0: "ноль?"}, corpus={0: "null"},
                     qrels=[(-2, 0)], answers={}, qas=[])
    dataset = load_dataset(folder)
    assert [pair.qid for pair in dataset.pairs] == [-2, 0] and dataset.pairs[0].pids == (0,)


# --- invalid UTF-8 -------------------------------------------------------------------------------


def _bytes_as_text(values: list[bytes], large: bool = False) -> pa.Array:
    """Bytes stored as a Parquet string column without a UTF-8 check (what broken writers do)."""
    if large:
        return pa.array(values, pa.large_binary()).view(pa.large_string())
    return pa.array(values, pa.binary()).view(pa.string())


BAD = "한국어 텍스트".encode("euc-kr")  # Korean in the legacy encoding: not UTF-8


@pytest.mark.parametrize("name", ["queries.parquet", "corpus.parquet", "answers.parquet"])
@pytest.mark.parametrize("shuffled", [False, True], ids=["id-order", "shuffled"])
@pytest.mark.parametrize("large", [False, True], ids=["string", "large_string"])
def test_text_that_is_not_utf8(tmp_path: Path, name: str, shuffled: bool, large: bool) -> None:
    folder = _folder(tmp_path)
    rows = {"queries.parquet": QUERIES, "corpus.parquet": CORPUS,
            "answers.parquet": ANSWERS}[name]
    ids = sorted(rows, reverse=shuffled)
    texts = [rows[i].encode() for i in ids]
    texts[1] = b"ok " + BAD
    _put(folder, name, {"id": ids, "text": _bytes_as_text(texts, large)})
    assert _error(folder) == (
        f"{folder / name}: column 'text' row 1 (byte 0xc7 at byte 3) is not valid UTF-8; "
        "Parquet texts must be UTF-8: decode the source with its real encoding (e.g. latin-1, "
        "cp1252, gbk) and re-write the file"
    )


def test_first_bad_row_of_a_big_shuffled_corpus(tmp_path: Path) -> None:
    """Several id-order blocks; the error names the first bad row in file order."""
    count = 70_000
    ids = list(range(count, 0, -1))
    texts = [f"Absatz {i}".encode() for i in ids]
    texts[50_000] = BAD
    texts[60_000] = BAD
    folder = _folder(tmp_path, corpus={i: "x" for i in range(1, 4)},
                     qrels=[(1, 1), (2, 2), (3, 3)])
    _put(folder, "corpus.parquet", {"id": ids, "text": _bytes_as_text(texts)})
    assert "column 'text' row 50000 (byte 0xc7 at byte 0) is not valid UTF-8" in _error(folder)


def test_string_id_that_is_not_utf8(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    _put(folder, "qas.parquet", {"qid": _bytes_as_text([b"1", b"2", b"3\xff"]), "aid": [100, 101, 102]})
    assert _error(folder).startswith(
        f"{folder / 'qas.parquet'}: column 'qid' row 2 (byte 0xff at byte 1) is not valid UTF-8"
    )


# --- a table that is not a regular file ------------------------------------------------------


def test_table_that_is_a_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "queries.parquet").unlink()
    (folder / "queries.parquet").mkdir()
    pq.write_table(pa.table({"id": [1], "text": ["q"]}), folder / "queries.parquet" / "part-0.parquet")
    message = _error(folder)
    assert message.startswith(f"{folder / 'queries.parquet'} is a folder, not a Parquet file; ")
    assert "missing" not in message


def test_table_that_is_a_fifo(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "answers.parquet").unlink()
    os.mkfifo(folder / "answers.parquet")  # reading it would block forever
    assert _error(folder) == (
        f"{folder / 'answers.parquet'} is not a regular file; write the table as a Parquet file "
        "there"
    )
