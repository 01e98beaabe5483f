"""Checked reads of a parsed JSON document: the saved files' one-line errors.

A baseline file and a saved JSON report are read back by the gate and the ``ragev
report`` command; a hand edit, a merge conflict or another tool can leave anything in
them. Every read goes through a :class:`Checked`, so every problem reads the same way:
the file, the key (``base.questions[3].metrics.recall (qid 4)``), what is there, what
should be, and the fix the kind of file calls for::

    ragev-baseline.json: base.questions is a dict, not a list; the file is damaged: ...
    r.json: data.samples[1].metrics.mrr (qid 2) is 5.0, not a number in [0, 1]

(``ragev.toml`` tables have their own reader, :class:`~pytest_ragev.core.tables.Table`:
their keys are optional, with defaults and a did-you-mean.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from pytest_ragev.core.results import metric_value_problem
from pytest_ragev.core.types import BUILTIN_METRICS

#: Makes the exception a reader raises from its one-line message.
ErrorFactory = Callable[[str], Exception]

_BOUNDED = frozenset(BUILTIN_METRICS)


def kind(value: Any) -> str:
    """``null``, ``a dict``, ``a str``: what a value is, as an error names it."""
    return "null" if value is None else f"a {type(value).__name__}"


class Checked:
    """Typed access to one parsed JSON document.

    ``source`` names the file first in every message; ``error`` makes the exception;
    ``fix`` ends every message (``None``: nothing added). ``prefix`` starts it (the
    gate's lines start ``ragev: ``).
    """

    def __init__(self, source: str, *, error: ErrorFactory, fix: str | None = None,
                 prefix: str = "") -> None:
        self.source = source
        self._error = error
        self._fix = fix
        self._prefix = prefix

    def fail(self, where: str, problem: str) -> Exception:
        """The error for ``where`` (``data.samples[3]``) holding something wrong."""
        tail = f"; {self._fix}" if self._fix else ""
        return self._error(f"{self._prefix}{self.source}: {where} {problem}{tail}")

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"is {kind(value)}, not an object")
        return value

    def listing(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"is {kind(value)}, not a list")
        return value

    def key(self, table: Mapping[str, Any], key: str, where: str | None = None) -> Any:
        """The value of a required ``key``."""
        if key not in table:
            raise self.fail(where or key, "is missing")
        return table[key]

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, f"is {json.dumps(value)[:60]}, not a string")
        return value

    def strings(self, value: Any, where: str) -> list[str]:
        items = self.listing(value, where)
        if not all(isinstance(item, str) for item in items):
            raise self.fail(where, "is not a list of strings")
        return list(items)

    def count(self, value: Any, where: str) -> int:
        """A whole number >= 0 (never a bool)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(where, f"is {value!r}, not a count")
        return value

    def optional_count(self, value: Any, where: str) -> int | None:
        return None if value is None else self.count(value, where)

    def integers(self, value: Any, where: str) -> list[int]:
        """A list of whole numbers (ids)."""
        # The common case first, by exact types (bool is not int here): a 100k-question
        # baseline holds millions of ids, and isinstance goes through the ABC machinery.
        if type(value) is list and all(type(x) is int for x in value):
            return value
        if not isinstance(value, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in value
        ):
            raise self.fail(where, f"is {json.dumps(value)[:60]}, not a list of integers")
        return list(value)

    def number(self, value: Any, where: str) -> float:
        """A finite number."""
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value)):
            raise self.fail(where, f"is {json.dumps(value)[:60]}, not a number")
        return float(value)

    def optional_number(self, value: Any, where: str) -> float | None:
        return None if value is None else self.number(value, where)

    def metric_value(self, value: Any, where: str, name: str) -> float:
        """A value (or mean) of metric ``name``: a number in [0, 1] for a built-in
        metric, a finite one for a custom metric.

        ``json`` reads ``NaN`` and ``Infinity``, which a hand edit (or another tool) can
        leave behind; a NaN per-question value would drop the question from the paired
        comparison without a word, so it is refused like any other damage.
        """
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, f"is {json.dumps(value)[:60]}, not a number")
        problem = metric_value_problem(name, float(value))
        if problem is not None:
            raise self.fail(where, problem)
        return float(value)

    def metric_values(self, values: Mapping[str, Any], where: Callable[[str], str]) -> None:
        """Every value of ``values`` (metric name -> value) checked as
        :meth:`metric_value` checks one; ``where(name)`` names the place of a bad one.

        A merged 100,000-question run reads 1.2 million values: the place is written only
        for a value that fails, and a plain float in range passes with two comparisons
        (a NaN fails both, so it takes the full check and its message).
        """
        for name, value in values.items():
            if type(value) is float and (0.0 <= value <= 1.0 if name in _BOUNDED
                                         else -math.inf < value < math.inf):
                continue
            self.metric_value(value, where(name), name)
