"""The answers file: a run's answers as one Parquet table, written and read back.

``--ragev-answers-out FILE.parquet`` writes every answer a run got; ``[pipeline] name =
"replay"`` scores the answers of such a file, whoever wrote it: a Ray Data or Dask job,
Spark, a provider's batch API, or another run. One row per question and configuration:

============== ===================== ==================================================
column         type                  holds
============== ===================== ==================================================
qid            int64                 the question id (required)
variant        string, null          the configuration (null: the base one); optional
retrieved_ids  list<int64>, null     the passage id of each retrieved item, best first
retrieved_texts list<string>, null   the text of each retrieved item, best first
answer         string                the generated answer (required, ``""`` for none)
meta           string, null          ``Answer.meta`` as a JSON object; optional
============== ===================== ==================================================

At least one of ``retrieved_ids`` and ``retrieved_texts`` is there. When a row has both,
they hold one entry per retrieved item: an item with an id and a text is a chunk that
names its passage (``Chunk(text, passage_id)``), an item with only a text is placed by
its text as any pipeline's chunk text is, an item with only an id is that passage; a
``null`` entry is "not given". The file a run writes keeps each item as the pipeline
returned it, so replaying it scores every question as the run did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from pytest_ragev.core.attribution import is_passage_id
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.io import atomic_write_bytes
from pytest_ragev.core.record import QuestionKey, Record
from pytest_ragev.core.tables import suggest
from pytest_ragev.core.types import Answer, Chunk, Retrieved

#: The columns of an answers file, in the order a run writes them.
ANSWER_COLUMNS = ("qid", "variant", "retrieved_ids", "retrieved_texts", "answer", "meta")
#: The columns every answers file must have.
REQUIRED_COLUMNS = ("qid", "answer")


def answers_schema() -> pa.Schema:
    """The Arrow schema of the file a run writes (an engine may write the same)."""
    fields: list[pa.Field[Any]] = [
        pa.field("qid", pa.int64(), nullable=False),
        pa.field("variant", pa.string()),
        pa.field("retrieved_ids", pa.list_(pa.int64())),
        pa.field("retrieved_texts", pa.list_(pa.string())),
        pa.field("answer", pa.string(), nullable=False),
        pa.field("meta", pa.string()),
    ]
    return pa.schema(fields)


def answer_row(qid: int, answer: Answer, *, variant: str | None = None) -> dict[str, Any]:
    """One row of an answers file from a pipeline's :class:`Answer` (for an engine that
    answers outside pytest): its retrieved items as ids, texts or both, its meta as JSON
    text. ``TypeError`` for an item that is neither an id, a text nor a chunk."""
    ids: list[int | None] = []
    texts: list[str | None] = []
    for item in answer.retrieved:
        if isinstance(item, bool):
            raise TypeError("a retrieved item is a bool; give passage ids, texts or chunks")
        if isinstance(item, str):
            ids.append(None)
            texts.append(item)
        elif is_passage_id(item):
            ids.append(int(cast(int, item)))  # numpy integers become plain ints
            texts.append(None)
        elif isinstance(getattr(item, "text", None), str):
            pid = getattr(item, "passage_id", None)
            ids.append(None if pid is None else int(pid))
            texts.append(item.text)  # type: ignore[union-attr]
        else:
            raise TypeError(f"retrieved item {item!r} is not a passage id, a text or a chunk")
    return _row(int(qid), variant, ids, texts, answer.text, dict(answer.meta))


def record_row(record: Record) -> dict[str, Any]:
    """The row of an answered record (its items as the pipeline returned them: see
    :attr:`Record.retrieved_pids`)."""
    pids = record.retrieved_pids or tuple(None for _ in record.retrieved)
    ids = [item if isinstance(item, int) else pid
           for item, pid in zip(record.retrieved, pids, strict=True)]
    texts = [item if isinstance(item, str) else None for item in record.retrieved]
    return _row(record.qid, record.variant, ids, texts, record.generated_text,
                dict(record.meta))


def _row(qid: int, variant: str | None, ids: list[int | None], texts: list[str | None],
         answer: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    # A column of a row is null when none of its items has that part; an empty
    # retrieval is an empty list of ids (it retrieved nothing, which is not "not given").
    has_ids = any(pid is not None for pid in ids) or not ids
    has_texts = any(text is not None for text in texts)
    return {
        "qid": qid,
        "variant": variant,
        "retrieved_ids": ids if has_ids else None,
        "retrieved_texts": texts if has_texts else None,
        "answer": answer,
        "meta": json.dumps(dict(meta), ensure_ascii=False, allow_nan=False) if meta else None,
    }


def write_answers(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write ``rows`` (see :func:`answer_row`, :func:`record_row`) as an answers file,
    atomically; the number of rows written."""
    listed = list(rows)
    columns = {name: [row.get(name) for row in listed] for name in ANSWER_COLUMNS}
    table = pa.Table.from_pydict(columns, schema=answers_schema())
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
    return len(listed)


def write_run_answers(path: str | Path, records: Sequence[Record]) -> int:
    """Write the answers of ``records`` (those that raised have none) as an answers file."""
    return write_answers(path, (record_row(record) for record in records
                                if record.error is None))


# ----------------------------------------------------------------------------- reading
def _kind_ok(column: str, kind: pa.DataType) -> bool:
    """Whether an Arrow column type holds what ``column`` must (nulls alone always do)."""
    if pa.types.is_null(kind):
        return column not in REQUIRED_COLUMNS
    if column == "qid":
        return pa.types.is_integer(kind)
    if column in ("variant", "answer", "meta"):
        return pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return False
    inner = kind.value_type
    if pa.types.is_null(inner):
        return True
    if column == "retrieved_ids":
        return pa.types.is_integer(inner)
    return pa.types.is_string(inner) or pa.types.is_large_string(inner)


