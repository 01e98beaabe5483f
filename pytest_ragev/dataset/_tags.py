"""The optional ``tags`` column of ``queries.parquet`` (imported lazily by ``dataset``).

A question's tags name the slices it belongs to (``billing``, ``setup``): the reports
show each slice's means and the gate can test each slice (docs/dataset.md). The column
holds a string (one tag; empty or null: none) or a list of strings per question. Tags
are trimmed and kept once each, in the order written; a tag ``lang:<code>`` sets the
question's language slice instead of the one told from its text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from pytest_ragev.core.errors import DatasetError

#: The column's name in ``queries.parquet``.
TAGS_COLUMN = "tags"
#: The prefix of a tag that names the question's language (``lang:de``).
LANG_PREFIX = "lang:"
#: A language code: an ISO 639 code of two or three letters, with optional subtags
#: (``zh``, ``pt-br``, ``yue``).
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(-[a-z0-9]{2,8})*")

_TYPE_HINT = "store tags as a string or a list of strings per question"


def read_tags(table: pa.Table, path: Path) -> list[tuple[str, ...]] | None:
    """Each row's tags (file order), or ``None`` when the table has no ``tags`` column.

    Raises :class:`DatasetError` naming the row for a column of another type, a blank
    tag in a list, or a language tag that is not a language code.
    """
    if TAGS_COLUMN not in table.column_names:
        return None
    data = table.column(TAGS_COLUMN)
    kind = data.type
    if pa.types.is_dictionary(kind):
        data = data.cast(kind.value_type)
        kind = data.type
    if _is_text(kind):
        rows: list[Any] = data.to_pylist()
        return [_row_tags(path, row, [] if value is None else [value], single=True)
                for row, value in enumerate(rows)]
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)
            or pa.types.is_fixed_size_list(kind)):
        item = kind.value_type
        if pa.types.is_dictionary(item):
            item = item.value_type
        if not _is_text(item):
            raise DatasetError(f"{path}: column 'tags' has type {kind}, a list of {item}; "
                               f"{_TYPE_HINT}")
        rows = data.to_pylist()
        return [_row_tags(path, row, value or [], single=False)
                for row, value in enumerate(rows)]
    raise DatasetError(f"{path}: column 'tags' has type {kind}; {_TYPE_HINT}")


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _row_tags(path: Path, row: int, values: list[Any], *, single: bool) -> tuple[str, ...]:
    tags: dict[str, None] = {}
    language: str | None = None
    for value in values:
        if value is None or not value.strip():
            if single:
                continue  # an empty string (a CSV export's empty cell): no tag
            raise DatasetError(f"{path}: column 'tags' row {row} holds a blank tag; "
                               "remove it from the list (an empty list means no tag)")
        tag = value.strip()
        if tag.lower().startswith(LANG_PREFIX):
            code = tag[len(LANG_PREFIX):].strip().lower()
            if not LANGUAGE_CODE.fullmatch(code):
                raise DatasetError(
                    f"{path}: column 'tags' row {row} holds {tag!r}, not a language tag; "
                    "write lang:<ISO 639 code>, e.g. lang:de or lang:zh"
                )
            if language is not None and language != code:
                raise DatasetError(
                    f"{path}: column 'tags' row {row} names two languages (lang:{language} "
                    f"and lang:{code}); keep one language tag per question"
                )
            language = code
            tag = LANG_PREFIX + code
        tags[tag] = None
    return tuple(tags)


def tag_counts(tags: list[tuple[str, ...]]) -> dict[str, int]:
    """Questions per tag (``lang:`` tags included), most frequent first, then by name."""
    counts: dict[str, int] = {}
    for names in tags:
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


#: The keys of a source record (a JSONL QA line, a BEIR query) that ``ragev dataset
#: convert`` keeps as tags: ``category`` (a string) first, then ``tags``.
SOURCE_TAG_KEYS = ("category", "tags")


def source_tags(item: Any, where: str) -> list[str]:
    """The tags of a source record: its ``category`` then its ``tags`` (a string or a list
    of strings), each once; ``[]`` when it has neither. :class:`DatasetError` naming
    ``where`` (``qa.jsonl line 3``) for a value of another type."""
    if not isinstance(item, dict):
        return []
    found: dict[str, None] = {}
    for key in SOURCE_TAG_KEYS:
        value = item.get(key)
        if value is None:
            continue
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise DatasetError(f"{where}: field {key!r} is {type(value).__name__}; write a "
                               "string or a list of strings (the question's tags)")
        found.update(dict.fromkeys(v.strip() for v in values if v.strip()))
    return list(found)
