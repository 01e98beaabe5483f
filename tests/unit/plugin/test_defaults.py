"""The knowledge-base build progress: visible without -s, one line on a TTY, no duplicates;
which of the project's hooks answer, and their names."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.plugin.defaults import KbProgress, ProjectHooks

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu"]


class FakeReporter:
    def __init__(self, tty: bool) -> None:
        self.isatty = tty
        self.calls: list[tuple[str, str]] = []

    def ensure_newline(self) -> None:
        self.calls.append(("newline?", ""))

    def rewrite(self, line: str, **markup: bool) -> None:
        assert markup == {"erase": True}
        self.calls.append(("rewrite", line))

    def line(self, text: str) -> None:
        self.calls.append(("line", text))

    def write_line(self, text: str) -> None:
        self.calls.append(("write_line", text))

    def flush(self) -> None:
        pass


class FakeCapture:
    def __init__(self) -> None:
        self.suspended = 0
        self.active = True

    @contextlib.contextmanager
    def global_and_fixture_disabled(self) -> Iterator[None]:
        self.active = False
        self.suspended += 1
        try:
            yield
        finally:
            self.active = True


def drive(progress: KbProgress, total: int) -> None:
    progress(0, total)
    for done in range(total // 100, total, total // 100):
        progress(done, total)
    progress(total, total)
    progress(total, total)  # a stray second final call writes nothing


def test_a_terminal_gets_one_updating_line_ending_in_a_single_newline() -> None:
    reporter, capture = FakeReporter(tty=True), FakeCapture()
    drive(KbProgress(reporter, capture, passages=25_000), 1000)
    rewrites = [text for kind, text in reporter.calls if kind == "rewrite"]
    assert rewrites[0] == "ragev: building knowledge base of 25000 passages ..."
    assert [r for r in rewrites if r.endswith("%")] == [
        f"ragev: building knowledge base of 25000 passages: {p}%" for p in range(1, 100)
    ]
    assert rewrites[-1].startswith("ragev: knowledge base built from 25000 passages in ")
    assert [kind for kind, _ in reporter.calls].count("line") == 1
    assert reporter.calls[-1] == ("line", "")
    assert not any(kind == "write_line" for kind, _ in reporter.calls)
    assert capture.suspended == len(rewrites)


def test_a_log_gets_a_few_lines_and_one_final_line() -> None:
    reporter, capture = FakeReporter(tty=False), FakeCapture()
    drive(KbProgress(reporter, None, passages=30_000), 1000)
    drive(KbProgress(FakeReporter(tty=False), capture, passages=30_000), 1000)
    lines = [text for kind, text in reporter.calls if kind == "write_line"]
    assert lines[:4] == [
        "ragev: building knowledge base of 30000 passages ...",
        "ragev: building knowledge base of 30000 passages: 25%",
        "ragev: building knowledge base of 30000 passages: 50%",
        "ragev: building knowledge base of 30000 passages: 75%",
    ]
    assert len(lines) == 5 and lines[4].startswith("ragev: knowledge base built from 30000")
    assert capture.suspended == 5


class FakeCaller:
    """A hook caller: its implementations in registration order, as pluggy lists them."""

    def __init__(self, *plugins: Any) -> None:
        self._impls = [SimpleNamespace(plugin=plugin, plugin_name=getattr(plugin, "name", "?"))
                       for plugin in plugins]

    def get_hookimpls(self) -> list[SimpleNamespace]:
        return list(self._impls)


def _module(path: Path | None, name: str = "plugin") -> SimpleNamespace:
    return SimpleNamespace(name=name) if path is None else SimpleNamespace(
        name=name, __file__=str(path))


ROOT = Path("/project").resolve()
BUILTIN = object()


def _settings(name: str = "builtin") -> PipelineSettings:
    return PipelineSettings(name=name, options={}, base_dir=ROOT)


def test_the_project_hooks_are_named_relative_to_the_rootdir_in_call_order() -> None:
    # pluggy calls the last registered first; the built-in implementation is not the project's.
    answer = FakeCaller(BUILTIN, _module(ROOT / "conftest.py"),
                        _module(ROOT / "eval" / "conftest.py"),
                        _module(Path("/elsewhere/conftest.py").resolve()),
                        _module(None, name="team_plugin"))
    hooks = ProjectHooks(SimpleNamespace(pytest_ragev_answer=answer), builtin=BUILTIN, root=ROOT)
    assert hooks.implements("pytest_ragev_answer")
    assert hooks.names() == ["team_plugin", "conftest.py", "eval/conftest.py", "conftest.py"]
    assert hooks.answered_by(_settings()).label == (
        "hooks (team_plugin, conftest.py, eval/conftest.py, conftest.py)")


def test_conftest_hooks_answer_every_configuration_under_one_name() -> None:
    answer = FakeCaller(BUILTIN, _module(ROOT / "eval" / "conftest.py"))
    hooks = ProjectHooks(SimpleNamespace(pytest_ragev_answer=answer), builtin=BUILTIN, root=ROOT)
    answered = hooks.answered_by(_settings("pkg.module:make"))
    assert (answered.label, answered.hooks) == ("conftest hooks (eval/conftest.py)", True)
    # The same words where the unread knobs are named.
    assert hooks.code(_settings()) == "conftest hooks (eval/conftest.py)"


def test_without_project_hooks_the_configured_pipeline_answers() -> None:
    relay = SimpleNamespace(pytest_ragev_answer=FakeCaller(BUILTIN))
    hooks = ProjectHooks(relay, builtin=BUILTIN, root=ROOT)
    assert not hooks.implements("pytest_ragev_answer") and hooks.names() == []
    answered = hooks.answered_by(_settings())
    assert (answered.label, answered.hooks) == ("builtin", False)
    # The plugin's own pipelines check their knobs themselves; a factory is the project's.
    assert hooks.code(_settings()) is None and hooks.code(_settings("http")) is None
    assert hooks.code(_settings("pkg.module:make")) == "pkg.module:make"
