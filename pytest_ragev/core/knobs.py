"""The ``[pipeline]`` table handed to the project's code, recording which keys it reads.

A knob that no code reads is a setting that measures nothing: a variant that sets it
changes no answer, yet looks like an experiment. The conftest hooks and a factory
pipeline receive ``settings.options`` as a :class:`KnobOptions`, which records each key
the code looks up (``options["k"]``, ``options.get("k")``, ``"k" in options``) in a set
the plugin holds. Code that takes the whole table (``dict(options)``, ``**options``,
``options.items()``, ``json.dumps(options)``, a pickle or a copy) counts as reading
every key: the plugin cannot see what it does with them afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from pytest_ragev.core.types import PipelineSettings

_READ_ONLY = ("settings.options is read-only (it is the [pipeline] table of ragev.toml); "
              "copy it first: options = dict(settings.options)")


class KnobOptions(dict[str, Any]):
    """A read-only ``[pipeline]`` table that adds each key read to ``reads``.

    A ``dict`` (``isinstance(options, dict)``, ``json.dumps`` and ``pickle`` work as
    before) whose mutating methods raise ``TypeError``: the table is the run's
    configuration, the same for every question. ``reads`` is shared by every copy handed
    out for one configuration; ``None`` records nothing (an unpickled table). Adding to
    a set is atomic, so pipeline threads may read at once.
    """

    __slots__ = ("_reads",)

    def __init__(self, data: Mapping[str, Any] | None = None,
                 reads: set[str] | None = None) -> None:
        super().__init__(data or {})
        self._reads = reads

    # -- reads of one key
    def _read(self, key: object) -> None:
        if self._reads is not None and isinstance(key, str):
            self._reads.add(key)

    def _read_all(self) -> None:
        if self._reads is not None:
            self._reads.update(dict.keys(self))

    def __getitem__(self, key: str) -> Any:
        self._read(key)
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        self._read(key)
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        self._read(key)
        return dict.__contains__(self, key)

    # -- reads of the whole table
    def __iter__(self) -> Iterator[str]:
        # Defined here so that dict(options) and {**options} take the slow path, which
        # reads each key through __getitem__, instead of copying the storage unseen.
        return dict.__iter__(self)

    def items(self) -> Any:
        self._read_all()
        return dict.items(self)

    def values(self) -> Any:
        self._read_all()
        return dict.values(self)

    def copy(self) -> dict[str, Any]:
        """A plain, writable ``dict`` of the table (every key counts as read)."""
        self._read_all()
        return self.plain()

    def __or__(self, other: Any) -> dict[str, Any]:  # type: ignore[override]
        return {**self.copy(), **other}

    def __ror__(self, other: Any) -> dict[str, Any]:  # type: ignore[override]
        return {**other, **self.copy()}

    def __reduce__(self) -> tuple[Any, ...]:
        # A pickled table goes where reads cannot be seen: every key counts as read.
        self._read_all()
        return (KnobOptions, (self.plain(),))

    def plain(self) -> dict[str, Any]:
        """A plain ``dict`` of the table that records no read (for the plugin's own use:
        snapshots, cache keys, ``repr``)."""
        return {key: dict.__getitem__(self, key) for key in dict.keys(self)}

    # -- no writes
    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __ior__(self, other: Any) -> NoReturn:
        self._refuse()


def plain_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as a plain ``dict``, without recording a read of a :class:`KnobOptions`."""
    if isinstance(options, KnobOptions):
        return options.plain()
    return dict(options)


def tracked(settings: PipelineSettings, reads: set[str]) -> PipelineSettings:
    """``settings`` whose ``options`` record each key read into ``reads``."""
    return replace(settings, options=KnobOptions(plain_options(settings.options), reads))


def untracked(settings: PipelineSettings) -> PipelineSettings:
    """``settings`` with ``options`` that record nothing (the plugin's own pipelines)."""
    if not isinstance(settings.options, KnobOptions):
        return settings
    return replace(settings, options=settings.options.plain())
