"""The test items: one per QA pair (and per variant), with stable ids built and parsed here.

Node ids are ``<config file>::<dataset id>::q<qid>`` for the base configuration and
``<config file>::<dataset id>::<variant>::q<qid>`` for a variant, built in qid order, so
every xdist worker collects the identical list. A hand-written test parametrized by the
``ragev_case`` fixture carries ``q<qid>`` as one dash-separated part of its parameter id
(``test_answer[q17]``). :class:`NodeIds` is the one place that knows both shapes.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.record import QuestionKey
from pytest_ragev.core.types import QAPair

if TYPE_CHECKING:
    # Types only: the rendering classes pytest passes to repr_failure.
    from _pytest._code.code import ExceptionInfo, TerminalRepr

# ``q17`` as one dash-separated part of a parametrize id: ``test_rag[q17]``, ``[q17-x]``.
_PARAM_QID = re.compile(r"\[(?:.*-)?q(\d+)(?:-.*)?\]$")
# The last part of a generated item's node id, as :meth:`NodeIds.item_name` writes it.
_ITEM_NAME = re.compile(r"q(-?[0-9]+)")
#: What pytest puts between the parts of a node id.
SEPARATOR = "::"
#: The last part of the verdict's node id (``ragev.toml::mini::verdict``).
VERDICT = "verdict"


@dataclass(frozen=True)
class NodeIds:
    """Builds and parses the node ids of a run's questions and of its verdict.

    ``prefix`` is the config file as pytest names it (relative to the rootdir),
    ``dataset_id`` the name of the dataset's collector under it, ``qids`` the dataset's
    question ids (a node id naming another qid is not a question). The dataset id is
    matched whole, so one that holds ``::`` or brackets (a folder name) still parses.
    """

    prefix: str
    dataset_id: str
    qids: Collection[int]

    @classmethod
    def of(
        cls, source: Path, rootpath: Path, dataset_id: str, qids: Collection[int]
    ) -> NodeIds:
        """The node ids of the config file ``source`` under ``rootpath``."""
        try:
            prefix = source.relative_to(rootpath).as_posix()
        except ValueError:
            prefix = source.as_posix()
        return cls(prefix=prefix, dataset_id=dataset_id, qids=qids)

    @staticmethod
    def item_name(qid: int) -> str:
        """The last part of a question's node id, and its parametrize id: ``q17``."""
        return f"q{qid}"

    @staticmethod
    def argument_path(arg: str) -> str:
        """The file part of a command-line argument: ``ragev.toml::mini::q3`` ->
        ``ragev.toml`` (an argument without ``::`` is all path)."""
        return arg.split(SEPARATOR, 1)[0]

    @property
    def _dataset_node(self) -> str:
        return f"{self.prefix}{SEPARATOR}{self.dataset_id}{SEPARATOR}"

    def generated_id(self, qid: int, variant: str | None = None) -> str:
        """The node id of the generated item of question ``qid`` (of ``variant``):
        ``<config>::<dataset>::q17`` or ``<config>::<dataset>::<variant>::q17``."""
        middle = f"{variant}{SEPARATOR}" if variant is not None else ""
        return f"{self._dataset_node}{middle}{self.item_name(qid)}"

    def verdict(self) -> str:
        """The node id of the run's verdict, reported as a test of its own:
        ``<config>::<dataset>::verdict``."""
        return f"{self._dataset_node}{VERDICT}"

    def generated(self, nodeid: str) -> QuestionKey | None:
        """The question of a generated item's node id, or ``None``."""
        if not nodeid.startswith(self._dataset_node):
            return None
        # [<variant>::]q<qid>; variant names hold no "::" (config.py checks them).
        *variant, last = nodeid[len(self._dataset_node):].split(SEPARATOR)
        match = _ITEM_NAME.fullmatch(last)
        if match is None or len(variant) > 1 or variant == [""]:
            return None
        qid = int(match.group(1))
        if self.item_name(qid) != last or qid not in self.qids:
            return None  # "q017" is no name this class gives
        return (variant[0] if variant else None, qid)

    def question(self, nodeid: str) -> QuestionKey | None:
        """The question of any node id: a generated item, or a test parametrized by
        ``ragev_case``; ``None`` for every other test and for the verdict."""
        if nodeid.startswith(self.prefix + SEPARATOR):
            return self.generated(nodeid)  # under the config file: never a user's test
        match = _PARAM_QID.search(nodeid)
        if match is None or int(match.group(1)) not in self.qids:
            return None
        return (None, int(match.group(1)))


def item_question(item: pytest.Item) -> QuestionKey | None:
    """The question a collected item answers: a generated item, or a ragev_case test."""
    if isinstance(item, RagevItem):
        return (item.variant, item.case.qid)
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("ragev_case") if callspec is not None else None
    return (None, case.qid) if isinstance(case, QAPair) else None


#: Answers one question for an item: ``(item, case, variant) -> None`` (raises
#: :class:`PipelineFailed` when the pipeline did).
RunCase = Callable[["RagevItem", QAPair, "str | None"], None]


@dataclass(frozen=True)
class CollectionPlan:
    """What the collectors need: the dataset id, the questions, the selected variants,
    and how an item answers its question."""

    dataset_id: str
    cases: tuple[QAPair, ...]
    variants: tuple[str | None, ...]
    run_case: RunCase


#: What the collectors and items read, made on first use (the session puts it here).
collection_key: pytest.StashKey[Callable[[], CollectionPlan]] = pytest.StashKey()


def _plan(config: pytest.Config) -> CollectionPlan:
    return config.stash[collection_key]()


class RagevFile(pytest.File):
    """The ``ragev.toml`` given to ``--ragev-config``, collected as a test file."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield RagevDataset.from_parent(self, name=_plan(self.config).dataset_id)


class RagevDataset(pytest.Collector):
    """The dataset: the base configuration's items, then one collector per variant."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        plan = _plan(self.config)
        for variant in plan.variants:
            if variant is None:
                yield from _items(self, plan, None)
            else:
                yield RagevVariant.from_parent(self, name=variant)


class RagevVariant(pytest.Collector):
    """One ``[[variants]]`` entry: the dataset again, with that variant's pipeline."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield from _items(self, _plan(self.config), self.name)


def _items(
    parent: pytest.Collector, plan: CollectionPlan, variant: str | None
) -> Iterator[RagevItem]:
    for case in plan.cases:
        yield RagevItem.from_parent(parent, name=NodeIds.item_name(case.qid), case=case,
                                    variant=variant)


class PipelineFailed(Exception):
    """The pipeline raised for one question; the item fails with this."""

    def __init__(self, qid: int, error: BaseException) -> None:
        super().__init__(f"q{qid}: pipeline raised {type(error).__name__}: {error}")
        self.qid = qid
        self.error = error


class QuestionFailed(Exception):
    """The question was answered but fails: a per-question floor, or a misbehaving
    custom metric. The item fails with these one-line reasons, without a traceback."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class RagevItem(pytest.Item):
    """Runs the configured pipeline for one question and records its answer."""

    def __init__(self, *, case: QAPair, variant: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.variant = variant

    def runtest(self) -> None:
        _plan(self.config).run_case(self, self.case, self.variant)

    def repr_failure(
        self, excinfo: ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, QuestionFailed):
            return str(excinfo.value)
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
