"""End to end: language and tag slices in every report, gated with ``[gate] slices``
(issue #31). A bilingual English/Chinese set with ``billing``/``setup`` tags; a pipeline
that (when told) fails the Chinese questions only."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_ragev.dataset import write_dataset
from tests._pytester import read_json, run_ragev

Project = Callable[..., Path]

EN = ("When was the tower built?", "How tall is the mountain?", "Who wrote the book?",
      "Where does the river flow?", "What does the app cost?")
ZH = ("埃菲尔铁塔是什么时候建成的？", "珠穆朗玛峰有多高？", "这本书是谁写的？",
      "这条河流向哪里？", "这个应用多少钱？")

#: Answers from the gold passages, except for the Chinese questions when DEGRADE=zh.
CONFTEST = textwrap.dedent(
    """
    import os
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        bad = os.environ.get("DEGRADE") == "zh" and any(ord(c) > 0x3000 for c in case.question)
        return Answer(retrieved=[999] if bad else list(case.pids), text=case.answer or "")
    """
)


@pytest.fixture
def bilingual(pytester: pytest.Pytester) -> Callable[[str], Path]:
    """40 questions (20 English, 20 Chinese), a third tagged billing, the rest setup."""

    def make(extra: str = "") -> Path:
        queries, corpus, answers, qrels, qas = [], {999: "distractor"}, {}, [], []
        for index in range(40):
            qid = index + 1
            chinese = index % 2 == 1
            text = f"{(ZH if chinese else EN)[index % 5]} #{qid}"
            queries.append((qid, text, ["billing"] if index % 3 == 0 else ["setup"]))
            corpus[qid] = f"passage {qid}: {text}"
            answers[1000 + qid] = f"{'答案' if chinese else 'answer'} {qid}"
            qrels.append((qid, qid))
            qas.append((qid, 1000 + qid))
        write_dataset(pytester.path / "data", queries=queries, corpus=corpus,
                      answers=answers, qrels=qrels, qas=qas)
        pytester.makeconftest(CONFTEST)
        config = pytester.path / "ragev.toml"
        config.write_text('[dataset]\npath = "data"\nid = "bi"\n' + textwrap.dedent(extra),
                          encoding="utf-8")
        return config

    return make


def test_slices_appear_in_every_report_and_in_the_terminal_when_asked(
    pytester: pytest.Pytester, bilingual: Callable[[str], Path]
) -> None:
    bilingual("")
    quiet = run_ragev(pytester)
    assert quiet.ret == 0, quiet.stdout.str()[-3000:]
    assert "ragev: slices" not in quiet.stdout.str()
    result = run_ragev(pytester, "--ragev-slices", "--ragev-report", "r.json",
                       "--ragev-markdown", "r.md", "--ragev-html", "r.html",
                       "--junitxml", "j.xml")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        "ragev: slices (4; by language and tag):",
        "  slice * questions * recall *",
        "  lang:en * 20 * 1.000 *",
        "  lang:zh * 20 * 1.000 *",
        "  tag:setup * 26 *",
        "  tag:billing * 14 *",
    ])
    data = read_json(pytester.path / "r.json")["data"]
    assert list(data["slices"]) == ["lang:en", "lang:zh", "tag:setup", "tag:billing"]
    assert data["slices"]["lang:zh"]["questions"] == 20
    assert data["slices"]["lang:zh"]["metrics"]["recall"] == 1.0
    assert data["slices"]["tag:billing"]["counts"]["recall"] == 14
    assert data["slice_min_size"] == 10
    by_qid = {s["qid"]: s for s in data["samples"]}
    assert by_qid[1]["slices"] == ["lang:en", "tag:billing"]
    assert by_qid[2]["slices"] == ["lang:zh", "tag:setup"]
    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "### Slices" in markdown and "| `lang:zh` | 20 |" in markdown
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert '<table id="slices" class="sortable">' in html
    properties = {p.get("name"): p.get("value")
                  for p in ET.parse(pytester.path / "j.xml").getroot().iter("property")}
    assert properties["ragev.slice.lang:zh.questions"] == "20"
    assert properties["ragev.slice.tag:billing.recall"] == "1.000000"
    shown = pytester.run("ragev", "report", "show", "r.json")
    assert shown.ret == 0, shown.stderr.str()
    shown.stdout.fnmatch_lines(["ragev: slices (4; by language and tag):", "  lang:zh * 20 *"])


def test_the_slice_gate_names_the_slice_that_regressed(
    pytester: pytest.Pytester, bilingual: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    bilingual('[baseline]\npath = "base.json"\n[gate]\nslices = ["lang"]\n'
              "[thresholds.slice.zh]\nrecall = 0.9\n")
    first = run_ragev(pytester, "--ragev-update-baseline")
    assert first.ret == 0, first.stdout.str()[-3000:]
    monkeypatch.setenv("DEGRADE", "zh")
    result = run_ragev(pytester, "--ragev-report", "r.json")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    result.stdout.fnmatch_lines([
        # Unasked: a slice regressed. Every slice is shown, the languages gated.
        "ragev: slices (4; by language and tag):",
        "  lang:en * 20 * 1.000 (+0.000) *",
        "  lang:zh * 20 * 0.000 (−1.000) ▼*",
        "ragev: zh: recall 0.000 < threshold 0.900 (n=20)",
        "ragev: zh: recall 0.000 < baseline 1.000 (Δ −1.000, * (max-T, * tests: * metrics x 2 "
        "slices and the run), n=20)",
    ])
    assert "ragev: en: " not in out and "ragev: setup: " not in out
    # The run's own threshold table leaves the slice's threshold to its line.
    assert "0.900  FAIL" not in out
    comparison = read_json(pytester.path / "r.json")["data"]["baseline"]["comparisons"][0]
    assert comparison["slices"]["lang:zh"]["metrics"]["recall"]["status"] == "regressed"
    assert comparison["slices"]["lang:en"]["metrics"]["recall"]["status"] == "unchanged"
