"""``RagevSession``: the plugin object of a pytest run with a ragev config.

It holds the resolved settings and decides *when* the run becomes active: at session
start when the run collects the config file (or under xdist), otherwise only when
collection finds a test that uses the ``ragev_case`` fixture (``pytest tests/unit`` with
the ini twin set loads no dataset). The active part, :class:`~pytest_ragev.plugin.run.ActiveRun`,
is made by the ``start_run`` factory the entry module passes in, so this module imports
nothing heavy.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_ragev.config import RagevConfig, RunOptions, select_variants, variant_settings
from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.tables import changed_keys
from pytest_ragev.plugin.collect import (
    CollectionPlan,
    NodeIds,
    RagevFile,
    collection_key,
    item_question,
)
from pytest_ragev.plugin.gcfreeze import CollectionFreeze

if TYPE_CHECKING:
    from pytest_ragev.plugin.run import ActiveRun

#: Makes the active part of a run (see :mod:`pytest_ragev.plugin.run`).
StartRun = Callable[[pytest.Config, RagevConfig, RunOptions], "ActiveRun"]


class RagevSession:
    """State of one pytest run with a ragev config; registered as a plugin."""

    def __init__(
        self, config: pytest.Config, ragev: RagevConfig, options: RunOptions,
        start_run: StartRun,
    ) -> None:
        self.config = config
        self.ragev = ragev
        self.options = options
        self.is_worker = hasattr(config, "workerinput")
        self._start_run = start_run
        self._run: ActiveRun | None = None
        self._deferred = False
        self._freeze = CollectionFreeze()
        config.stash[collection_key] = self._collection_plan

    @property
    def run(self) -> ActiveRun:
        """The active part of the run, created (and its plugins registered) on first use."""
        if self._run is None:
            self._run = self._start_run(self.config, self.ragev, self.options)
            self._run.register()
        return self._run

    @property
    def started(self) -> ActiveRun | None:
        """The active part if the run has one yet."""
        return self._run

    def _collection_plan(self) -> CollectionPlan:
        return self.run.collection_plan()

    # ------------------------------------------------------------------ activation
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self._reaches_config_file():
            self.run.activate(session)
        else:
            # e.g. `pytest tests/unit` with the ini twin set: most likely no question runs,
            # so the dataset is loaded (and the run validated) only if collection finds a
            # ragev_case test (see pytest_collection_finish).
            self._deferred = True

    def _reaches_config_file(self) -> bool:
        """Whether the run collects the config file (or runs under xdist: always eager)."""
        if self.is_worker or getattr(self.config.option, "dist", "no") != "no":
            return True  # validate before xdist starts workers, so a bad config is one line
        base = self.config.invocation_params.dir
        for arg in self.config.args:
            path = (base / NodeIds.argument_path(arg)).resolve()
            if path == self.ragev.source or path in self.ragev.source.parents:
                return True
        return False

    # ------------------------------------------------------------------ collection
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        # Warnings raised here are recorded by pytest's warnings plugin (-W and
        # filterwarnings apply), with the config file as their location.
        if self.is_worker or self._deferred:
            return
        try:
            variants = select_variants(self.ragev, self.options.variants)
        except RagevError as exc:
            raise pytest.UsageError(str(exc)) from None
        for name in variants:
            if name is not None:
                self._warn_variant(name)

    def _warn_variant(self, name: str) -> None:
        base = self.ragev.pipeline.options
        changed = [f"pipeline.{key}" for key in
                   changed_keys(base, variant_settings(self.ragev, name).options)]
        if len(changed) > 1:
            warnings.warn_explicit(
                pytest.PytestWarning(
                    f"ragev: variant {name!r} changes {len(changed)} knobs "
                    f"({', '.join(changed)}); change one variable at a time to know which "
                    "one moved the metrics"
                ),
                category=None,  # taken from the warning instance
                filename=str(self.ragev.source),
                lineno=_variant_line(self.ragev.source, name),
            )

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if file_path.resolve() == self.ragev.source:
            return RagevFile.from_parent(parent, path=file_path)
        return None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "ragev_case" in metafunc.fixturenames:
            cases = self.run.pairs  # a shard's share (--ragev-shard), else every question
            ids = [NodeIds.item_name(case.qid) for case in cases]
            metafunc.parametrize("ragev_case", cases, ids=ids, scope="function")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.is_worker:
            keys = [item_question(item) for item in session.items]
            if self._deferred and any(key is not None for key in keys):
                self._deferred = False
                self.run.activate(session)  # a UsageError here still ends the run with status 4
            if self._run is not None:
                self._run.records.set_collected(
                    zip((item.nodeid for item in session.items), keys, strict=True)
                )
        if self._run is not None and session.items and not self.config.option.collectonly:
            # The items and everything collection made live to the session's end: out
            # of the cyclic collector's full traversals until then (see gcfreeze).
            self._freeze.freeze()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # After the verdict and the reports (the finisher's hooks run first).
        self.thaw()

    def thaw(self) -> None:
        """Hand the objects frozen after collection back to the garbage collector."""
        self._freeze.unfreeze()


#: The session object of a run with a ragev config.
session_key: pytest.StashKey[RagevSession] = pytest.StashKey()


def _variant_line(source: Path, name: str) -> int:
    """The line of variant ``name`` (its ``name =`` key) in the config file; 1 if unknown."""
    try:
        text = source.read_text(encoding="utf-8")
    except OSError:
        return 1
    pattern = re.compile(r"^\s*name\s*=\s*([\"'])" + re.escape(name) + r"\1")
    header = 1
    in_variants = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_variants = stripped.replace(" ", "") == "[[variants]]"
            if in_variants:
                header = number
        elif in_variants and pattern.match(line):
            return number
    return header
