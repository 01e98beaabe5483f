"""Columnar reading and validation of a dataset folder (imported lazily by ``dataset``).

Everything that touches every row of the heavy tables (corpus, qrels) is done with
pyarrow compute kernels or numpy; the only per-row Python loop builds one ``QAPair``
per question, which the public API requires.
"""

from __future__ import annotations

import functools
import gc
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pytest_ragev.core.errors import DatasetError
from pytest_ragev.core.gcpause import paused_gc
from pytest_ragev.core.types import QAPair
from pytest_ragev.dataset._arrow import (
    IntArray,
    TextArray,
    is_utf8,
    one_chunk,
    python_strings,
    take_indices,
)
from pytest_ragev.dataset._fingerprint import (
    IdOrderFeed,
    combine_digests,
    links_digest,
    table_digest,
    tags_digest,
)
from pytest_ragev.dataset._tags import read_tags, tag_counts

_INT64_MAX = np.iinfo(np.int64).max
#: An integer id held in a string (once trimmed): optional sign, ASCII digits. Also the
#: rule of the converters (``convert``), so they keep the ids the loader would read.
INTEGER_ID = r"^[+-]?[0-9]+$"
_TEXT_HINT = "store texts as strings"


@dataclass(frozen=True)
class LoadedDataset:
    """The raw result of :func:`read_dataset_folder`, wrapped by ``dataset.load_dataset``."""

    pairs: tuple[QAPair, ...]
    #: Sorted corpus ids; the texts are in file order, ``corpus_order`` maps the former to
    #: the latter (``None`` when the file was already in id order).
    corpus_ids: IntArray
    corpus_texts: TextArray
    corpus_order: npt.NDArray[np.intp] | None
    answer_count: int
    fingerprint: str
    #: sha256 hex of the corpus part of the fingerprint (passage ids and texts only).
    corpus_fingerprint: str
    #: Relevant qrels rows (``score > 0``) in total.
    relevant_qrels: int
    #: Distinct passages that some question's relevant qrels point at.
    referenced_passages: int
    #: Ascending qids of the questions without relevant qrels resp. without an answer.
    qids_without_qrels: IntArray
    qids_without_answer: IntArray
    #: Questions per tag (``None``: ``queries.parquet`` has no ``tags`` column).
    tag_counts: dict[str, int] | None = None


def reordered(texts: TextArray, order: npt.NDArray[np.intp]) -> TextArray:
    """``texts`` permuted so that row ``i`` is ``texts[order[i]]``."""
    # A full permutation is several times faster on one contiguous array than across
    # the per-row-group chunks (and pyarrow concatenates them for a chunked take anyway).
    combined = one_chunk(texts)
    return pa.chunked_array([combined.take(take_indices(order))])


