"""Checked reads of TOML keys: every failure is a one-line :class:`ConfigError`."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_ragev.config import suggest
from pytest_ragev.core.errors import ConfigError

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Options:
    """Reads the keys of one TOML table (``where`` like ``[pipeline.chat]``) with checks."""

    def __init__(self, table: Mapping[str, Any], *, where: str, source: Path | str) -> None:
        if not isinstance(table, Mapping):
            raise ConfigError(
                f"{source}: {where} must be a table, got {type(table).__name__}; "
                f"write it as {where} with keys below it"
            )
        self.table = table
        self.where = where
        self.source = source

    def fail(self, key: str, value: Any, fix: str) -> ConfigError:
        """The error for a bad ``key = value``, with ``fix`` telling what to write."""
        return ConfigError(f"{self.source}: {self.where} {key} = {value!r} is invalid; {fix}")

    def check_keys(self, allowed: Iterable[str]) -> None:
        """Reject keys not in ``allowed`` with a did-you-mean hint."""
        choices = tuple(allowed)
        for key in self.table:
            if key not in choices:
                raise ConfigError(
                    f"{self.source}: unknown key {self.where} {key!r}; {suggest(key, choices)}"
                )

    def string(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        """A string value (``None`` when absent and no default)."""
        if key not in self.table:
            if required:
                raise ConfigError(
                    f"{self.source}: {self.where} {key} is required; add {key} = \"...\""
                )
            return default
        value = self.table[key]
        if not isinstance(value, str):
            raise self.fail(key, value, f"write it as a string, e.g. {key} = \"...\"")
        return value

    def number(
        self, key: str, default: float | None, *, low: float, high: float = math.inf,
        low_open: bool = False, example: str = "1",
    ) -> float | None:
        """A finite int/float in ``[low, high]`` (``(low, high]`` when ``low_open``)."""
        if key not in self.table:
            return default
        value = self.table[key]
        bad_type = isinstance(value, bool) or not isinstance(value, int | float)
        if bad_type or not math.isfinite(value) or value > high or value < low or (
            low_open and value == low
        ):
            span = f"{'(' if low_open else '['}{low:g}, {high:g}]"
            raise self.fail(key, value, f"use a number in {span}, e.g. {key} = {example}")
        return float(value)

    def integer(self, key: str, default: int | None, *, low: int, example: str = "1") -> int | None:
        """An integer ``>= low``."""
        if key not in self.table:
            return default
        value = self.table[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(key, value, f"use a whole number >= {low}, e.g. {key} = {example}")
        return value

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
                    f"{self.source}: {self.where} {key}.{name} = {item!r} is invalid; header "
                    "values are strings, e.g. \"Bearer ${MY_TOKEN}\""
                )
            out[str(name)] = item
        return out


def check_placeholders(
    options: Options, key: str, template: str, *, allowed: Iterable[str],
    required: Iterable[str] = (),
) -> None:
    """Every ``{name}`` in ``template`` must be in ``allowed``; every ``required`` present."""
    choices = tuple(allowed)
    found = _PLACEHOLDER.findall(template)
    for name in found:
        if name not in choices:
            hint = suggest(name, choices).replace("did you mean '", "did you mean '{")
            hint = hint.replace("'?", "}'?")
            raise options.fail(key, template, f"unknown placeholder {{{name}}}, {hint}")
    for name in required:
        if name not in found:
            raise options.fail(key, template, f"it must contain the {{{name}}} placeholder")


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` placeholders by plain substitution (braces in values stay as they are)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)
