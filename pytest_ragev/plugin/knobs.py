"""Knobs that change nothing, warned about: the built-in pipeline's its mode never
reads (:func:`unused_builtin_knob_lines`, when the run starts), and those of the
project's own pipeline that no code read (once, at the end).

The conftest hooks and a factory pipeline (``name = "module:callable"``) receive
``settings.options`` as a :class:`~pytest_ragev.core.knobs.KnobOptions`, which records
each key they read. :class:`KnobReads` keeps, per configuration, the keys read and how
many questions the code answered; under pytest-xdist every worker sends its reads to the
controller (:class:`KnobReadsExchange`, through ``workeroutput``), and the controller's
run turns them into warning lines with :func:`unread_knob_lines`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from pytest_ragev.core.knobs import plain_options, tracked
from pytest_ragev.core.redact import redact
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.pipelines import Pipeline
from pytest_ragev.pipelines.builtin import BuiltinPipeline
from pytest_ragev.pipelines.builtin.config import unread_knobs

#: Where a worker puts its reads in ``config.workeroutput``.
WORKER_OUTPUT_KEY = "ragev_knob_reads"
#: Characters of a knob's value the warning shows.
_VALUE_CHARS = 60


class KnobReads:
    """The ``[pipeline]`` keys the project's code read, per configuration (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads: dict[str | None, set[str]] = {}
        self._answered: dict[str | None, int] = {}
        self._handed: dict[str | None, PipelineSettings] = {}

    def track(self, settings: PipelineSettings) -> PipelineSettings:
        """The settings to hand to the project's code: the same object for every call of
        one configuration, its reads recorded here."""
        with self._lock:
            handed = self._handed.get(settings.variant)
            if handed is None:
                reads = self._reads.setdefault(settings.variant, set())
                handed = self._handed[settings.variant] = tracked(settings, reads)
            return handed

    def mark(self, variant: str | None, keys: Iterable[str]) -> None:
        """Count ``keys`` as read for ``variant`` (the plugin used them on its behalf)."""
        with self._lock:
            self._reads.setdefault(variant, set()).update(keys)

    def answered(self, variant: str | None) -> None:
        """One question of ``variant`` was answered by a pipeline call (not the cache)."""
        with self._lock:
            self._answered[variant] = self._answered.get(variant, 0) + 1

    def reads(self, variant: str | None) -> frozenset[str]:
        """The keys read for ``variant``."""
        with self._lock:
            return frozenset(self._reads.get(variant, ()))

    def answers(self, variant: str | None) -> int:
        """How many of ``variant``'s questions a pipeline call answered."""
        with self._lock:
            return self._answered.get(variant, 0)

    def to_json(self) -> list[list[Any]]:
        """``[[variant, [keys read], answered], ...]``: plain data for the xdist channel."""
        with self._lock:
            variants = sorted(self._reads.keys() | self._answered.keys(),
                              key=lambda v: (v is not None, v or ""))
            return [[v, sorted(self._reads.get(v, ())), self._answered.get(v, 0)]
                    for v in variants]

    def merge(self, data: Any) -> None:
        """Add a worker's :meth:`to_json` (anything else is ignored: a worker of another
        version of the plugin must not break the controller's summary)."""
        if not isinstance(data, list):
            return
        for entry in data:
            if not (isinstance(entry, list) and len(entry) == 3):
                continue
            variant, keys, answered = entry
            if not (variant is None or isinstance(variant, str)) or not isinstance(keys, list):
                continue
            self.mark(variant, (key for key in keys if isinstance(key, str)))
            if isinstance(answered, int) and answered > 0:
                with self._lock:
                    self._answered[variant] = self._answered.get(variant, 0) + answered


class KnobReadsExchange:
    """Sends a worker's reads to the controller: ``workeroutput`` at the worker's session
    finish, read back in ``pytest_testnodedown`` (an xdist hook: optional, so the object
    registers without pytest-xdist too)."""

    def __init__(self, reads: KnobReads, *, is_worker: bool) -> None:
        self._reads = reads
        self._is_worker = is_worker

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self._is_worker:
            output = getattr(session.config, "workeroutput", None)
            if output is not None:
                output[WORKER_OUTPUT_KEY] = self._reads.to_json()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None)
        if isinstance(output, Mapping):
            self._reads.merge(output.get(WORKER_OUTPUT_KEY))


