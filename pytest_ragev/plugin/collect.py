"""The test items: one per QA pair (and per variant), with stable ids.

Node ids are ``<config file>::<dataset id>::q<qid>`` for the base configuration and
``<config file>::<dataset id>::<variant>::q<qid>`` for a variant, built in qid order, so
every xdist worker collects the identical list.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.types import QAPair

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from pytest_ragev.plugin.session import RagevSession


class RagevFile(pytest.File):
    """The ``ragev.toml`` given to ``--ragev-config``, collected as a test file."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        ragev = _ragev(self.config)
        yield RagevDataset.from_parent(self, name=ragev.dataset_id)


class RagevDataset(pytest.Collector):
    """The dataset: the base configuration's items, then one collector per variant."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        ragev = _ragev(self.config)
        for variant in ragev.selected_variants():
            if variant is None:
                yield from _items(self, ragev, None)
            else:
                yield RagevVariant.from_parent(self, name=variant)


class RagevVariant(pytest.Collector):
    """One ``[[variants]]`` entry: the dataset again, with that variant's pipeline."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield from _items(self, _ragev(self.config), self.name)


def _items(parent: pytest.Collector, ragev: RagevSession, variant: str | None) -> Iterator[
    RagevItem
]:
    for case in ragev.cases():
        yield RagevItem.from_parent(parent, name=f"q{case.qid}", case=case, variant=variant)


class PipelineFailed(Exception):
    """The pipeline raised for one question; the item fails with this."""

    def __init__(self, qid: int, error: BaseException) -> None:
        super().__init__(f"q{qid}: pipeline raised {type(error).__name__}: {error}")
        self.qid = qid
        self.error = error


class RagevItem(pytest.Item):
    """Runs the configured pipeline for one question and records its MetricInput."""

    def __init__(self, *, case: QAPair, variant: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.variant = variant

    def runtest(self) -> None:
        ragev = _ragev(self.config)
        ragev.run_case(self, self.case, self.variant)

    def repr_failure(
        self, excinfo: ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, PipelineFailed):
            inner = excinfo.value.error
            if isinstance(inner, RagevError):
                # Our own errors (bad settings, HTTP failures of the remote clients) are
                # one line naming the problem and the fix. No traceback: its frame locals
                # (`pytest -l`) would show request headers and the API key.
                return str(excinfo.value)
            with _frames_hidden_from_our_errors(inner):
                tb = super().repr_failure(
                    excinfo.__class__.from_exception(inner), style="short"
                )
                shown = str(tb)
            return f"{excinfo.value}\n{shown}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        label = f"q{self.case.qid}" + (f" [{self.variant}]" if self.variant else "")
        return self.path, None, f"ragev {label}: {self.case.question[:60]}"


@contextlib.contextmanager
def _frames_hidden_from_our_errors(error: BaseException) -> Iterator[None]:
    """While rendering, drop the traceback of every chained link from our first error on.

    A user's exception keeps its traceback, but when it wraps one of ours (a conftest
    that catches the chat client's ``PipelineError`` and raises its own), the chained
    part would show our frames and, under ``pytest -l``, their locals: headers, keys.
    pytest renders a link without a traceback as its one-line message.
    """
    hidden: list[tuple[BaseException, Any]] = []
    seen: set[int] = set()
    ours = False
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        ours = ours or isinstance(link, RagevError)
        if ours and link.__traceback__ is not None:
            hidden.append((link, link.__traceback__))
            link.__traceback__ = None
        if link.__cause__ is not None:
            link = link.__cause__
        else:
            link = None if link.__suppress_context__ else link.__context__
    try:
        yield
    finally:
        for link, traceback in hidden:
            link.__traceback__ = traceback


def _ragev(config: pytest.Config) -> RagevSession:
    from pytest_ragev.plugin.keys import ragev_session_key

    return config.stash[ragev_session_key]
