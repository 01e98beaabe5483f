"""End to end: retrieved chunk texts that match no corpus passage are counted, warned about
with the first example, and their share is in every report."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

Project = Callable[..., Path]

TEXTS = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer, Chunk

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return dict(corpus)

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        # The passages' own texts, re-wrapped as a splitter would; odd questions also get
        # a chunk a summariser rewrote, which no passage holds.
        texts = ["  " + kb[pid].replace(" ", "\\n", 1) for pid in case.pids]
        if case.qid % 2:
            texts.append(f"埃菲尔铁塔的摘要，第 {case.qid} 段，已被改写。")
        if settings.options.get("ids"):
            return Answer(retrieved=[Chunk(text=t, passage_id=p) for t, p in
                                     zip(texts, case.pids)], text=case.answer)
        return Answer(retrieved=texts, text=case.answer)
    """
)


def test_unattributed_chunks_are_warned_about_and_reported(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=TEXTS)
    result = pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "--ragev-markdown", "r.md",
        "--ragev-html", "r.html",
    )
    assert result.ret == pytest.ExitCode.OK  # a warning, not a failure
    # q1..q5 hold six relevant passages; q1, q3, q5 add a rewritten chunk each.
    result.stdout.fnmatch_lines([
        "ragev: errors 0, fallback answers 0, unattributed chunks 3/9 (33%)",
        '*ragev: warning: 3/9 retrieved chunks (33%) matched no corpus passage (first: '
        '"埃菲尔铁塔的摘要，第 1 段，已被改写。"); return passage ids or Chunk(text, passage_id)',
    ])
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert data["attribution"] == {"chunks": 9, "unattributed": 3, "share": pytest.approx(1 / 3),
                                   "first": "埃菲尔铁塔的摘要，第 1 段，已被改写。"}
    assert [s.get("unattributed") for s in data["samples"]] == [1, 0, 1, 0, 1]
    assert data["warnings"][-1].startswith("3/9 retrieved chunks (33%) matched no corpus passage")
    assert "unattributed chunks 3/9 (33%)" in (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "unattributed chunks 3/9 (33%)" in (pytester.path / "r.html").read_text(encoding="utf-8")
    # The rewritten chunks keep their rank as misses: precision sees them.
    assert data["metric"]["retrieval_metrics"]["precision"] == pytest.approx(
        (1 / 2 + 1 + 1 / 2 + 1 + 1 / 2) / 5)


def test_chunks_that_name_their_passage_need_no_attribution(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(pipeline='[pipeline]\nname = "oracle"\nids = true\n', conftest=TEXTS)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    assert "matched no corpus passage" not in result.stdout.str()
    assert "unattributed chunks" not in result.stdout.str()
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert data["attribution"] == {"chunks": 0, "unattributed": 0, "share": None, "first": None}
