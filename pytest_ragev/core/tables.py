"""Checked reads of TOML tables: the one place that turns a bad key into a one-line error.

Every table of a ``ragev.toml`` (``[dataset]``, ``[gate.metrics.recall]``,
``[pipeline.chat]``, ``[[variants]] #2``) is read through a :class:`Table`, so every
mistake reads the same way: the file, the table and key, the value as written, and
what to write instead, with a did-you-mean for misspelt keys::

    ragev.toml: unknown key [pipeline] 'chunk_sise'; did you mean 'chunk_size'?
    ragev.toml: [gate] significance = 1.5 is invalid; use a number in (0, 0.5), e.g. ...

The module also holds the small operations on nested tables the rest of the package
needs: :func:`deep_merge` (variant overrides), :func:`flatten` (dotted keys) and
:func:`changed_keys` (what a variant changes).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_ragev.core.errors import ConfigError

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def close_match(word: str, choices: Iterable[str]) -> str | None:
    """The choice ``word`` was most likely meant to be, or ``None``."""
    close = difflib.get_close_matches(str(word), sorted(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def suggest(word: str, choices: Iterable[str], *, noun: str = "keys") -> str:
    """``did you mean 'x'?`` for a misspelt ``word``, else the list of valid choices."""
    options = sorted(choices)
    match = close_match(word, options)
    if match is not None:
        return f"did you mean {match!r}?"
    return f"valid {noun}: " + ", ".join(options)


def is_number(value: Any) -> bool:
    """A TOML number: int or float, never a bool (``true`` is a mistake, not 1)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _bound(value: float) -> str:
    return "∞" if value == math.inf else ("-∞" if value == -math.inf else f"{value:g}")


