"""The knowledge-base build progress: visible without -s, one line on a TTY, no duplicates."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pytest_ragev.plugin.defaults import KbProgress

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
