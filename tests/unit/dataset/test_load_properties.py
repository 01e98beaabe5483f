"""Hypothesis property tests: the loader against a plain-Python oracle on generated tables."""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragev.core.types import QAPair
from pytest_ragev.dataset import load_dataset

TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), min_codepoint=32, max_codepoint=0x9FFF),
    max_size=24,
)
IDS = st.integers(min_value=-(2**40), max_value=2**40)
#: Passage ids are 0 or more (negative ids mark unmatched chunks in the metrics).
PASSAGE_IDS = st.integers(min_value=0, max_value=2**40)


@dataclass(frozen=True)
class Content:
    """Dataset content independent of how it is stored."""

    queries: dict[int, str]
    corpus: dict[int, str]
    answers: dict[int, str]
    qrels: dict[tuple[int, int], int]  # (qid, pid) -> score
    qas: dict[int, int]  # qid -> aid
    has_score: bool


@st.composite
def contents(draw: st.DrawFn) -> Content:
    queries = draw(st.dictionaries(IDS, TEXT, min_size=1, max_size=8))
    corpus = draw(st.dictionaries(PASSAGE_IDS, TEXT, min_size=1, max_size=10))
    answers = draw(st.dictionaries(IDS, TEXT, max_size=6))
    has_score = draw(st.booleans())
    scores = st.sampled_from([-1, 0, 1, 2, 3]) if has_score else st.just(1)
    pairs = [(qid, pid) for qid in queries for pid in corpus]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=12)) if pairs else []
    qrels = {pair: draw(scores) for pair in chosen}
    qas: dict[int, int] = {}
    if answers:
        qas = draw(
            st.dictionaries(st.sampled_from(sorted(queries)), st.sampled_from(sorted(answers)))
        )
    return Content(queries, corpus, answers, qrels, qas, has_score)


@dataclass(frozen=True)
class Storage:
    """How a content is written: id representation, row order, Parquet options."""

    ids_as_strings: bool
    shuffle_seed: int
    compression: str
    row_group_size: int


storages = st.builds(
    Storage,
    ids_as_strings=st.booleans(),
    shuffle_seed=st.integers(0, 2**16),
    compression=st.sampled_from(["zstd", "gzip", "none", "snappy"]),
    row_group_size=st.sampled_from([1, 3, 1000]),
)


def _write(folder: Path, content: Content, storage: Storage) -> Path:
    folder.mkdir(parents=True)
    rng = random.Random(storage.shuffle_seed)

    def ids(values: list[int]) -> pa.Array:
        if storage.ids_as_strings:
            return pa.array([str(value) for value in values], pa.string())
        return pa.array(values, pa.int64())

    def put(name: str, rows: list[tuple[Any, ...]], columns: tuple[str, ...]) -> None:
        rows = rows[:]
        rng.shuffle(rows)
        data: dict[str, pa.Array] = {}
        for index, column in enumerate(columns):
            values = [row[index] for row in rows]
            if column in {"id", "qid", "pid", "aid"}:
                data[column] = ids(values)
            elif column == "score":
                data[column] = pa.array(values, pa.int64())
            else:
                data[column] = pa.array(values, pa.string())
        pq.write_table(
            pa.table(data),
            folder / name,
            compression=storage.compression,
            row_group_size=storage.row_group_size,
        )

    put("queries.parquet", list(content.queries.items()), ("id", "text"))
    put("corpus.parquet", list(content.corpus.items()), ("id", "text"))
    put("answers.parquet", list(content.answers.items()), ("id", "text"))
    qrel_rows = [(qid, pid, score) for (qid, pid), score in content.qrels.items()]
    if content.has_score:
        put("qrels.parquet", qrel_rows, ("qid", "pid", "score"))
    else:
        put("qrels.parquet", [row[:2] for row in qrel_rows], ("qid", "pid"))
    put("qas.parquet", list(content.qas.items()), ("qid", "aid"))
    return folder


def _oracle(content: Content) -> tuple[QAPair, ...]:
    pairs = []
    for qid in sorted(content.queries):
        relevant = sorted(
            (pid, score) for (q, pid), score in content.qrels.items() if q == qid and score > 0
        )
        aid = content.qas.get(qid)
        pairs.append(
            QAPair(
                qid=qid,
                question=content.queries[qid],
                pids=tuple(pid for pid, _ in relevant),
                passages=tuple(content.corpus[pid] for pid, _ in relevant),
                aid=aid,
                answer=None if aid is None else content.answers[aid],
                grades=tuple(float(score) for _, score in relevant),
            )
        )
    return tuple(pairs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=contents(), storage=storages)
def test_loader_matches_the_oracle(content: Content, storage: Storage) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ds = load_dataset(_write(Path(tmp) / "ds", content, storage))
    expected = _oracle(content)
    assert ds.pairs == expected
    assert dict(ds.corpus) == content.corpus
    assert list(ds.corpus) == sorted(content.corpus)
    stats = ds.stats
    assert stats.questions == len(content.queries)
    assert stats.passages == len(content.corpus)
    assert stats.answers == len(content.answers)
    assert stats.questions_without_qrels == sum(1 for pair in expected if not pair.pids)
    assert stats.questions_without_answer == sum(1 for pair in expected if pair.aid is None)
    referenced = {pid for pair in expected for pid in pair.pids}
    assert stats.unreferenced_passages == len(content.corpus) - len(referenced)
    assert stats.avg_relevant_passages == sum(len(p.pids) for p in expected) / len(expected)
    assert len(ds.warnings) == (stats.questions_without_qrels > 0) + (
        stats.questions_without_answer > 0
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=contents(), first=storages, second=storages)
def test_fingerprint_depends_on_content_not_storage(
    content: Content, first: Storage, second: Storage
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a = load_dataset(_write(Path(tmp) / "a", content, first))
        b = load_dataset(_write(Path(tmp) / "b", content, second))
    assert a.fingerprint == b.fingerprint


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=contents(), storage=storages, data=st.data())
def test_fingerprint_changes_when_a_text_changes(
    content: Content, storage: Storage, data: st.DataObject
) -> None:
    pid = data.draw(st.sampled_from(sorted(content.corpus)))
    changed_text = data.draw(TEXT.filter(lambda text: text != content.corpus[pid]))
    changed = Content(
        content.queries,
        {**content.corpus, pid: changed_text},
        content.answers,
        content.qrels,
        content.qas,
        content.has_score,
    )
    with tempfile.TemporaryDirectory() as tmp:
        a = load_dataset(_write(Path(tmp) / "a", content, storage))
        b = load_dataset(_write(Path(tmp) / "b", changed, storage))
    assert a.fingerprint != b.fingerprint
