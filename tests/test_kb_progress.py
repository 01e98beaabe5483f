"""The knowledge-base build progress: visible without -s, one line on a TTY, no duplicates."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragev.dataset import write_dataset
from pytest_ragev.plugin.defaults import PROGRESS_MIN_PASSAGES, KbProgress

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


def _big_project(root: Path) -> None:
    rng = random.Random(7)
    corpus = {i: f"Passage {i} about {' '.join(rng.choices(WORDS, k=5))}."
              for i in range(1, PROGRESS_MIN_PASSAGES + 1)}
    write_dataset(root / "data", queries={1: "alpha beta?", 2: "gamma delta?"}, corpus=corpus,
                  answers={11: "a", 12: "b"}, qrels=[(1, 1), (2, 2)], qas=[(1, 11), (2, 12)])
    (root / "ragev.toml").write_text('[dataset]\npath = "data"\n\n[pipeline]\nname = "builtin"\n',
                                     encoding="utf-8")


PROGRESS_LINES = [
    f"ragev: building knowledge base of {PROGRESS_MIN_PASSAGES} passages ...",
    f"ragev: building knowledge base of {PROGRESS_MIN_PASSAGES} passages: 25%",
    f"ragev: building knowledge base of {PROGRESS_MIN_PASSAGES} passages: 50%",
    f"ragev: building knowledge base of {PROGRESS_MIN_PASSAGES} passages: 75%",
    f"ragev: knowledge base built from {PROGRESS_MIN_PASSAGES} passages in *s",
]


@pytest.mark.parametrize("flags", [(), ("-s",)])
def test_progress_shows_through_output_capture_once(
    pytester: pytest.Pytester, flags: tuple[str, ...]
) -> None:
    _big_project(pytester.path)
    # A subprocess: only there does fd-level capture swallow what the reporter writes.
    result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "-p",
                                           "no:cacheprovider", *flags)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(PROGRESS_LINES, consecutive=True)
    output = result.stdout.str()
    assert output.count("knowledge base built from") == 1
    assert output.count("passages: 75%") == 1
    # Written before the items finish, not in a captured-output section.
    assert "Captured stdout" not in output
    assert output.index("knowledge base built") < output.index("2 passed")


def test_a_kb_loaded_from_the_cache_shows_no_progress(pytester: pytest.Pytester) -> None:
    _big_project(pytester.path)
    config = pytester.path / "ragev.toml"
    # Answers uncached, so the second run needs the KB: it loads it from .pytest_cache.
    config.write_text(config.read_text() + "\n[run]\ncache = false\n", encoding="utf-8")
    first = pytester.runpytest("--ragev-config", "ragev.toml")
    first.stdout.fnmatch_lines(["ragev: knowledge base built from *"])
    loaded = pytester.runpytest("--ragev-config", "ragev.toml")
    assert loaded.ret == pytest.ExitCode.OK
    assert "knowledge base" not in loaded.stdout.str()
