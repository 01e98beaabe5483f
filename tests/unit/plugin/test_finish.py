"""The end-of-run phase lines and the paused garbage collector of plugin.finish."""

from __future__ import annotations

import gc
import re

import pytest

from pytest_ragev.plugin.finish import _line_writer, _Phases, paused_gc


def test_a_line_per_phase_then_their_seconds() -> None:
    lines: list[str] = []
    phases = _Phases(lines.append)
    phases("scoring 100000 answers")
    phases("gate")
    phases("baseline write")
    phases("reports")
    phases.done()
    assert lines[:4] == [
        "ragev: end of run: scoring 100000 answers", "ragev: end of run: gate",
        "ragev: end of run: baseline write", "ragev: end of run: reports",
    ]
    assert re.fullmatch(
        r"ragev: end of run took \d+\.\d s \(scoring \d+\.\d s, gate \d+\.\d s, "
        r"baseline write \d+\.\d s, reports \d+\.\d s\)", lines[4]), lines[4]


def test_a_small_run_prints_nothing() -> None:
    phases = _Phases(None)
    phases("gate")
    phases.done()  # no writer: nothing to call, nothing raised


def test_paused_gc_restores_the_collector_even_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        assert not gc.isenabled()
        raise RuntimeError("Die Auswertung ist fehlgeschlagen / 评估失败")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


class _Writer:
    def __init__(self, width: int) -> None:
        self.width_of_current_line = width


class _Reporter:
    """What _line_writer uses of pytest's TerminalReporter."""

    def __init__(self, width: int) -> None:
        self._tw = _Writer(width)
        self.out: list[str] = []

    def ensure_newline(self) -> None:
        self.out.append("<ensure>")

    def write(self, text: str) -> None:
        self.out.append(text)
        self._tw.width_of_current_line = 0 if text.endswith("\n") else 1

    def write_line(self, line: str) -> None:
        self.out.append(line + "\n")


def test_phase_lines_start_on_a_line_of_their_own() -> None:
    dots = _Reporter(width=48)  # -q: a line of progress dots is open
    _line_writer(dots)("ragev: end of run: gate")
    assert dots.out == ["<ensure>", "\n", "ragev: end of run: gate\n"]
    clean = _Reporter(width=0)
    _line_writer(clean)("ragev: end of run: gate")
    assert clean.out == ["<ensure>", "ragev: end of run: gate\n"]
