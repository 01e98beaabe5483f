"""Tests of the dataset loader: assembly, accepted variations, stats, fingerprint, Corpus."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_ragev.core.types import QAPair
from pytest_ragev.dataset import (
    DATASET_FILES,
    Corpus,
    Dataset,
    DatasetStats,
    load_dataset,
    write_dataset,
)

QUERIES = {3: "What is the capital of France?", 1: "火星有几颗卫星？", 2: "Who wrote Hamlet?"}
CORPUS = {
    10: "Paris is the capital and largest city of France.",
    11: "火星有两颗天然卫星：火卫一和火卫二。",
    12: "Hamlet is a tragedy written by William Shakespeare.",
    13: "Lyon is a large city in France, known for its food.",
    14: "A distractor passage about volcanoes.",
}
ANSWERS = {100: "Paris.", 101: "两颗。", 102: "William Shakespeare."}
QRELS = [(3, 10), (3, 13), (1, 11), (2, 12)]
QAS = [(3, 100), (1, 101), (2, 102)]


def _write_basic(folder: Path, **overrides: Any) -> Path:
    parts: dict[str, Any] = {
        "queries": QUERIES,
        "corpus": CORPUS,
        "answers": ANSWERS,
        "qrels": QRELS,
        "qas": QAS,
    }
    parts.update(overrides)
    return write_dataset(folder, **parts)


def _pandas_metadata(table: pa.Table) -> dict[bytes, bytes]:
    """Schema metadata shaped like what ``DataFrame.to_parquet`` writes."""
    columns = [
        {
            "name": name,
            "field_name": name,
            "pandas_type": "unicode" if pa.types.is_string(field.type) else "int64",
            "numpy_type": "object" if pa.types.is_string(field.type) else "int64",
            "metadata": None,
        }
        for name, field in zip(table.column_names, table.schema, strict=True)
    ]
    meta = {
        "index_columns": [],
        "column_indexes": [],
        "columns": columns,
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.2",
    }
    return {b"pandas": json.dumps(meta).encode()}


def _as_pandas_file(path: Path, columns: dict[str, list[Any]]) -> None:
    table = pa.table(columns)
    pq.write_table(table.replace_schema_metadata(_pandas_metadata(table)), path)


# --- assembly --------------------------------------------------------------------------------


def test_pairs_are_assembled_in_qid_order_with_sorted_relevant_passages(tmp_path: Path) -> None:
    ds = load_dataset(_write_basic(tmp_path / "basic"))
    assert isinstance(ds, Dataset)
    assert [pair.qid for pair in ds.pairs] == [1, 2, 3]
    assert ds.pair(3) == QAPair(
        qid=3,
        question="What is the capital of France?",
        pids=(10, 13),
        passages=(CORPUS[10], CORPUS[13]),
        aid=100,
        answer="Paris.",
        grades=(1.0, 1.0),
    )
    assert ds.pair(1).passages == ("火星有两颗天然卫星：火卫一和火卫二。",)
    assert ds.dataset_id == "basic"
    assert ds.path == tmp_path / "basic"
    assert ds.warnings == ()
    assert len(ds) == 3 and list(ds) == list(ds.pairs)


def test_dataset_id_can_be_given(tmp_path: Path) -> None:
    ds = load_dataset(str(_write_basic(tmp_path / "folder")), dataset_id="nightly")
    assert ds.dataset_id == "nightly"


def test_original_style_files_load(tmp_path: Path) -> None:
    """String ids, a score column, pandas metadata and an index column, as the seed writes."""
    folder = tmp_path / "seedlike"
    folder.mkdir()
    _as_pandas_file(folder / "queries.parquet", {"id": ["1", "2"], "text": ["q one", "q two"]})
    _as_pandas_file(
        folder / "corpus.parquet",
        {"id": ["1", "2", "3"], "text": ["p1", "p2", "p3"], "__index_level_0__": [0, 1, 2]},
    )
    _as_pandas_file(folder / "answers.parquet", {"id": [1, 2], "text": ["a1", "a2"]})
    _as_pandas_file(
        folder / "qrels.parquet", {"qid": ["1", "1", "2"], "pid": ["2", "3", "1"], "score": [1, 1, 1]}
    )
    _as_pandas_file(folder / "qas.parquet", {"qid": ["1", "2"], "aid": [1, 2]})
    ds = load_dataset(folder)
    assert ds.pair(1).pids == (2, 3)
    assert ds.pair(1).passages == ("p2", "p3")
    assert ds.pair(2).answer == "a2"
    # The same content written as plain int64 files has the same fingerprint.
    plain = write_dataset(
        tmp_path / "plain",
        queries={1: "q one", 2: "q two"},
        corpus={1: "p1", 2: "p2", 3: "p3"},
        answers={1: "a1", 2: "a2"},
        qrels=[(1, 2, 1), (1, 3, 1), (2, 1, 1)],
        qas={1: 1, 2: 2},
    )
    assert load_dataset(plain).fingerprint == ds.fingerprint


def test_string_ids_with_whitespace_and_sign_are_integers(tmp_path: Path) -> None:
    folder = _write_basic(tmp_path / "d")
    pq.write_table(
        pa.table({"id": [" 3", "+1", "2 "], "text": list(QUERIES.values())}),
        folder / "queries.parquet",
    )
    assert [pair.qid for pair in load_dataset(folder).pairs] == [1, 2, 3]


@pytest.mark.parametrize("id_type", [pa.int8(), pa.int16(), pa.int32(), pa.uint16(), pa.uint64()])
def test_any_integer_width_is_accepted(tmp_path: Path, id_type: pa.DataType) -> None:
    folder = _write_basic(tmp_path / "d")
    reference = load_dataset(folder)
    for name, columns in (("qrels.parquet", ("qid", "pid")), ("qas.parquet", ("qid", "aid"))):
        table = pq.read_table(folder / name)
        for column in columns:
            index = table.column_names.index(column)
            table = table.set_column(index, column, table.column(column).cast(id_type))
        pq.write_table(table, folder / name)
    reloaded = load_dataset(folder)
    assert reloaded.pairs == reference.pairs
    assert reloaded.fingerprint == reference.fingerprint


def test_extra_columns_are_ignored(tmp_path: Path) -> None:
    folder = _write_basic(tmp_path / "d")
    reference = load_dataset(folder)
    table = pq.read_table(folder / "corpus.parquet")
    table = table.append_column("title", pa.array(["t"] * table.num_rows))
    table = table.append_column("vector", pa.array([[0.1, 0.2]] * table.num_rows))
    pq.write_table(table, folder / "corpus.parquet")
    assert load_dataset(folder).fingerprint == reference.fingerprint


def test_dictionary_and_large_string_texts_are_accepted(tmp_path: Path) -> None:
    folder = _write_basic(tmp_path / "d")
    reference = load_dataset(folder)
    corpus = pq.read_table(folder / "corpus.parquet")
    pq.write_table(
        pa.table({"id": corpus.column("id"), "text": corpus.column("text").cast(pa.large_string())}),
        folder / "corpus.parquet",
    )
    queries = pq.read_table(folder / "queries.parquet")
    pq.write_table(
        pa.table({"id": queries.column("id"), "text": queries.column("text").dictionary_encode()}),
        folder / "queries.parquet",
    )
    reloaded = load_dataset(folder)
    assert reloaded.pairs == reference.pairs
    assert reloaded.fingerprint == reference.fingerprint


def test_score_column_is_graded_relevance(tmp_path: Path) -> None:
    folder = _write_basic(
        tmp_path / "graded",
        qrels=[(3, 13, 1), (3, 10, 3), (3, 14, 0), (1, 11, 2.5), (2, 12, -1), (2, 10, 1)],
    )
    ds = load_dataset(folder)
    assert ds.pair(3).pids == (10, 13)
    assert ds.pair(3).grades == (3.0, 1.0)
    assert ds.pair(1).grades == (2.5,)
    # score <= 0 is "judged not relevant", not an error.
    assert ds.pair(2).pids == (10,)
    assert ds.stats.unreferenced_passages == 2  # 12 (score -1) and 14 (score 0)


def test_questions_without_qrels_or_answer_are_counted_and_warned(tmp_path: Path) -> None:
    folder = _write_basic(
        tmp_path / "gaps",
        queries={**QUERIES, 4: "An unjudged question", 5: "Another one"},
        qrels=[*QRELS, (5, 14, 0)],
        qas=[(3, 100), (5, 101)],
    )
    ds = load_dataset(folder)
    assert [pair.qid for pair in ds.pairs] == [1, 2, 3, 4, 5]
    assert not ds.pair(4).has_qrels and not ds.pair(5).has_qrels
    assert ds.pair(4).aid is None and ds.pair(4).answer is None and not ds.pair(4).has_answer
    assert ds.stats.questions_without_qrels == 2
    assert ds.stats.questions_without_answer == 3
    assert ds.warnings == (
        "2 questions without qrels (first: qid 4): excluded from retrieval means",
        "3 questions without a reference answer (first: qid 1): excluded from generation means",
    )


def test_answers_qrels_and_qas_may_be_empty(tmp_path: Path) -> None:
    ds = load_dataset(write_dataset(tmp_path / "bare", queries={1: "q"}, corpus={1: "p"}))
    assert ds.pairs == (QAPair(1, "q", (), (), None, None, ()),)
    assert ds.stats.answer_coverage == 0.0
    assert ds.stats.unreferenced_passages == 1
    assert len(ds.warnings) == 2


def test_empty_answers_table_written_without_types_is_accepted(tmp_path: Path) -> None:
    # pandas writes an empty DataFrame(columns=[...]) with null-typed columns.
    folder = _write_basic(tmp_path / "d")
    pq.write_table(
        pa.table({"id": pa.array([], pa.null()), "text": pa.array([], pa.null())}),
        folder / "answers.parquet",
    )
    pq.write_table(
        pa.table({"qid": pa.array([], pa.null()), "aid": pa.array([], pa.null())}),
        folder / "qas.parquet",
    )
    ds = load_dataset(folder)
    assert ds.stats.answers == 0 and ds.stats.questions_without_answer == 3


# --- stats -----------------------------------------------------------------------------------


def test_stats_values_json_and_lines(tmp_path: Path) -> None:
    folder = _write_basic(tmp_path / "s", queries={**QUERIES, 4: "unanswered"}, qas=QAS)
    ds = load_dataset(folder)
    stats = ds.stats
    assert isinstance(stats, DatasetStats)
    assert (stats.questions, stats.passages, stats.answers) == (4, 5, 3)
    assert stats.avg_relevant_passages == pytest.approx(4 / 4)
    assert stats.answer_coverage == pytest.approx(75.0)
    assert stats.unreferenced_passages == 1
    payload = stats.to_json()
    assert list(payload) == [
        "questions",
        "passages",
        "answers",
        "avg_relevant_passages",
        "answer_coverage",
        "questions_without_qrels",
        "questions_without_answer",
        "unreferenced_passages",
        "fingerprint",
    ]
    assert payload["answer_coverage"] == 75.0
    assert payload["fingerprint"] == ds.fingerprint
    json.dumps(payload)  # JSON-safe
    lines = stats.lines()
    assert "answer coverage: 75.0% (3/4)" in lines
    assert "avg relevant passages per question: 1.00" in lines
    assert "passages referenced by no question: 1" in lines
    assert f"fingerprint: {ds.fingerprint}" in lines


# --- fingerprint -----------------------------------------------------------------------------


def _resave(folder: Path, target: Path, **write_options: Any) -> Path:
    """Copy a dataset, shuffling rows and replacing metadata, with other Parquet options."""
    target.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for name in DATASET_FILES:
        table = pq.read_table(folder / name)
        table = table.take(rng.permutation(table.num_rows))
        table = table.replace_schema_metadata({b"written-by": b"another tool"})
        pq.write_table(table, target / name, **write_options)
    return target


@pytest.mark.parametrize(
    "options",
    [
        {"compression": "gzip"},
        {"compression": "none", "row_group_size": 1},
        {"compression": "snappy", "use_dictionary": False, "data_page_size": 64},
    ],
)
def test_fingerprint_is_stable_across_resaves(tmp_path: Path, options: dict[str, Any]) -> None:
    folder = _write_basic(tmp_path / "orig")
    resaved = _resave(folder, tmp_path / "resaved", **options)
    original = load_dataset(folder)
    assert load_dataset(resaved).fingerprint == original.fingerprint
    assert len(original.fingerprint) == 64 and int(original.fingerprint, 16) >= 0


def test_fingerprint_ignores_non_relevant_qrels_and_is_deterministic(tmp_path: Path) -> None:
    a = load_dataset(_write_basic(tmp_path / "a"))
    b = load_dataset(_write_basic(tmp_path / "b", qrels=[*QRELS, (1, 14, 0)]))
    assert a.fingerprint == b.fingerprint
    assert load_dataset(tmp_path / "a").fingerprint == a.fingerprint


@pytest.mark.parametrize(
    "change",
    [
        {"corpus": {**CORPUS, 14: "A distractor passage about volcanoes!"}},
        {"queries": {**QUERIES, 2: "Who wrote Macbeth?"}},
        {"answers": {**ANSWERS, 100: "Paris, France."}},
        {"corpus": {**CORPUS, 15: "One more passage."}},
        {"qrels": [*QRELS, (2, 14)]},
        {"qrels": [(3, 10, 2), (3, 13, 1), (1, 11, 1), (2, 12, 1)]},
        {"qas": [(3, 100), (1, 102), (2, 101)]},
        # Moving text between rows keeps the bytes but must change the fingerprint.
        {"corpus": {**CORPUS, 13: CORPUS[14], 14: CORPUS[13]}},
    ],
)
def test_fingerprint_changes_with_content(tmp_path: Path, change: dict[str, Any]) -> None:
    assert (
        load_dataset(_write_basic(tmp_path / "a")).fingerprint
        != load_dataset(_write_basic(tmp_path / "b", **change)).fingerprint
    )


def test_corpus_fingerprint_covers_the_passages_only(tmp_path: Path) -> None:
    """The built-in KB is keyed on it: question edits keep it, passage edits change it."""
    base = load_dataset(_write_basic(tmp_path / "a"))
    fingerprint = base.corpus.fingerprint
    assert fingerprint is not None and len(fingerprint) == 64
    assert fingerprint != base.fingerprint
    same_corpus = [
        {"queries": {**QUERIES, 2: "Who wrote Macbeth?"}},
        {"answers": {**ANSWERS, 100: "Paris, France."}},
        {"qrels": [*QRELS, (2, 14)]},
    ]
    for index, change in enumerate(same_corpus):
        other = load_dataset(_write_basic(tmp_path / f"same{index}", **change))
        assert other.fingerprint != base.fingerprint
        assert other.corpus.fingerprint == fingerprint, change
    edited = {**CORPUS, 14: "A distractor passage about volcanoes!"}
    assert load_dataset(_write_basic(tmp_path / "edit", corpus=edited)).corpus.fingerprint != (
        fingerprint
    )
    assert load_dataset(_resave(tmp_path / "a", tmp_path / "resaved")).corpus.fingerprint == (
        fingerprint
    )
    assert base.limit(1).corpus.fingerprint == fingerprint


def test_fingerprint_of_sliced_and_chunked_text_columns(tmp_path: Path) -> None:
    """Hashing reads Arrow buffers directly: row offsets into shared buffers must be honoured."""
    folder = tmp_path / "chunked"
    texts = pa.chunked_array([["x" * 5, "yy", "zzz"], ["wwww", "v"]])
    whole = pa.table({"id": pa.array([1, 2, 3, 4, 5], pa.int64()), "text": texts})
    write_dataset(folder, queries={1: "q"}, corpus=whole.slice(1, 4), qrels=[(1, 2)])
    reference = write_dataset(
        tmp_path / "plain", queries={1: "q"}, corpus={2: "yy", 3: "zzz", 4: "wwww", 5: "v"},
        qrels=[(1, 2)],
    )
    assert load_dataset(folder).fingerprint == load_dataset(reference).fingerprint


# --- Corpus, pair, limit -----------------------------------------------------------------------


def test_corpus_is_a_mapping_in_id_order(tmp_path: Path) -> None:
    shuffled = dict(reversed(list(CORPUS.items())))
    corpus = load_dataset(_write_basic(tmp_path / "d", corpus=shuffled)).corpus
    assert isinstance(corpus, Corpus) and isinstance(corpus, Mapping)
    assert list(corpus) == sorted(CORPUS)
    assert len(corpus) == 5
    assert corpus[11] == CORPUS[11]
    assert dict(corpus) == CORPUS
    assert corpus == CORPUS
    assert 12 in corpus and 99 not in corpus and "12" not in corpus and True not in corpus
    with pytest.raises(KeyError):
        corpus[9]
    with pytest.raises(KeyError):
        corpus[99]
    assert corpus.ids.dtype == np.int64 and corpus.ids.tolist() == sorted(CORPUS)
    assert not corpus.ids.flags.writeable
    assert corpus.texts == [CORPUS[pid] for pid in sorted(CORPUS)]
    assert corpus.texts is corpus.texts  # cached
    assert corpus[12] == CORPUS[12]  # served from the cached list now
    assert corpus.arrow_texts.to_pylist() == corpus.texts
    assert list(corpus.items()) == sorted(CORPUS.items())
    assert list(corpus.values()) == [CORPUS[pid] for pid in sorted(CORPUS)]
    assert (11, CORPUS[11]) in corpus.items() and (11, "other") not in corpus.items()
    assert len(corpus.items()) == 5 and CORPUS[12] in corpus.values()
    assert repr(corpus) == "Corpus(5 passages)"


def test_shuffled_corpus_serves_lookups_and_arrow_texts_in_id_order(tmp_path: Path) -> None:
    shuffled = dict(reversed(list(CORPUS.items())))
    corpus = load_dataset(_write_basic(tmp_path / "d", corpus=shuffled)).corpus
    assert [corpus[pid] for pid in corpus] == [CORPUS[pid] for pid in sorted(CORPUS)]
    assert corpus.arrow_texts.to_pylist() == [CORPUS[pid] for pid in sorted(CORPUS)]
    assert corpus[13] == CORPUS[13]  # after the lazy reorder
    assert corpus.texts == corpus.arrow_texts.to_pylist()


def test_fingerprint_hashed_in_blocks_matches_sorted_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_ragev.dataset import _fingerprint as _dataset_fingerprint

    monkeypatch.setattr(_dataset_fingerprint, "_DIGEST_BLOCK_ROWS", 2)  # 5 passages, 3 blocks
    in_order = load_dataset(_write_basic(tmp_path / "a")).fingerprint
    shuffled = dict(reversed(list(CORPUS.items())))
    assert load_dataset(_write_basic(tmp_path / "b", corpus=shuffled)).fingerprint == in_order
    changed = {**shuffled, 12: CORPUS[12] + "!"}
    assert load_dataset(_write_basic(tmp_path / "c", corpus=changed)).fingerprint != in_order


@pytest.mark.parametrize("gaps", [False, True], ids=["consecutive-ids", "ids-with-gaps"])
def test_shuffled_corpus_fed_in_blocks_loads_like_the_sorted_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gaps: bool
) -> None:
    from pytest_ragev.dataset import _fingerprint as _dataset_fingerprint

    # 2 rows per block: passages are picked out of several id-order blocks, some blocks
    # hold none, and one passage serves two questions.
    monkeypatch.setattr(_dataset_fingerprint, "_DIGEST_BLOCK_ROWS", 2)
    corpus = {pid * 7 if gaps else pid: text for pid, text in CORPUS.items()}
    qrels = [(qid, pid * 7 if gaps else pid) for qid, pid in [*QRELS, (1, 12)]]
    in_order = load_dataset(_write_basic(tmp_path / "a", corpus=corpus, qrels=qrels))
    for name, order in (("reversed", [4, 3, 2, 1, 0]), ("mixed", [2, 4, 0, 3, 1])):
        items = list(corpus.items())
        shuffled = load_dataset(
            _write_basic(tmp_path / name, corpus=[items[i] for i in order], qrels=qrels)
        )
        assert shuffled.pairs == in_order.pairs
        assert shuffled.pairs[0].passages == (corpus[11 * 7 if gaps else 11],
                                              corpus[12 * 7 if gaps else 12])
        assert list(shuffled.corpus.items()) == list(in_order.corpus.items())
        assert shuffled.fingerprint == in_order.fingerprint
        assert shuffled.corpus.fingerprint == in_order.corpus.fingerprint


def test_failing_corpus_digest_is_raised_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from pytest_ragev.dataset import _fingerprint as _dataset_fingerprint

    def broken(self: Any, combined: Any, blocks: Any) -> bytes:
        blocks.get()
        raise RuntimeError("hashing failed")

    # One row per block: the feeder has more blocks than the queue holds once the hashing
    # worker has stopped taking them.
    monkeypatch.setattr(_dataset_fingerprint, "_DIGEST_BLOCK_ROWS", 1)
    monkeypatch.setattr(_dataset_fingerprint.IdOrderFeed, "hash_blocks", broken)
    folder = _write_basic(tmp_path / "d", corpus=dict(reversed(list(CORPUS.items()))))
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_dataset(folder)
        except BaseException as exc:  # handed over to the test thread
            outcome.append(exc)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    loader.join(timeout=30)
    assert not loader.is_alive(), "load_dataset hung on a failed corpus digest"
    assert [str(exc) for exc in outcome] == ["hashing failed"]


def test_pair_lookup_and_limit(tmp_path: Path) -> None:
    ds = load_dataset(_write_basic(tmp_path / "d", queries={**QUERIES, 4: "unanswered"}))
    with pytest.raises(KeyError, match="no question with qid 7"):
        ds.pair(7)
    small = ds.limit(2)
    assert [pair.qid for pair in small.pairs] == [1, 2]
    assert small.corpus is ds.corpus
    assert small.stats.questions == 2 and small.stats.passages == 5
    assert small.stats.answers == 2
    assert small.stats.unreferenced_passages == 3
    assert small.fingerprint != ds.fingerprint
    assert small.stats.fingerprint == small.fingerprint
    assert small.warnings == ()
    assert ds.limit(2).fingerprint == small.fingerprint
    assert ds.limit(4) is ds and ds.limit(10) is ds
    gap = ds.limit(4 - 0)
    assert gap.warnings == ds.warnings
    assert ds.limit(0).pairs == ()
    with pytest.raises(ValueError, match=">= 0"):
        ds.limit(-1)


def test_fast_pair_construction_matches_the_dataclass(tmp_path: Path) -> None:
    ds = load_dataset(_write_basic(tmp_path / "d"))
    for pair in ds.pairs:
        rebuilt = QAPair(
            qid=pair.qid,
            question=pair.question,
            pids=pair.pids,
            passages=pair.passages,
            aid=pair.aid,
            answer=pair.answer,
            grades=pair.grades,
        )
        assert pair == rebuilt and hash(pair) == hash(rebuilt) and repr(pair) == repr(rebuilt)
        with pytest.raises(AttributeError):
            pair.qid = 5  # type: ignore[misc]


# --- write_dataset input forms ---------------------------------------------------------------


def test_write_dataset_accepts_tuples_dicts_mappings_and_tables(tmp_path: Path) -> None:
    reference = load_dataset(_write_basic(tmp_path / "ref"))
    folder = write_dataset(
        tmp_path / "forms",
        queries=[(qid, text) for qid, text in QUERIES.items()],
        corpus=[{"id": pid, "text": text} for pid, text in CORPUS.items()],
        answers=pa.table({"id": list(ANSWERS), "text": list(ANSWERS.values())}),
        qrels={3: [10, 13], 1: [11], 2: [12]},
        qas=[{"qid": qid, "aid": aid} for qid, aid in QAS],
    )
    assert load_dataset(folder).fingerprint == reference.fingerprint
    assert sorted(path.name for path in folder.iterdir()) == sorted(DATASET_FILES)
    assert pq.read_schema(folder / "qrels.parquet").names == ["qid", "pid"]
    assert pq.read_schema(folder / "queries.parquet").field("id").type == pa.int64()


def test_write_dataset_score_forms(tmp_path: Path) -> None:
    folder = write_dataset(
        tmp_path / "scores",
        queries={1: "q", 2: "r"},
        corpus={1: "a", 2: "b"},
        qrels={1: {1: 2, 2: 0.5}, 2: [2]},
    )
    schema = pq.read_schema(folder / "qrels.parquet")
    assert schema.field("score").type == pa.float64()
    ds = load_dataset(folder)
    assert ds.pair(1).grades == (2.0, 0.5) and ds.pair(2).grades == (1.0,)
    dicts = write_dataset(
        tmp_path / "dicts",
        queries={1: "q"},
        corpus={1: "a"},
        qrels=[{"qid": 1, "pid": 1, "score": 3}],
    )
    assert pq.read_schema(dicts / "qrels.parquet").field("score").type == pa.int64()
    assert load_dataset(dicts).pair(1).grades == (3.0,)


def test_no_temporary_files_are_left_behind(tmp_path: Path) -> None:
    folder = _write_basic(tmp_path / "d")
    _write_basic(folder)  # overwrite in place
    assert sorted(path.name for path in folder.iterdir()) == sorted(DATASET_FILES)
