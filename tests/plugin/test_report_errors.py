"""End to end: questions that raised are listed, counted by type and named in the verdict,
in the terminal, the JSON, Markdown and HTML reports and the JUnit properties."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

Project = Callable[..., Path]

FAILING = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        if case.qid == 2:
            raise TimeoutError("模型超时 after 30 s")
        if case.qid in (4, 5):
            raise ValueError(f"unparseable reply <b>{case.qid}</b> | zweite Spalte")
        return Answer(retrieved=list(case.pids), text=case.answer)
    """
)


class _Cells(HTMLParser):
    """The text of every cell of the table with class ``errors``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._inside = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._inside = ("class", "errors") in attrs
        elif self._inside and tag == "tr":
            self.rows.append([])
        elif self._inside and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._inside = False
        elif self._inside and tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


class _Kinds(HTMLParser):
    """The text of each count of the Errors section's ``kinds`` line (``ValueError 2``)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: list[str] = []
        self._inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "p":
            self._inside = ("class", "kinds") in attrs
        elif self._inside and tag == "span":
            self.counts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "p":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._inside and self.counts:
            self.counts[-1] += data


def test_errors_are_listed_counted_by_type_and_named_in_the_verdict(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=FAILING)
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "--ragev-markdown", "r.md",
        "--ragev-html", "r.html", "--junitxml", "junit.xml",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "ragev: errors: 3 question(s) raised (ValueError 2, TimeoutError 1):",
        "  q2  How tall is the Eiffel Tower?",
        "      TimeoutError: 模型超时 after 30 s",
        "  q4  Who created Python?",
        "      ValueError: unparseable reply <b>4</b> | zweite Spalte",
        "  q5  How long is the Great Wall of China?",
        "*",
        "ragev: 3 questions raised an error: q2, q4, q5 (ValueError 2, TimeoutError 1)",
        "ragev: verdict FAILED (3 errors)",
    ])

    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert data["errors"]["total"] == 3
    assert data["errors"]["by_type"] == {"ValueError": 2, "TimeoutError": 1}
    assert [(q["qid"], q["type"]) for q in data["errors"]["questions"]] == [
        (2, "TimeoutError"), (4, "ValueError"), (5, "ValueError")]
    assert data["errors"]["questions"][0]["error"] == "TimeoutError: 模型超时 after 30 s"
    assert data["verdict"]["failures"] == [
        "ragev: 3 questions raised an error: q2, q4, q5 (ValueError 2, TimeoutError 1)"]

    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "### Errors (3)" in markdown and "`ValueError` 2 · `TimeoutError` 1" in markdown
    assert ("| q4 | Who created Python? | ValueError: unparseable reply &lt;b&gt;4&lt;/b&gt; "
            "\\| zweite Spalte |") in markdown

    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    kinds = _Kinds()
    kinds.feed(page)
    assert kinds.counts == ["ValueError 2", "TimeoutError 1"]  # most frequent first
    cells = _Cells()
    cells.feed(page)
    assert cells.rows == [
        ["qid", "question", "type", "error"],
        ["q2", "How tall is the Eiffel Tower?", "TimeoutError", "TimeoutError: 模型超时 after 30 s"],
        ["q4", "Who created Python?", "ValueError",
         "ValueError: unparseable reply <b>4</b> | zweite Spalte"],
        ["q5", "How long is the Great Wall of China?", "ValueError",
         "ValueError: unparseable reply <b>5</b> | zweite Spalte"],
    ]

    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert (props["ragev.errors"], props["ragev.errors.ValueError"],
            props["ragev.errors.TimeoutError"]) == ("3", "2", "1")
    # The verdict's failure names the questions that raised, once.
    verdict = next(case for case in suite.iter("testcase") if case.get("name") == "verdict")
    failure = verdict.find("failure")
    assert failure is not None and failure.text == (
        "ragev: 3 questions raised an error: q2, q4, q5 (ValueError 2, TimeoutError 1)")


def test_without_errors_no_section_and_an_empty_list(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project()
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    assert "ragev: errors:" not in result.stdout.str()
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert data["errors"] == {"total": 0, "by_type": {}, "questions": []}