def _shown(key: str, value: Any) -> str:
    """The value as the warning shows it: secrets hidden, shortened."""
    text = repr(redact({key: value})[key])
    return text if len(text) <= _VALUE_CHARS else text[:_VALUE_CHARS - 1] + "…"


def unread_knob_lines(
    *,
    variants: Sequence[str | None],
    settings: Callable[[str | None], PipelineSettings],
    overrides: Mapping[str, Mapping[str, Any]],
    reads: KnobReads,
    who: Callable[[str | None], str | None],
    source: str,
) -> list[str]:
    """One warning per ``[pipeline]`` key that the project's code never read.

    Only configurations whose questions the project's code answered count (``who``
    names that code as the reports name it, ``conftest hooks (conftest.py)`` or
    ``pkg.module:make``; ``None`` for the plugin's own pipelines, which check their
    knobs themselves), and only when at least one answer came from a call: a rerun served
    from the cache ran no code. A key of the base table is warned about when no such
    configuration read it; a key a variant sets (``overrides``) when that variant did
    not read it.
    """
    ran = [v for v in variants if who(v) is not None and reads.answers(v) > 0]
    if not ran:
        return []
    lines: list[str] = []
    base = plain_options(settings(None).options)
    read_anywhere = frozenset().union(*(reads.reads(v) for v in ran))
    names = " or ".join(dict.fromkeys(str(who(v)) for v in ran))
    warned = set()
    for key, value in base.items():
        if key not in read_anywhere:
            warned.add(key)
            lines.append(f"{source}: [pipeline] {key} = {_shown(key, value)} was never read "
                         f"by {names}; remove it or read it")
    for variant in ran:
        if variant is None:
            continue
        done = reads.reads(variant)
        for key, value in overrides.get(variant, {}).items():
            if key == "name" or key in done or key in warned:
                continue
            lines.append(f"{source}: variant {variant!r}: pipeline.{key} = "
                         f"{_shown(key, value)} was never read by {who(variant)}; "
                         "remove it or read it")
    return lines


def unused_builtin_knob_lines(
    pipelines: Sequence[tuple[PipelineSettings, Pipeline]], *, source: str,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """One warning per knob of the built-in pipeline that its mode never reads, for
    ``pipelines`` (each configuration's settings and pipeline, the base first; other
    pipelines are skipped). A conftest's knobs are the conftest's business: nothing
    can be known about them, so a run the project's hooks answer passes none.

    ``overrides`` holds each variant's own ``pipeline`` keys: a knob a variant only
    inherits from ``[pipeline]`` is not the variant's to remove, and its line says so."""
    lines: list[str] = []
    warned: set[str] = set()
    for settings, pipe in pipelines:
        if not isinstance(pipe, BuiltinPipeline):
            continue
        variant = settings.variant
        for key, why in unread_knobs(pipe.config, settings.options):
            if key in warned:
                continue  # the base configuration's line covers the variants that inherit it
            value = settings.options[key]
            if variant is None:
                warned.add(key)
                lines.append(f"{source}: [pipeline] {key} = {value!r} has no effect: {why}; "
                             "remove it")
            elif overrides is not None and key not in overrides.get(variant, {}):
                lines.append(f"{source}: variant {variant!r}: [pipeline] {key} = {value!r}, "
                             f"which it inherits, has no effect in it: {why} (nothing to "
                             "remove: the base configuration reads it)")
            else:
                lines.append(f"{source}: variant {variant!r}: pipeline.{key} = {value!r} has "
                             f"no effect: {why}; remove it")
    return lines


def same_as_base_lines(
    configurations: Sequence[PipelineSettings], *, source: str
) -> list[str]:
    """One warning per variant whose pipeline settings equal the base configuration's:
    it measures the same thing again (``configurations``: the base first)."""
    if not configurations or configurations[0].variant is not None:
        return []
    base = configurations[0]
    return [f"{source}: variant {settings.variant!r} is the same as the base configuration "
            "(its pipeline keys change nothing); give it a value that differs, or remove it"
            for settings in configurations[1:]
            if settings.name == base.name and dict(settings.options) == dict(base.options)]
