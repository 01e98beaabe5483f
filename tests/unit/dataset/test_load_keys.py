"""Corpus lookups with numpy integer keys, and which id strings the loader reads as integers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_ragev.core.errors import DatasetError
from pytest_ragev.dataset import load_dataset, write_dataset


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_dataset(
        tmp_path / "ds", queries={1: "q"}, corpus={10: "ten", 11: "eleven"}, qrels=[(1, 10)]
    )


def test_numpy_integer_keys_work_like_ints(folder: Path) -> None:
    corpus = load_dataset(folder).corpus
    assert corpus[corpus.ids[0]] == "ten"
    assert corpus[np.int64(11)] == "eleven"
    assert corpus.get(np.int32(10)) == "ten"  # type: ignore[call-overload]
    assert np.int64(10) in corpus and np.uint8(11) in corpus
    assert [corpus[pid] for pid in corpus.ids] == ["ten", "eleven"]
    assert np.int64(12) not in corpus
    with pytest.raises(KeyError):
        corpus[np.int64(12)]


@pytest.mark.parametrize("key", [True, 10.0, np.float64(10.0), "10", None])
def test_non_integer_keys_are_not_passage_ids(folder: Path, key: object) -> None:
    corpus = load_dataset(folder).corpus
    assert key not in corpus
    assert corpus.get(key) is None  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("ids", "expected"),
    [(["10", " +11 ", "-5", "+0"], [-5, 0, 10, 11]), (["007", "\t8\n"], [7, 8])],
)
def test_signed_and_padded_id_strings_are_read(
    folder: Path, ids: list[str], expected: list[int]
) -> None:
    # Question ids may be negative; passage ids may not (test_load_errors.py).
    pq.write_table(pa.table({"id": ids, "text": [f"t{i}" for i in range(len(ids))]}),
                   folder / "queries.parquet")
    pq.write_table(pa.table({"qid": [expected[-1]], "pid": [10]}), folder / "qrels.parquet")
    assert [pair.qid for pair in load_dataset(folder).pairs] == expected


@pytest.mark.parametrize("bad", ["+-13", "-+13", "++13", "--13", "1 3", "+", "-", "1e3", "١٢"])
def test_malformed_id_strings_are_rejected(folder: Path, bad: str) -> None:
    pq.write_table(pa.table({"id": ["10", bad], "text": ["a", "b"]}), folder / "corpus.parquet")
    with pytest.raises(DatasetError) as caught:
        load_dataset(folder)
    assert str(caught.value) == (
        f"{folder / 'corpus.parquet'}: column 'id' row 1 holds {bad!r}, not an integer; "
        "ids must be integers (int64, or strings of digits)"
    )