class Table:
    """One TOML table with checked reads; ``where`` names it (``[pipeline.chat]``).

    ``source`` is the file, named first in every error. The top level of a file has
    ``where = ""``. Reads return the default when the key is absent and raise a
    one-line :class:`ConfigError` when it is present but wrong.
    """

    def __init__(
        self, table: Any, *, where: str, source: Path | str, fix: str | None = None
    ) -> None:
        if not isinstance(table, Mapping):
            raise ConfigError(
                f"{source}: {where} must be a table, got {type(table).__name__}; "
                + (fix or f"write it as {where} with keys below it")
            )
        self.table: Mapping[str, Any] = table
        self.where = where
        self.source = source

    def __contains__(self, key: str) -> bool:
        return key in self.table

    def get(self, key: str, default: Any = None) -> Any:
        """The raw value of ``key`` (unchecked)."""
        return self.table.get(key, default)

    def at(self, key: str) -> str:
        """``[pipeline] chunk_size``: how messages name a key of this table."""
        return f"{self.where} {key}" if self.where else str(key)

    def fail(self, key: str, value: Any, fix: str) -> ConfigError:
        """The error for a bad ``key = value``, with ``fix`` telling what to write."""
        return ConfigError(f"{self.source}: {self.at(key)} = {value!r} is invalid; {fix}")

    def check_keys(self, allowed: Iterable[str]) -> None:
        """Reject keys not in ``allowed`` with a did-you-mean hint."""
        choices = tuple(allowed)
        for key in self.table:
            if key not in choices:
                where = f"{self.where} " if self.where else ""
                raise ConfigError(
                    f"{self.source}: unknown key {where}{key!r}; {suggest(key, choices)}"
                )

    def sub(self, key: str, *, where: str | None = None, fix: str | None = None) -> Table:
        """The sub-table ``key`` (an empty one when absent)."""
        name = where if where is not None else (
            f"[{self.where.strip('[]')}.{key}]" if self.where else f"[{key}]"
        )
        return Table(self.table.get(key, {}), where=name, source=self.source, fix=fix)

    def string(self, key: str, default: str | None = None, *, required: bool = False,
               fix: str | None = None) -> str | None:
        """A string value (``None`` when absent and no default)."""
        if key not in self.table:
            if required:
                raise ConfigError(
                    f"{self.source}: {self.at(key)} is required; add {key} = \"...\""
                )
            return default
        value = self.table[key]
        if not isinstance(value, str):
            raise self.fail(key, value, fix or f"write it as a string, e.g. {key} = \"...\"")
        return value

    def boolean(self, key: str, default: bool | None = None) -> bool | None:
        """``true`` or ``false``."""
        if key not in self.table:
            return default
        value = self.table[key]
        if not isinstance(value, bool):
            raise self.fail(key, value, f"write true or false, e.g. {key} = true")
        return value

    def number(
        self, key: str, default: float | None, *, low: float = -math.inf,
        high: float = math.inf, low_open: bool = False, high_open: bool = False,
        example: str = "1",
    ) -> float | None:
        """A finite int/float between ``low`` and ``high`` (ends open when asked)."""
        if key not in self.table:
            return default
        value = self.table[key]
        ok = is_number(value) and math.isfinite(value)
        if ok:
            below = value <= low if low_open else value < low
            above = value >= high if high_open else value > high
            ok = not (below or above)
        if not ok:
            span = (f"{'(' if low_open or low == -math.inf else '['}{_bound(low)}, "
                    f"{_bound(high)}{')' if high_open or high == math.inf else ']'}")
            raise self.fail(key, value, f"use a number in {span}, e.g. {key} = {example}")
        return float(value)

    def integer(
        self, key: str, default: int | None, *, low: int, example: str = "1"
    ) -> int | None:
        """A whole number ``>= low``."""
        if key not in self.table:
            return default
        value = self.table[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(key, value, f"use a whole number >= {low}, e.g. {key} = {example}")
        return value

    def choice(self, key: str, default: str, choices: Iterable[str], *, what: str) -> str:
        """One of ``choices`` (``what`` names the kind in the message: ``gate mode``)."""
        options = tuple(choices)
        if key not in self.table:
            return default
        value = self.table[key]
        if value not in options:
            hint = close_match(str(value), options)
            mean = f"did you mean {hint!r}? " if hint else ""
            raise self.fail(key, value, f"not a {what}; {mean}use one of: {', '.join(options)}")
        return str(value)

    def string_table(self, key: str) -> dict[str, str]:
        """A table whose values are all strings (e.g. HTTP headers)."""
        if key not in self.table:
            return {}
        value = self.table[key]
        if not isinstance(value, Mapping):
            raise self.fail(key, value, f"write it as a table, e.g. {key} = {{ X-Team = \"qa\" }}")
        out: dict[str, str] = {}
        for name, item in value.items():
            if not isinstance(item, str):
                raise ConfigError(
                    f"{self.source}: {self.at(key)}.{name} = {item!r} is invalid; header "
                    "values are strings, e.g. \"Bearer ${MY_TOKEN}\""
                )
            out[str(name)] = item
        return out


def check_placeholders(
    table: Table, key: str, template: str, *, allowed: Iterable[str],
    required: Iterable[str] = (),
) -> None:
    """Every ``{name}`` in ``template`` must be in ``allowed``; every ``required`` present."""
    choices = tuple(allowed)
    found = _PLACEHOLDER.findall(template)
    for name in found:
        if name not in choices:
            match = close_match(name, choices)
            hint = f"did you mean '{{{match}}}'?" if match else suggest(name, choices)
            raise table.fail(key, template, f"unknown placeholder {{{name}}}, {hint}")
    for name in required:
        if name not in found:
            raise table.fail(key, template, f"it must contain the {{{name}}} placeholder")


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` placeholders by plain substitution (braces in values stay as they are)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` applied; nested tables merge key by key."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys for nested tables: ``{"chat": {"model": "x"}}`` -> ``{"chat.model": "x"}``."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two nested tables, sorted.

    A key present on one side only counts as changed.
    """
    before, after = flatten(old), flatten(new)
    return sorted(key for key in before.keys() | after.keys()
                  if key not in before or key not in after or before[key] != after[key])