@dataclass(frozen=True)
class _TextTable:
    """An ``id``/``text`` table: ``ids`` sorted and unique, texts still in file order.

    ``order`` maps sorted position -> file row (``None`` when the file was already sorted),
    so the texts are physically reordered only once, off the main thread.
    """

    ids: IntArray
    file_texts: TextArray
    order: npt.NDArray[np.intp] | None
    #: Each row's tags in id order (``None``: the file has no ``tags`` column).
    tags: list[tuple[str, ...]] | None = None

    def file_rows(self, positions: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """File rows of the given sorted positions."""
        return positions if self.order is None else self.order[positions]

    def sorted_texts(self) -> TextArray:
        """The texts in id order."""
        return self.file_texts if self.order is None else reordered(self.file_texts, self.order)


def read_dataset_folder(folder: Path) -> LoadedDataset:
    """Read, validate and assemble the five files of ``folder``."""
    if not folder.exists():
        raise DatasetError(
            f"dataset folder {folder} does not exist; pass the folder that holds "
            "queries.parquet, corpus.parquet, answers.parquet, qrels.parquet and qas.parquet"
        )
    if not folder.is_dir():
        raise DatasetError(
            f"dataset path {folder} is a file, not a folder; pass the folder that holds "
            "the five Parquet files"
        )
    # Decoding the corpus texts, putting them in id order and hashing them are the biggest
    # single costs, and all release the GIL: a worker thread does them while this thread
    # reads and checks the other files and builds the QAPair objects. The decode is on the
    # critical path (the digest of a shuffled corpus can only start once every text is
    # there), so it starts first; this thread reads the ids meanwhile. Errors keep the
    # order of a serial load: an id error is raised before the texts are looked at, and
    # a corpus text error wins over any error of the files read after it. The one
    # exception is the UTF-8 check of the corpus texts: this thread runs it while the
    # worker hashes them (it would lengthen the worker's critical path), so it comes
    # after the checks of the other files.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragev-corpus") as pool:
        corpus_path = folder / "corpus.parquet"
        text_work = pool.submit(_read_text_column, corpus_path)
        corpus_ids, corpus_order = _read_id_index(corpus_path, allow_empty=False)
        _check_passage_ids(corpus_ids, corpus_path)
        sorted_corpus_ids = corpus_ids if corpus_order is None else corpus_ids[corpus_order]
        sorted_digest_work = None
        if corpus_order is None:
            # Queued right behind the decode: in id order already, the texts are hashed as
            # soon as they are there (a shuffled corpus is hashed as this thread feeds it
            # id-order blocks, see _assemble_loaded).
            sorted_digest_work = pool.submit(
                lambda: table_digest("corpus", sorted_corpus_ids, text_work.result())
            )
        try:
            # Hundreds of thousands of new tuples would trigger repeated full cyclic-GC
            # passes over a heap that only grows here: one pause spans the whole
            # assembly, and the caller runs the one young-generation pass itself (at a
            # moment when it would otherwise wait) if the collector was on.
            with paused_gc() as collecting:
                loaded = _assemble_loaded(
                    folder,
                    pool,
                    text_work,
                    sorted_digest_work,
                    sorted_corpus_ids=sorted_corpus_ids,
                    corpus_order=corpus_order,
                    collect_young=collecting,
                )
        except DatasetError:
            text_error = text_work.exception()
            if isinstance(text_error, DatasetError):
                raise text_error from None
            raise
    # Arrow's allocator (mimalloc) keeps the pages it freed for reuse: decoding and
    # decompressing the files left about 1.7x the texts' size behind (150 MB at 300,000
    # passages), which no Python object or later build could use. Handed back to the
    # operating system (under a millisecond), the load keeps only what it returns.
    pa.default_memory_pool().release_unused()
    return loaded


def _assemble_loaded(
    folder: Path,
    pool: ThreadPoolExecutor,
    text_work: Future[TextArray],
    sorted_digest_work: Future[bytes] | None,
    *,
    sorted_corpus_ids: IntArray,
    corpus_order: npt.NDArray[np.intp] | None,
    collect_young: bool,
) -> LoadedDataset:
    queries = _read_text_table(folder / "queries.parquet", allow_empty=False, tags=True)
    answers = _read_text_table(folder / "answers.parquet", allow_empty=True)

    qrels_path = folder / "qrels.parquet"
    qrels = _read_columns(qrels_path, ("qid", "pid"), optional=("score",))
    qrel_qids = _id_column(qrels, qrels_path, "qid")
    qrel_pids = _id_column(qrels, qrels_path, "pid")
    grades = _grade_column(qrels, qrels_path)
    qrel_query_pos = _positions(
        qrel_qids, queries.ids, qrels_path, "qid", "queries.parquet", "question"
    )
    qrel_corpus_pos = _positions(
        qrel_pids, sorted_corpus_ids, qrels_path, "pid", "corpus.parquet", "passage"
    )
    # Sort by (question, passage) so each question's relevant pids are ascending.
    qrel_order = _pair_order(
        qrel_qids, qrel_pids, qrel_query_pos, qrel_corpus_pos, len(sorted_corpus_ids),
        qrels_path,
    )

    qas_path = folder / "qas.parquet"
    qas = _read_columns(qas_path, ("qid", "aid"))
    qas_qids = _id_column(qas, qas_path, "qid")
    qas_aids = _id_column(qas, qas_path, "aid")
    qas_query_pos = _positions(
        qas_qids, queries.ids, qas_path, "qid", "queries.parquet", "question"
    )
    qas_answer_pos = _positions(
        qas_aids, answers.ids, qas_path, "aid", "answers.parquet", "answer"
    )
    qas_order = np.argsort(qas_qids, kind="stable")
    _check_unique(qas_qids, qas_order, qas_path, "qid", "keep one answer row per question")

    relevant = qrel_order[grades[qrel_order] > 0]
    rel_qids = qrel_qids[relevant]
    rel_pids = qrel_pids[relevant]
    rel_grades = grades[relevant]
    rel_query_pos = qrel_query_pos[relevant]
    rel_corpus_pos = qrel_corpus_pos[relevant]
    pairs, bounds = _pairs_without_passages(
        queries,
        answers,
        rel_query_pos=rel_query_pos,
        rel_pids=rel_pids,
        rel_grades=rel_grades,
        qas_query_pos=qas_query_pos,
        qas_answer_pos=qas_answer_pos,
        qas_aids=qas_aids,
    )
    parts = [
        table_digest("queries", queries.ids, queries.sorted_texts()),
        table_digest("answers", answers.ids, answers.sorted_texts()),
        links_digest(rel_qids, rel_pids, rel_grades, qas_qids[qas_order], qas_aids[qas_order]),
    ]
    if queries.tags is not None:
        # Only a file with the column adds the part: a five-file dataset without tags
        # keeps the fingerprint it had before tags existed.
        parts.append(tags_digest(queries.ids.tolist(), queries.tags))
    referenced = np.bincount(rel_corpus_pos, minlength=len(sorted_corpus_ids))
    without_answer = np.ones(len(queries.ids), dtype=bool)
    without_answer[qas_query_pos] = False
    # Everything about a shuffled corpus's digest that needs no text is done now, while
    # the worker still decodes: the texts are then on the critical path.
    feed = (
        None if corpus_order is None
        else IdOrderFeed.prepare("corpus", sorted_corpus_ids, corpus_order, rel_corpus_pos)
    )
    if collect_young:
        # The young-generation pass over the new pairs, which the next allocation after the
        # pause would run anyway (~0.07 s at 100k questions). Now, the worker is still
        # decoding (one long call without the GIL); later, this pass would hold the GIL
        # while the corpus digest needs it between blocks, and stall it.
        gc.collect(0)
    file_texts = text_work.result()
    corpus_path = folder / "corpus.parquet"
    if feed is None:
        assert sorted_digest_work is not None
        # One sha256 call over the whole text buffer, which needs the GIL only to start, so
        # this thread's UTF-8 check and passage lookups do not slow it down.
        digest_work = sorted_digest_work
        check_utf8(file_texts, corpus_path, "text")
        passage_texts = python_strings(file_texts.take(take_indices(rel_corpus_pos)))
    else:
        combined = one_chunk(file_texts)
        blocks: queue.Queue[pa.Array[Any] | None] = queue.Queue(maxsize=2)
        digest_work = pool.submit(feed.hash_blocks, combined, blocks)
        passage_texts = feed.put_blocks(
            combined, blocks, digest_work,
            on_invalid=functools.partial(raise_not_utf8, file_texts, corpus_path, "text"),
        )
    _fill_passages(pairs, bounds, passage_texts)
    corpus_part = digest_work.result()
    return LoadedDataset(
        pairs=tuple(pairs),
        corpus_ids=sorted_corpus_ids,
        corpus_texts=file_texts,
        corpus_order=corpus_order,
        answer_count=len(answers.ids),
        fingerprint=combine_digests([corpus_part, *parts]),
        corpus_fingerprint=corpus_part.hex(),
        relevant_qrels=len(rel_pids),
        referenced_passages=int(np.count_nonzero(referenced)),
        qids_without_qrels=queries.ids[
            np.bincount(rel_query_pos, minlength=len(queries.ids)) == 0
        ],
        qids_without_answer=queries.ids[without_answer],
        tag_counts=None if queries.tags is None else tag_counts(queries.tags),
    )


# --- reading -------------------------------------------------------------------------------


def _read_columns(
    path: Path,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    *,
    read: tuple[str, ...] | None = None,
) -> pa.Table:
    """Read only the columns we use (extra columns are never decoded).

    ``read`` narrows the decoded columns to a subset of ``required`` (the others are only
    checked to exist).
    """
    if path.is_dir():
        # Spark, Dask and pyarrow's write_dataset write a "file" as a folder of parts.
        raise DatasetError(
            f"{path} is a folder, not a Parquet file; write each table as one file (for a "
            "folder of part files: pyarrow.parquet.write_table(pyarrow.parquet.read_table("
            "folder), file))"
        )
    if path.exists() and not path.is_file():
        # A FIFO or a device would block the read or stream forever.
        raise DatasetError(
            f"{path} is not a regular file; write the table as a Parquet file there"
        )
    if not path.is_file():
        raise DatasetError(
            f"{path} is missing; a dataset folder holds queries.parquet, corpus.parquet, "
            "answers.parquet, qrels.parquet and qas.parquet (write an empty table for "
            "answers/qrels/qas if you have none)"
        )
    try:
        # One open for the schema and the data. ``ParquetFile.read`` also hands back one
        # chunk per column (``read_table`` splits into 128k-row batches), so nothing later
        # has to concatenate the corpus texts before gathering them.
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(
            f"{path} is not a readable Parquet file ({_first_line(exc)}); re-write it as Parquet"
        ) from None
    with parquet:
        try:
            schema = parquet.schema_arrow
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(
                f"{path} is not a readable Parquet file ({_first_line(exc)}); "
                "re-write it as Parquet"
            ) from None
        names = set(schema.names)
        for column in required:
            if column not in names:
                found = ", ".join(schema.names) or "none"
                raise DatasetError(
                    f"{path} has no column {column!r} (columns: {found}); "
                    f"the file needs columns {', '.join(required)}"
                )
        columns = [*(required if read is None else read), *(n for n in optional if n in names)]
        try:
            return parquet.read(columns=columns)
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(
                f"{path} could not be read ({_first_line(exc)}); re-write it as Parquet"
            ) from None


def _read_text_table(path: Path, *, allow_empty: bool, tags: bool = False) -> _TextTable:
    table = _read_columns(path, ("id", "text"), optional=("tags",) if tags else ())
    ids, order = _id_index(table, path, allow_empty=allow_empty)
    texts = _text_column(table, path)
    check_utf8(texts, path, "text")
    row_tags = read_tags(table, path) if tags else None
    if row_tags is not None and order is not None:
        row_tags = [row_tags[row] for row in order.tolist()]
    return _TextTable(ids=ids if order is None else ids[order], file_texts=texts, order=order,
                      tags=row_tags)


def _read_id_index(
    path: Path, *, allow_empty: bool
) -> tuple[IntArray, npt.NDArray[np.intp] | None]:
    """The file's ``id`` column (file order) and its sorting permutation (``None`` if sorted).

    Checks that the file has both ``id`` and ``text`` columns and that the ids are unique.
    """
    table = _read_columns(path, ("id", "text"), read=("id",))
    return _id_index(table, path, allow_empty=allow_empty)


def _id_index(
    table: pa.Table, path: Path, *, allow_empty: bool
) -> tuple[IntArray, npt.NDArray[np.intp] | None]:
    if table.num_rows == 0 and not allow_empty:
        raise DatasetError(
            f"{path} has no rows; a dataset needs at least one "
            f"{'question' if path.name == 'queries.parquet' else 'passage'}"
        )
    ids = _id_column(table, path, "id")
    if len(ids) <= 1 or bool(np.all(ids[1:] > ids[:-1])):
        # Already sorted and unique, the common case: no copy of the text data.
        return ids, None
    count = len(ids)
    first = int(ids.min())
    if int(ids.max()) - first == count - 1:
        # Shuffled consecutive ids (most exports number rows 0..n-1 or 1..n): each id's
        # sorted position is its offset, so one scatter replaces the O(n log n) sort. n ids
        # in n slots are unique exactly when every slot is written (otherwise some repeat).
        order = np.full(count, -1, dtype=np.intp)
        order[ids - first] = np.arange(count, dtype=np.intp)
        if bool((order >= 0).all()):
            return ids, order
    # The unstable sort is about twice as fast; only when ids repeat does the order among
    # equal ids matter (for naming the first two rows), so the error path re-sorts stably.
    order = np.argsort(ids)
    ordered = ids[order]
    if bool((ordered[1:] == ordered[:-1]).any()):
        _check_unique(ids, np.argsort(ids, kind="stable"), path, "id", "give every row its own id")
    return ids, order


def _check_passage_ids(ids: IntArray, path: Path) -> None:
    """Passage ids are 0 or more: the metrics give unmatched chunks the negative ids.

    A relevant passage ``-1`` would otherwise be "retrieved" by the first chunk that
    matches no passage at all.
    """
    if len(ids) and int(ids.min()) < 0:
        row = int(np.argmax(ids < 0))
        raise DatasetError(
            f"{path}: column 'id' row {row} holds {int(ids[row])}, a negative passage id; "
            "passage ids must be 0 or more (negative ids mark retrieved chunks that match no "
            "passage): renumber the passages, e.g. add the same offset to every id in "
            "corpus.parquet and every pid in qrels.parquet"
        )


def _read_text_column(path: Path) -> TextArray:
    """The file's checked ``text`` column, in file order (UTF-8 not checked yet: the
    caller runs :func:`check_utf8` where it costs no wall time)."""
    return _text_column(_read_columns(path, ("text",)), path)


def _id_column(table: pa.Table, path: Path, column: str) -> IntArray:
    """An id column as int64 numpy, from any integer type or strings holding integers."""
    data = table.column(column)
    if table.num_rows == 0:
        return np.empty(0, dtype=np.int64)
    kind = data.type
    if pa.types.is_dictionary(kind):
        data = data.cast(kind.value_type)
        kind = data.type
    _reject_nulls(data, path, column, "give every row an id")
    if pa.types.is_integer(kind):
        if pa.types.is_uint64(kind):
            too_big = pc.greater(data, pa.scalar(_INT64_MAX, pa.uint64()))
            if pc.any(too_big).as_py():
                row = _first_true(too_big)
                raise DatasetError(
                    f"{path}: column {column!r} row {row} holds {data[row].as_py()}, "
                    "larger than int64 allows; use ids below 2**63"
                )
        return np.asarray(data.cast(pa.int64()).to_numpy(), dtype=np.int64)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        check_utf8(data, path, column)
        # Arrow's string->int cast takes neither surrounding blanks nor a leading "+": match
        # the trimmed text first (so "+-13" is rejected), then drop the "+" for the cast.
        trimmed = pc.utf8_trim_whitespace(data)
        is_integer = pc.match_substring_regex(trimmed, INTEGER_ID)
        if not pc.all(is_integer).as_py():
            row = _first_true(pc.invert(is_integer))
            raise DatasetError(
                f"{path}: column {column!r} row {row} holds {data[row].as_py()!r}, "
                "not an integer; ids must be integers (int64, or strings of digits)"
            )
        trimmed = pc.replace_substring_regex(trimmed, r"^\+", "")
        try:
            return np.asarray(trimmed.cast(pa.int64()).to_numpy(), dtype=np.int64)
        except pa.ArrowInvalid:
            # Error path only: find the offending row the slow, certain way.
            row = next(
                index
                for index, value in enumerate(cast("list[str]", trimmed.to_pylist()))
                if not -(2**63) <= int(value) < 2**63
            )
            raise DatasetError(
                f"{path}: column {column!r} row {row} holds {data[row].as_py()!r}, "
                "which does not fit in int64; use ids below 2**63"
            ) from None
    raise DatasetError(
        f"{path}: column {column!r} has type {kind}, not an integer; "
        "store ids as int64 (or strings of digits)"
    )


def _text_column(table: pa.Table, path: Path) -> TextArray:
    data = table.column("text")
    kind = data.type
    if pa.types.is_dictionary(kind) and _is_text_type(kind.value_type):
        data = data.cast(kind.value_type)
        kind = data.type
    if table.num_rows == 0:
        return pa.chunked_array([], type=pa.string())
    if not _is_text_type(kind):
        raise DatasetError(f"{path}: column 'text' has type {kind}, not string; {_TEXT_HINT}")
    _reject_nulls(data, path, "text", "give every row a text or drop the row")
    return data


def _is_text_type(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _grade_column(table: pa.Table, path: Path) -> npt.NDArray[np.float64]:
    """The qrels grades: the ``score`` column as float64, or 1.0 without one."""
    if "score" not in table.column_names:
        return np.ones(table.num_rows, dtype=np.float64)
    data = table.column("score")
    if table.num_rows == 0:
        return np.empty(0, dtype=np.float64)
    kind = data.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise DatasetError(
            f"{path}: column 'score' has type {kind}, not a number; store graded relevance "
            "as integers or floats (score > 0 is relevant) or drop the column"
        )
    _reject_nulls(data, path, "score", "give every qrels row a score or drop the column")
    grades = np.asarray(data.cast(pa.float64()).to_numpy(), dtype=np.float64)
    not_finite = ~np.isfinite(grades)
    if not_finite.any():
        row = int(np.argmax(not_finite))
        raise DatasetError(
            f"{path}: column 'score' row {row} holds {grades[row]}; scores must be finite numbers"
        )
    return grades


# --- validation helpers --------------------------------------------------------------------


def check_utf8(texts: TextArray, path: Path, column: str) -> None:
    """``DatasetError`` naming the first row of ``texts`` that is not valid UTF-8.

    Parquet promises UTF-8 strings but does not enforce it (a file written from bytes
    decoded as Latin-1, or cast without checking, holds anything), and Arrow checks only
    when a row becomes a Python string: far too late, as a traceback. The check is one
    pass over the text bytes in C++ (about 0.1 s per 500 MB, without the GIL); finding
    the row is a bisection, on the error path only.
    """
    if not all(is_utf8(chunk) for chunk in texts.chunks):
        raise_not_utf8(texts, path, column)


def raise_not_utf8(texts: TextArray, path: Path, column: str) -> NoReturn:
    """The ``DatasetError`` of :func:`check_utf8`, for ``texts`` known to hold a bad row."""
    offset = 0
    detail = ""
    for chunk in texts.chunks:
        if is_utf8(chunk):
            offset += len(chunk)
            continue
        low, high = 0, len(chunk)
        while high - low > 1:  # chunk[low:high] holds the first invalid row
            middle = (low + high) // 2
            if is_utf8(chunk.slice(low, middle - low)):
                low = middle
            else:
                high = middle
        raw: bytes = chunk.slice(low, 1).cast(pa.binary())[0].as_py()
        try:
            raw.decode("utf-8")
            detail = f" row {offset + low}"
        except UnicodeDecodeError as exc:
            detail = f" row {offset + low} (byte 0x{raw[exc.start]:02x} at byte {exc.start})"
        break
    raise DatasetError(
        f"{path}: column {column!r}{detail} is not valid UTF-8; Parquet texts must be UTF-8: "
        "decode the source with its real encoding (e.g. latin-1, cp1252, gbk) and re-write "
        "the file"
    )


def _reject_nulls(data: pa.ChunkedArray[Any], path: Path, column: str, fix: str) -> None:
    if data.null_count:
        row = _first_true(pc.is_null(data))
        raise DatasetError(f"{path}: column {column!r} row {row} is null; {fix}")


def _first_true(mask: Any) -> int:
    """Index of the first true value of a boolean Arrow array (callers know there is one)."""
    return int(pc.index(mask, pa.scalar(True)).as_py())


def _check_unique(ids: IntArray, order: npt.NDArray[np.intp], path: Path, column: str,
                  fix: str) -> None:
    ordered = ids[order]
    repeated = ordered[1:] == ordered[:-1]
    if repeated.any():
        at = int(np.argmax(repeated))
        first, second = sorted((int(order[at]), int(order[at + 1])))
        raise DatasetError(
            f"{path}: column {column!r} holds {int(ordered[at])} twice (rows {first} and "
            f"{second}); {fix}"
        )


def _check_unique_pairs(qids: IntArray, pids: IntArray, order: npt.NDArray[np.intp],
                        path: Path) -> None:
    ordered_q = qids[order]
    ordered_p = pids[order]
    repeated = (ordered_q[1:] == ordered_q[:-1]) & (ordered_p[1:] == ordered_p[:-1])
    if repeated.any():
        at = int(np.argmax(repeated))
        first, second = sorted((int(order[at]), int(order[at + 1])))
        raise DatasetError(
            f"{path}: columns 'qid','pid' hold the pair ({int(ordered_q[at])}, "
            f"{int(ordered_p[at])}) twice (rows {first} and {second}); keep one row per pair"
        )


def _pair_order(
    qids: IntArray,
    pids: IntArray,
    query_pos: npt.NDArray[np.intp],
    corpus_pos: npt.NDArray[np.intp],
    corpus_count: int,
    path: Path,
) -> npt.NDArray[np.intp]:
    """The qrels rows sorted by (qid, pid); a ``DatasetError`` for a repeated pair.

    The positions of qid and pid in the sorted queries and corpus order the rows exactly
    as the ids do, and fold into one int64 key: one unstable argsort of it is about ten
    times faster than a two-key lexsort. Only a repeated pair makes the order among equal
    keys matter (for naming the first two rows), so that path sorts stably.
    """
    if len(qids) and (int(query_pos.max()) + 1) * max(corpus_count, 1) <= _INT64_MAX:
        key = query_pos.astype(np.int64) * corpus_count + corpus_pos
        order = np.argsort(key)
        ordered = key[order]
        if not bool((ordered[1:] == ordered[:-1]).any()):
            return order
    order = np.lexsort((pids, qids))
    _check_unique_pairs(qids, pids, order, path)
    return order


def _positions(values: IntArray, sorted_ids: IntArray, path: Path, column: str,
               target: str, noun: str) -> npt.NDArray[np.intp]:
    """Where each value sits in ``sorted_ids``; a ``DatasetError`` for the first unknown one."""
    if len(values) == 0:
        return np.empty(0, dtype=np.intp)
    count = len(sorted_ids)
    if count and int(sorted_ids[-1]) - int(sorted_ids[0]) == count - 1:
        # Consecutive ids (sorted and unique, so exactly first..first+count-1), as most
        # exports number them: the position is an offset, no binary search needed. (A
        # wrapped-around subtraction can never land inside 0..count-1.)
        offsets = values - sorted_ids[0]
        known = (offsets >= 0) & (offsets < count)
        clipped = np.where(known, offsets, 0).astype(np.intp)
    else:
        positions = np.searchsorted(sorted_ids, values)
        clipped = np.minimum(positions, max(count - 1, 0))
        known = sorted_ids[clipped] == values if count else np.zeros(len(values), dtype=bool)
    if not known.all():
        row = int(np.argmin(known))
        raise DatasetError(
            f"{path}: column {column!r} row {row} refers to {noun} {int(values[row])}, "
            f"which {target} does not contain; fix the id or add the {noun}"
        )
    return clipped


# --- assembly ------------------------------------------------------------------------------


def _pairs_without_passages(
    queries: _TextTable,
    answers: _TextTable,
    *,
    rel_query_pos: npt.NDArray[np.intp],
    rel_pids: IntArray,
    rel_grades: npt.NDArray[np.float64],
    qas_query_pos: npt.NDArray[np.intp],
    qas_answer_pos: npt.NDArray[np.intp],
    qas_aids: IntArray,
) -> tuple[list[QAPair], list[int]]:
    """One ``QAPair`` per question, ordered by qid, with ``passages`` still empty.

    Built while the worker thread is still decoding the corpus texts; :func:`_fill_passages`
    completes them. Also returns the bounds of each question's slice of the relevant qrels.
    """
    question_count = len(queries.ids)
    # Relevant qrels are sorted by qid, so each question's rows are one contiguous slice.
    per_question = np.bincount(rel_query_pos, minlength=question_count)
    bounds: list[int] = np.concatenate(([0], np.cumsum(per_question))).tolist()
    # Slicing one tuple makes each question's tuple in one step (no list in between).
    pid_tuple: tuple[int, ...] = tuple(rel_pids.tolist())
    grade_tuple: tuple[float, ...] = tuple(rel_grades.tolist())

    # Each question's aid and answer (None without one), aligned with the questions by
    # numpy's object arrays instead of a per-question lookup.
    aids: Any = np.full(question_count, None, dtype=object)
    aids[qas_query_pos] = qas_aids
    answer_texts: Any = np.full(question_count, None, dtype=object)
    if len(qas_query_pos):
        answer_rows = take_indices(answers.file_rows(qas_answer_pos))
        answer_texts[qas_query_pos] = answers.file_texts.take(answer_rows).to_numpy(
            zero_copy_only=False
        )

    qids: list[int] = queries.ids.tolist()
    questions = python_strings(queries.sorted_texts())
    tags: list[tuple[str, ...]] = queries.tags or [()] * question_count
    # A frozen dataclass's __init__ costs one object.__setattr__ per field; filling the
    # instance dict directly builds the very same object (same fields, same equality and
    # hash) about 3x faster, which matters at 100k questions.
    new_pair = QAPair.__new__
    pairs: list[QAPair] = []
    append = pairs.append
    for qid, question, start, end, aid, answer, names in zip(
        qids, questions, bounds, bounds[1:], aids.tolist(), answer_texts.tolist(), tags,
        strict=False,
    ):
        pair = new_pair(QAPair)
        pair.__dict__.update(
            qid=qid,
            question=question,
            pids=pid_tuple[start:end],
            passages=(),
            aid=aid,
            answer=answer,
            grades=grade_tuple[start:end],
            tags=names,
        )
        append(pair)
    return pairs, bounds


def _fill_passages(pairs: list[QAPair], bounds: list[int], passage_texts: list[str]) -> None:
    """Set each pair's ``passages`` (the relevant qrels' texts, in the order of its pids)."""
    texts = tuple(passage_texts)
    for pair, start, end in zip(pairs, bounds, bounds[1:], strict=False):
        if end > start:
            # Same dict slot as the placeholder, so the instance dict keeps field order.
            pair.__dict__["passages"] = texts[start:end]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
