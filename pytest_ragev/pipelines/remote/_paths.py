"""A tiny path language into JSON responses: ``data.contexts[*].text``.

Segments are dotted keys; ``[N]`` indexes a list (negative counts from the end);
``[*]`` maps the rest of the path over every item of a list, so the result becomes
a list. Keys may not contain ``.``, ``[`` or ``]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_STEP = re.compile(r"\[(\*|-?\d+)\]")
_KEY = re.compile(r"[^.\[\]]+")


class PathSyntaxError(ValueError):
    """The path text does not follow the grammar."""


class PathMissError(LookupError):
    """The path does not exist in the value; ``at`` is the prefix that failed."""

    def __init__(self, at: str, reason: str) -> None:
        super().__init__(f"{at}: {reason}")
        self.at = at
        self.reason = reason


@dataclass(frozen=True)
class JsonPath:
    """A compiled path: a tuple of steps (``str`` key, ``int`` index, ``None`` for ``[*]``)."""

    text: str
    steps: tuple[str | int | None, ...]

    @property
    def maps(self) -> bool:
        """Whether the path contains ``[*]`` (its result is a list)."""
        return None in self.steps

    @classmethod
    def parse(cls, text: str) -> JsonPath:
        """Compile ``text``; :class:`PathSyntaxError` describes the first bad character."""
        steps: list[str | int | None] = []
        pos = 0
        if not text:
            raise PathSyntaxError("the path is empty")
        while pos < len(text):
            if text[pos] == "[":
                match = _STEP.match(text, pos)
                if match is None:
                    raise PathSyntaxError(
                        f"bad index at character {pos + 1}: write [0], [-1] or [*]"
                    )
                token = match.group(1)
                steps.append(None if token == "*" else int(token))
                pos = match.end()
            else:
                if steps:
                    if text[pos] != ".":
                        raise PathSyntaxError(f"expected '.' or '[' at character {pos + 1}")
                    pos += 1
                match = _KEY.match(text, pos)
                if match is None:
                    raise PathSyntaxError(f"expected a key at character {pos + 1}")
                steps.append(match.group(0))
                pos = match.end()
        return cls(text=text, steps=tuple(steps))

    def get(self, value: Any) -> Any:
        """The value at this path; :class:`PathMissError` when a step does not exist."""
        return self._walk(value, 0, "")

    def _walk(self, value: Any, index: int, done: str) -> Any:
        for position in range(index, len(self.steps)):
            step = self.steps[position]
            if step is None:
                where = done + "[*]"
                if not isinstance(value, list):
                    raise PathMissError(where, f"expected a list, found {_kind(value)}")
                return [self._walk(item, position + 1, f"{done}[{i}]")
                        for i, item in enumerate(value)]
            if isinstance(step, int):
                where = f"{done}[{step}]"
                if not isinstance(value, list):
                    raise PathMissError(where, f"expected a list, found {_kind(value)}")
                if not -len(value) <= step < len(value):
                    raise PathMissError(where, f"the list has {len(value)} item(s)")
                value = value[step]
                done = where
            else:
                where = f"{done}.{step}" if done else step
                if not isinstance(value, Mapping):
                    raise PathMissError(where, f"expected an object, found {_kind(value)}")
                if step not in value:
                    keys = ", ".join(sorted(map(str, value))) or "none"
                    raise PathMissError(where, f"no key {step!r} (keys there: {keys})")
                value = value[step]
                done = where
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__} ({str(value)[:40]!r})"