_WANTED = {
    "qid": "int64", "variant": "string", "retrieved_ids": "list<int64>",
    "retrieved_texts": "list<string>", "answer": "string", "meta": "string (JSON)",
}


@dataclass(frozen=True)
class AnswersFile:
    """An answers file read and checked: its answers by (configuration, qid).

    ``by_variant`` says whether the file has a ``variant`` column: without one, its rows
    answer every configuration that replays it.
    """

    path: Path
    answers: Mapping[QuestionKey, Answer]
    by_variant: bool

    @classmethod
    def load(cls, path: Path, *, source: str | Path) -> AnswersFile:
        """Read ``path``; a one-line :class:`ConfigError` naming ``source`` (the config
        file), the file, the column or row and the fix when it cannot be scored."""
        where = f"{source}: [pipeline] answers = {path}"
        try:
            table = pq.read_table(path)
        except FileNotFoundError:
            raise ConfigError(f"{where}: no such file; write the answers there (see "
                              "docs/sharding.md) or fix the path") from None
        except (OSError, pa.ArrowException) as exc:
            raise ConfigError(f"{where} is not a Parquet file ({str(exc)[:120]}); write the "
                              "answers with pyarrow.parquet.write_table") from None
        names = table.column_names
        for name in names:
            if name not in _WANTED:
                raise ConfigError(f"{where}: unknown column {name!r}; "
                                  f"{suggest(name, _WANTED, noun='columns')}")
        for name in REQUIRED_COLUMNS:
            if name not in names:
                raise ConfigError(f"{where}: no {name!r} column; every row needs the question's "
                                  "qid and the answer text")
        if "retrieved_ids" not in names and "retrieved_texts" not in names:
            raise ConfigError(f"{where}: neither 'retrieved_ids' nor 'retrieved_texts'; give "
                              "what the pipeline retrieved, as passage ids or chunk texts")
        for name in names:
            kind = table.schema.field(name).type
            if not _kind_ok(name, kind):
                raise ConfigError(f"{where}: column {name!r} is {kind}, not {_WANTED[name]}; "
                                  "cast it before writing the file")
        columns = {name: table.column(name).to_pylist() for name in names}
        rows = len(table)
        answers: dict[QuestionKey, Answer] = {}
        for n in range(rows):
            qid = columns["qid"][n]
            if qid is None:
                raise ConfigError(f"{where}: row {n} has no qid; every row names its question")
            variant = columns["variant"][n] if "variant" in columns else None
            label = f"q{qid}" + (f" (variant {variant!r})" if variant is not None else "")
            answer = columns["answer"][n]
            if answer is None:
                raise ConfigError(f"{where}: the answer of {label} is null; write the answer "
                                  "text ('' when there is none)")
            key = (variant, int(qid))
            if key in answers:
                raise ConfigError(f"{where} has two rows for {label}; keep one answer per "
                                  "question and configuration")
            answers[key] = Answer(
                retrieved=_items(columns.get("retrieved_ids", [None] * rows)[n],
                                 columns.get("retrieved_texts", [None] * rows)[n],
                                 where, label),
                text=str(answer),
                meta=_meta(columns["meta"][n] if "meta" in columns else None, where, label),
            )
        return cls(path=path, answers=answers, by_variant="variant" in names)

    def extra(self, qids: Iterable[int], configurations: Iterable[str | None]
              ) -> list[QuestionKey]:
        """The rows for questions the dataset lacks, or for configurations the config
        file does not have (sorted)."""
        known_q = set(qids)
        known_c = set(configurations)
        return sorted((key for key in self.answers
                       if key[1] not in known_q or (self.by_variant and key[0] not in known_c)),
                      key=lambda key: (key[0] or "", key[1]))


def _items(ids: Sequence[int | None] | None, texts: Sequence[str | None] | None,
           where: str, label: str) -> list[Retrieved]:
    """The retrieved items of a row (see the module's docstring)."""
    if ids is not None and texts is not None and len(ids) != len(texts):
        raise ConfigError(f"{where}: {label} has {len(ids)} retrieved_ids but {len(texts)} "
                          "retrieved_texts; give one entry per retrieved item in each (null "
                          "where an item has no id or no text)")
    count = len(ids) if ids is not None else len(texts) if texts is not None else 0
    items: list[Retrieved] = []
    for position in range(count):
        pid = ids[position] if ids is not None else None
        text = texts[position] if texts is not None else None
        if pid is not None and pid < 0:
            raise ConfigError(f"{where}: {label} retrieved_ids[{position}] is {pid}, a negative "
                              "passage id; give the dataset's id, or the chunk's text instead")
        if text is None and pid is None:
            raise ConfigError(f"{where}: {label} retrieved item {position} has neither an id "
                              "nor a text; give one of them")
        if text is None:
            items.append(int(cast(int, pid)))
        else:
            items.append(text if pid is None else Chunk(text, pid))
    return items


def _meta(text: str | None, where: str, label: str) -> dict[str, Any]:
    if text is None or text == "":
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: the meta of {label} is not JSON ({exc.msg}); write "
                          "Answer.meta with json.dumps") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: the meta of {label} is a JSON {type(value).__name__}, not "
                          "an object; write a JSON object (json.dumps of a dict)")
    return value
