"""End to end: ``ragev init`` writes a project that ``pytest --ragev-config`` runs as it is.

As written (the built-in pipeline answers), with its conftest hook uncommented (the hook
answers), and with its commented ``[baseline]`` switched on (the life
cycle the comments promise: the first run writes the baseline and fails, the next passes).
"""

from __future__ import annotations

import re

import pytest

from pytest_ragev import cli
from pytest_ragev.dataset import write_dataset

QUERIES = {
    1: "长城有多长？", 2: "埃菲尔铁塔在哪个城市？", 3: "Wie hoch ist die Zugspitze?",
    4: "Wo liegt der Kölner Dom?", 5: "Какая река течёт через Москву?",
    6: "Кто написал «Войну и мир»?",
}
CORPUS = {
    1: "长城全长超过两万公里，是世界上最长的建筑。", 2: "埃菲尔铁塔位于法国巴黎。",
    3: "Die Zugspitze ist mit 2962 Metern der höchste Berg Deutschlands.",
    4: "Der Kölner Dom steht in Köln am Rhein.",
    5: "Через Москву течёт река Москва.", 6: "«Войну и мир» написал Лев Толстой.",
    7: "Der Louvre ist ein Museum in Paris.", 8: "上海是中国最大的城市之一。",
}
ANSWERS = {10 + q: a for q, a in {
    1: "超过两万公里。", 2: "巴黎。", 3: "2962 Meter.", 4: "In Köln.", 5: "Река Москва.",
    6: "Лев Толстой.",
}.items()}


def scaffold(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """``ragev init eval/数据 --dir eval`` on a six-question dataset in three languages."""
    write_dataset(pytester.path / "eval" / "数据", queries=QUERIES, corpus=CORPUS,
                  answers=ANSWERS, qrels=[(q, q) for q in QUERIES],
                  qas=[(q, 10 + q) for q in QUERIES])
    assert cli.main(["init", "eval/数据", "--dir", "eval"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "next: cd eval && pytest --ragev-config ragev.toml"


def test_the_scaffold_runs_as_written(pytester: pytest.Pytester,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    scaffold(pytester, capsys)
    result = pytester.runpytest("--ragev-config", "eval/ragev.toml")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QUERIES) + 1)  # the questions and the verdict
    result.stdout.fnmatch_lines(["  pipeline: builtin", "ragev: verdict passed"])
    # The report the scaffold asks for is the one `ragev report` reads.
    report = pytester.path / "eval" / "ragev-report.json"
    assert cli.main(["report", "show", str(report)]) == 0
    assert "ragev: dataset (base configuration), 6 questions" in capsys.readouterr().out


def test_the_uncommented_hook_answers(pytester: pytest.Pytester,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    scaffold(pytester, capsys)
    # The hook, uncommented, runs as it is: the built-in pipeline called from conftest.py.
    conftest = pytester.path / "eval" / "conftest.py"
    conftest.write_text(re.sub(r"^# ?", "", conftest.read_text(encoding="utf-8"),
                               flags=re.MULTILINE), encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "eval/ragev.toml")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QUERIES) + 1)
    result.stdout.fnmatch_lines(["  pipeline: conftest hooks (eval/conftest.py)",
                                 "ragev: verdict passed"])


def test_the_commented_baseline_switched_on(pytester: pytest.Pytester,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    scaffold(pytester, capsys)
    # The life cycle the comments promise: written and failed once, then gated and passed.
    config = pytester.path / "eval" / "ragev.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("# [baseline]\n# path =", "[baseline]\npath ="),
                      encoding="utf-8")
    first = pytester.runpytest("--ragev-config", "eval/ragev.toml")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    first.stdout.fnmatch_lines(["ragev: baseline not found, created *ragev-baseline.json; "
                                "commit it and rerun"])
    second = pytester.runpytest("--ragev-config", "eval/ragev.toml")
    assert second.ret == pytest.ExitCode.OK
    second.stdout.fnmatch_lines(["ragev: base configuration against the baseline, 6 shared "
                                 "questions: no metric changed"])
