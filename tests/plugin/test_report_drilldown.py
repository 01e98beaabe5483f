"""End to end: a person can find the questions behind the numbers. After a regression the
summary shows the worst three and where the rest are; without a baseline every report lists
the weakest questions; unchanged metrics take one line of the HTML report."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

Project = Callable[..., Path]
GATED = '[baseline]\npath = "ragev-baseline.json"\n[gate]\ncorrection = "none"\n'

#: q1 and q3 retrieve a distractor and do not know; q2 finds one of its two passages;
#: q5 raises. With ``order = "noisy"`` a distractor is ranked first instead, answers stay.
WEAK = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        if settings.options.get("order") == "noisy":
            return Answer(retrieved=[6, *case.pids], text=case.answer)
        if settings.options.get("order") == "gold":
            return Answer(retrieved=list(case.pids), text=case.answer)
        if case.qid == 5:
            raise ConnectionError("Verbindung abgelehnt")
        if case.qid in (1, 3):
            return Answer(retrieved=[7], text="Keine Ahnung.")
        return Answer(retrieved=list(case.pids)[-1:], text=case.answer)
    """
)


def test_after_a_regression_the_worst_three_show_and_a_pointer_to_the_rest(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(GATED, pipeline='[pipeline]\nname = "oracle"\nquality = "good"\n')
    assert pytester.runpytest("--ragev-config", "ragev.toml",
                              "--ragev-update-baseline").ret == pytest.ExitCode.OK
    config.write_text(config.read_text(encoding="utf-8").replace('"good"', '"bad"'),
                      encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The odd questions were perfect before (the oracle ranks a distractor first for even
    # ones): they fell furthest.
    result.stdout.fnmatch_lines([
        "ragev: 3 most regressed question(s) (* = relevant passage):",
        "  q5  How long is the Great Wall of China?",
        "*",
        "  q1  When was the Eiffel Tower completed?",
        "      precision −1.000 (1.000 → 0.000), recall −1.000 (1.000 → 0.000), *",
        "      retrieved [[]1*[]] → [[]7, 6[]]",
        "      answer    'The Eiffel Tower was completed in 1889.' → 'I do not know.'",
        "  q3  How high is Mount Everest?",
        "*",
        "*",
        "ragev: per-question details: -v lists 5; --ragev-html PATH shows each question",
    ])
    assert "  q2  " not in result.stdout.str() and "  q4  " not in result.stdout.str()
    with_html = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-html", "out/r.html")
    with_html.stdout.fnmatch_lines([
        "ragev: per-question details: -v lists 5; the HTML report out/r.html shows each question"])
    verbose = pytester.runpytest("--ragev-config", "ragev.toml", "-v")
    verbose.stdout.fnmatch_lines(["ragev: 5 most regressed question(s)*", "*  q4  *"])
    assert "per-question details" not in verbose.stdout.str()


class _Page(HTMLParser):
    """The pieces of the HTML report these tests read."""

    def __init__(self) -> None:
        super().__init__()
        self.nochange: list[str] = []
        self.details: list[str] = []
        self.charts: list[str] = []
        self.text: list[str] = []
        self.tags: set[str] = set()
        #: Every attribute that makes a browser fetch something, as (tag, name, value).
        self.fetches: list[tuple[str, str, str]] = []
        self._in_details = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.add(tag)
        self.fetches += [(tag, name, value or "") for name, value in attrs
                         if name in ("src", "href", "srcset", "action", "poster", "data",
                                     "formaction", "background")]
        if found.get("class") == "nochange":
            self.nochange.append(found.get("data-metrics") or "")
        if tag == "svg" and "histogram" in (found.get("class") or ""):
            self.charts.append(found.get("data-metric") or "")
        if tag == "details":
            self._in_details += 1
            self.details.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self._in_details -= 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_details:
            self.details[-1] += data


def read_page(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


#: An SVG's namespace names a URL but fetches nothing.
SVG_NAMESPACE = 'xmlns="http://www.w3.org/2000/svg"'


def assert_self_contained(path: Path) -> None:
    """The HTML report fetches nothing: no external script, style, image, font or frame."""
    text = path.read_text(encoding="utf-8")
    page = read_page(path)
    assert not page.tags & {"link", "iframe", "object", "embed", "img", "base"}, page.tags
    for tag, name, value in page.fetches:
        assert value.startswith("#") and "//" not in value, (tag, name, value)
    rest = text.replace(SVG_NAMESPACE, "")
    for scheme in ("http:", "https:", "url(", "@import"):
        assert scheme not in rest, scheme


def test_metrics_no_question_moved_on_take_one_line(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(GATED, pipeline='[pipeline]\nname = "oracle"\norder = "gold"\n',
                          conftest=WEAK)
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    config.write_text(config.read_text(encoding="utf-8").replace('"gold"', '"noisy"'),
                      encoding="utf-8")
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-html", "r.html")
    page = read_page(pytester.path / "r.html")
    # A distractor ranked first moves the rank metrics only.
    assert page.charts == ["precision", "ndcg3", "ndcg10", "mrr", "map"]
    assert page.nochange == ["recall bleu1 bleu2 bleu4 rouge1 rouge2 rougel"]
    assert ("No change on recall, bleu1, bleu2, bleu4, rouge1, rouge2, rougel: all 5 shared "
            "questions have the same value.") in "".join(page.text)
    assert_self_contained(pytester.path / "r.html")  # with charts, diffs and the table


def test_without_a_baseline_every_report_lists_the_weakest_questions(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=WEAK)
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "-v", "--ragev-report", "r.json",
        "--ragev-markdown", "r.md", "--ragev-html", "r.html",
    )
    result.stdout.fnmatch_lines([
        "ragev: 3 lowest-scoring question(s) by recall of 4 (* = relevant passage):",
        "  q1  recall 0.000  When was the Eiffel Tower completed?",
        "      retrieved [[]7[]]  relevant [[]1*[]]",
        "      reference 'The Eiffel Tower was completed in 1889.'",
        "      answer    'Keine Ahnung.'",
        "  q3  recall 0.000  How high is Mount Everest?",
        "*",
        "  q2  recall 0.500  How tall is the Eiffel Tower?",
        "      retrieved [[]2*[]]  relevant [[]1*, 2*[]]",
        "*",
        "ragev: 2 lowest-scoring question(s) by rougel of 4 (* = relevant passage):",
    ])
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert [q["qid"] for q in data["lowest"]["recall"]] == [1, 3, 2]
    assert [q["qid"] for q in data["lowest"]["rougel"]] == [1, 3]
    assert data["lowest"]["recall"][0] == {
        "qid": 1, "question": "When was the Eiffel Tower completed?", "value": 0.0,
        "reference": "The Eiffel Tower was completed in 1889.", "retrieval_ids": [7],
        "relevant": [1], "generated_text": "Keine Ahnung."}

    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "### Lowest-scoring questions by recall" in markdown
    assert ("| 2 | 0.500 | How tall is the Eiffel Tower? | The Eiffel Tower is about 330 metres "
            "tall. | [2✓] | The Eiffel Tower is about 330 metres tall. |") in markdown

    page = read_page(pytester.path / "r.html")
    # Each weak question's retrieved list opens onto the passages, relevant ones marked,
    # and names the relevant passages it missed.
    first = page.details[0]
    assert first.startswith("[7]") and "7: Rust is a systems programming language" in first
    assert "relevant, not retrieved:" in first and "1✓: The Eiffel Tower in Paris" in first
    assert "Lowest-scoring questions by rougel" in "".join(page.text)
    assert_self_contained(pytester.path / "r.html")  # with errors and the weakest questions


def test_without_v_one_line_names_the_weakest_questions_and_where_they_are(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=WEAK)
    quiet = pytester.runpytest("--ragev-config", "ragev.toml", "-q")
    assert quiet.ret == pytest.ExitCode.TESTS_FAILED  # q5 raised
    quiet.stdout.fnmatch_lines([
        "ragev: weakest questions by recall and rougel: q1, q3, q2; -v shows them with their "
        "answers, --ragev-html PATH shows each question"])
    assert "lowest-scoring question(s) by recall" not in quiet.stdout.str()
    with_html = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-html", "out/r.html")
    with_html.stdout.fnmatch_lines([
        "ragev: weakest questions by recall and rougel: q1, q3, q2; -v shows them with their "
        "answers, the HTML report out/r.html shows each question"])
    # -v lists them itself.
    verbose = pytester.runpytest("--ragev-config", "ragev.toml", "-v")
    verbose.stdout.fnmatch_lines(["ragev: 3 lowest-scoring question(s) by recall of 4*"])
    assert "ragev: weakest questions" not in verbose.stdout.str()
