"""Writing dataset folders (imported lazily by ``dataset.write_dataset``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from pytest_ragev.core.io import atomic_write_bytes

#: The Parquet codecs :func:`write_table` accepts.
Compression = Literal["gzip", "brotli", "lz4", "zstd", "snappy", "none"]


def write_dataset_folder(
    folder: Path,
    *,
    queries: Any,
    corpus: Any,
    answers: Any,
    qrels: Any,
    qas: Any,
    compression: Compression = "zstd",
) -> Path:
    """Write the five files of a dataset into ``folder`` (created if needed)."""
    tables = {
        "queries.parquet": queries_table(queries),
        "corpus.parquet": text_table(corpus),
        "answers.parquet": text_table(answers),
        "qrels.parquet": qrels_table(qrels),
        "qas.parquet": qas_table(qas),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_table(folder / name, table, compression=compression)
    return folder


def write_table(path: Path, table: pa.Table, *, compression: Compression = "zstd") -> None:
    """Serialise ``table`` to Parquet in memory, then replace ``path`` atomically."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=compression)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def text_table(rows: Any) -> pa.Table:
    """An ``id: int64, text: string`` table from a mapping, tuples, dicts or a table."""
    if isinstance(rows, pa.Table):
        return rows
    ids: list[int] = []
    texts: list[str] = []
    items: Iterable[Any] = rows.items() if isinstance(rows, Mapping) else rows
    for item in items:
        if isinstance(item, Mapping):
            ids.append(item["id"])
            texts.append(item["text"])
        else:
            row_id, text = item
            ids.append(row_id)
            texts.append(text)
    return pa.table({"id": pa.array(ids, pa.int64()), "text": pa.array(texts, pa.string())})


def queries_table(rows: Any) -> pa.Table:
    """An ``id, text [, tags]`` table: as :func:`text_table`, and a ``tags`` column
    (``list<string>``) when some row carries tags: a dict's ``"tags"`` (a string or a
    list of strings) or a third tuple item."""
    if isinstance(rows, pa.Table):
        return rows
    items: list[Any] = list(rows.items() if isinstance(rows, Mapping) else rows)
    tags: list[list[str] | None] = []
    plain: list[tuple[int, str]] = []
    for item in items:
        if isinstance(item, Mapping):
            plain.append((item["id"], item["text"]))
            value = item.get("tags")
        elif len(item) == 3:
            plain.append((item[0], item[1]))
            value = item[2]
        else:
            plain.append((item[0], item[1]))
            value = None
        tags.append([value] if isinstance(value, str) else
                    None if value is None else list(value))
    table = text_table(plain)
    if any(value is not None for value in tags):
        table = table.append_column("tags", pa.array(tags, pa.list_(pa.string())))
    return table


def qrels_table(rows: Any) -> pa.Table:
    """A ``qid, pid [, score]`` table; ``score`` appears only when some row carries one."""
    if isinstance(rows, pa.Table):
        return rows
    qids: list[int] = []
    pids: list[int] = []
    scores: list[float | int | None] = []
    for qid, pid, score in _qrel_rows(rows):
        qids.append(qid)
        pids.append(pid)
        scores.append(score)
    columns: dict[str, pa.Array[Any]] = {
        "qid": pa.array(qids, pa.int64()),
        "pid": pa.array(pids, pa.int64()),
    }
    if any(score is not None for score in scores):
        filled = [1 if score is None else score for score in scores]
        integral = all(isinstance(score, int) for score in filled)
        columns["score"] = pa.array(filled, pa.int64() if integral else pa.float64())
    return pa.table(columns)


def _qrel_rows(rows: Any) -> Iterable[tuple[int, int, float | int | None]]:
    if isinstance(rows, Mapping):
        for qid, relevant in rows.items():
            if isinstance(relevant, Mapping):
                for pid, score in relevant.items():
                    yield qid, pid, score
            else:
                for pid in relevant:
                    yield qid, pid, None
        return
    for item in rows:
        if isinstance(item, Mapping):
            yield item["qid"], item["pid"], item.get("score")
        elif len(item) == 3:
            yield item[0], item[1], item[2]
        else:
            qid, pid = item
            yield qid, pid, None


def qas_table(rows: Any) -> pa.Table:
    """A ``qid: int64, aid: int64`` table from a mapping, tuples, dicts or a table."""
    if isinstance(rows, pa.Table):
        return rows
    qids: list[int] = []
    aids: list[int] = []
    items: Iterable[Any] = rows.items() if isinstance(rows, Mapping) else rows
    for item in items:
        if isinstance(item, Mapping):
            qids.append(item["qid"])
            aids.append(item["aid"])
        else:
            qid, aid = item
            qids.append(qid)
            aids.append(aid)
    return pa.table({"qid": pa.array(qids, pa.int64()), "aid": pa.array(aids, pa.int64())})
