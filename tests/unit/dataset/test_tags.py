"""The optional ``tags`` column of queries.parquet: read, checked, counted, hashed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_ragev.dataset import DatasetError, load_dataset, question_hash, write_dataset

CORPUS = {1: "Der Eiffelturm ist 330 Meter hoch.", 2: "长城长两万多公里。",
          3: "Москва — столица России.", 4: "東京は日本の首都です。", 5: "서울은 한국의 수도입니다."}
QUESTIONS = {1: "Wie hoch ist der Eiffelturm?", 2: "长城有多长？", 3: "Какая столица России?",
             4: "日本の首都はどこですか？", 5: "한국의 수도는 어디입니까?"}
QRELS = [(qid, qid) for qid in QUESTIONS]


def _write(folder: Path, tags: pa.Array | None) -> Path:
    write_dataset(folder, queries=QUESTIONS, corpus=CORPUS, qrels=QRELS)
    if tags is not None:
        table = pq.read_table(folder / "queries.parquet")
        pq.write_table(table.append_column("tags", tags), folder / "queries.parquet")
    return folder


def test_a_string_column_is_one_tag_per_question_and_blank_or_null_is_none(
    tmp_path: Path,
) -> None:
    folder = _write(tmp_path / "d", pa.array(["billing", "", None, " setup ", "billing"]))
    ds = load_dataset(folder)
    assert [pair.tags for pair in ds.pairs] == [("billing",), (), (), ("setup",), ("billing",)]
    assert ds.stats.tags == {"billing": 2, "setup": 1}
    assert ds.stats.to_json()["tags"] == {"billing": 2, "setup": 1}
    assert "questions per tag: billing 2, setup 1" in ds.stats.lines()


def test_a_list_column_keeps_each_tag_once_in_order_and_a_dictionary_column_reads(
    tmp_path: Path,
) -> None:
    tags = pa.array([["billing", "setup", "billing"], [], None, ["LANG:JA"], ["lang:ko"]],
                    pa.list_(pa.string()))
    ds = load_dataset(_write(tmp_path / "list", tags))
    assert [pair.tags for pair in ds.pairs] == [("billing", "setup"), (), (), ("lang:ja",),
                                                ("lang:ko",)]
    dictionary = pa.array(["a", "b", "a", "a", "b"]).dictionary_encode()
    ds = load_dataset(_write(tmp_path / "dict", dictionary))
    assert [pair.tags for pair in ds.pairs] == [("a",), ("b",), ("a",), ("a",), ("b",)]


@pytest.mark.parametrize(("tags", "message"), [
    (pa.array([1, 2, 3, 4, 5]), "column 'tags' has type int64; store tags as a string"),
    (pa.array([[1], [], [], [], []], pa.list_(pa.int64())),
     ", a list of int64; store tags as a string or a list of strings"),
    (pa.array([["a", " "], [], [], [], []], pa.list_(pa.string())),
     "column 'tags' row 0 holds a blank tag; remove it from the list"),
    (pa.array(["lang:chinese", "", "", "", ""]),
     "row 0 holds 'lang:chinese', not a language tag; write lang:<ISO 639 code>"),
    (pa.array([["lang:de", "lang:fr"], [], [], [], []], pa.list_(pa.string())),
     "row 0 names two languages (lang:de and lang:fr); keep one language tag"),
])
def test_bad_tags_are_one_line_naming_the_row(
    tmp_path: Path, tags: pa.Array, message: str
) -> None:
    folder = _write(tmp_path / "d", tags)
    with pytest.raises(DatasetError, match=r"queries\.parquet") as caught:
        load_dataset(folder)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_tags_enter_the_fingerprint_and_the_hashes_only_when_present(tmp_path: Path) -> None:
    plain = load_dataset(_write(tmp_path / "plain", None))
    untagged = load_dataset(_write(tmp_path / "untagged", pa.array([None] * 5, pa.string())))
    tagged = load_dataset(_write(tmp_path / "tagged",
                                 pa.array([["a", "b"], [], [], [], []], pa.list_(pa.string()))))
    reordered = load_dataset(_write(tmp_path / "reordered",
                                    pa.array([["b", "a"], [], [], [], []],
                                             pa.list_(pa.string()))))
    # A five-file dataset without the column keeps the fingerprint it always had.
    assert plain.stats.tags is None and plain.fingerprint != tagged.fingerprint
    assert tagged.fingerprint == reordered.fingerprint  # tag order does not matter
    assert untagged.question_hashes == plain.question_hashes
    assert tagged.question_hashes[1] != plain.question_hashes[1]
    assert tagged.question_hashes[2] == plain.question_hashes[2]  # untagged: unchanged
    assert question_hash(tagged.pair(1)) == question_hash(reordered.pair(1))


def test_a_limited_dataset_counts_its_own_tags(tmp_path: Path) -> None:
    tags = pa.array(["billing", "setup", "billing", "setup", "setup"])
    ds = load_dataset(_write(tmp_path / "d", tags)).limit(3)
    assert ds.stats.tags == {"billing": 2, "setup": 1}


def test_shuffled_rows_keep_their_tags(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    write_dataset(folder, queries=[{"id": qid, "text": QUESTIONS[qid], "tags": [f"t{qid}"]}
                                   for qid in (4, 2, 5, 1, 3)],
                  corpus=CORPUS, qrels=QRELS)
    ds = load_dataset(folder)
    assert [pair.tags for pair in ds.pairs] == [(f"t{qid}",) for qid in range(1, 6)]
