"""Write a TOML document: the inverse of :func:`tomllib.loads` for what a ``ragev.toml`` holds.

The server writes each task's configuration (a reference config with the request's
dataset and model overrides applied) as TOML, because the plugin reads only TOML.
The standard library reads TOML but does not write it, and the subset needed here is
small: tables, arrays of tables, strings, numbers, booleans, dates and arrays.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def dumps(document: Mapping[str, Any]) -> str:
    """``document`` as TOML text that :func:`tomllib.loads` reads back equal.

    Raises :class:`TypeError` for a value TOML cannot hold (``None``, objects).
    """
    lines: list[str] = []
    _table(document, [], lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_table_array(value: Any) -> bool:
    return (
        isinstance(value, list) and bool(value)
        and all(isinstance(item, Mapping) for item in value)
    )


def _table(table: Mapping[str, Any], path: list[str], lines: list[str]) -> None:
    plain = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)
             and not _is_table_array(v)]
    for key, value in plain:
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in table.items():
        if isinstance(value, Mapping):
            sub = [*path, key]
            lines.append("")
            lines.append(f"[{'.'.join(_key(part) for part in sub)}]")
            _table(value, sub, lines)
        elif _is_table_array(value):
            sub = [*path, key]
            for item in value:
                lines.append("")
                lines.append(f"[[{'.'.join(_key(part) for part in sub)}]]")
                _table(item, sub, lines)


def _key(key: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"TOML keys are strings, got {key!r}")
    # fullmatch: "$" alone would also match before a final newline ("0\n" is no bare key).
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # JSON string escapes are TOML basic-string escapes, except that TOML has no "\/"
    # (json.dumps never writes it) and wants DEL escaped too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"TOML cannot hold {type(value).__name__} value {value!r}")
