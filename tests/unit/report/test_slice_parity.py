"""Slices judged again from saved files, word for word as the plugin judged them.

A run with ``[gate] slices`` and ``[thresholds.slice.<name>]`` is recorded as a baseline
with evaluate() (as ``--ragev-update-baseline`` does), then runs again with part of one
language slice broken. Its saved JSON report, gated against the saved baseline by
``compare_saved`` (``ragev report compare``: through the gate's own ``judge_against``),
must print the plugin's slice failure lines and slice threshold lines, word for word,
and ``outcome_from_report`` (``ragev report show``) must check the slice thresholds
again and show the slices' comparison the run recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ragev.config import RunOptions, load_config
from pytest_ragev.dataset import load_dataset, write_dataset
from pytest_ragev.evaluation import EvalInputs, Outcome, RunFacts, RunPlan, evaluate, run_params
from pytest_ragev.report.reader import compare_saved, outcome_from_report, read_saved
from tests.unit._cli import run_cli
from tests.unit.report._project import records, write_report

ZH = ["长城有多长？", "故宫在哪里？", "黄河有多长？", "泰山有多高？", "西湖在哪个城市？"]
RU = ["Какова высота Эвереста?", "Где находится Кремль?", "Какая река самая длинная?",
      "Когда основан Петербург?", "Сколько озёр в Карелии?"]
CONFIG = """\
[dataset]
path = "data"
id = "slices"

[pipeline]
name = "oracle"

[thresholds]
recall = 0.5

[thresholds.slice.zh]
recall = 0.9

[thresholds.slice."tag:billing"]
mrr = 0.2

[baseline]
path = "ragev-baseline.json"

[gate]
mode = "tolerance"
max_drop = 0.05
slices = ["lang", "tag"]
min_slice = 10
resamples = 300
"""


def _project(folder: Path) -> None:
    """40 questions: 20 Chinese and 20 Russian, half of each tagged billing, half setup;
    each with one relevant passage (its own id) and a reference answer."""
    queries, corpus, answers = [], {}, {}
    for qid in range(1, 41):
        zh = qid <= 20
        text = (ZH if zh else RU)[qid % 5] + f" ({qid})"
        queries.append((qid, text, ["billing" if qid % 2 else "setup"]))
        corpus[qid] = (f"第{qid}段：答案在这里。" if zh else f"Отрывок {qid}: ответ здесь.")
        answers[100 + qid] = f"答案{qid}。" if zh else f"Ответ {qid}."
    write_dataset(folder / "data", queries=queries, corpus=corpus, answers=answers,
                  qrels=[(q, q) for q in range(1, 41)], qas=[(q, 100 + q) for q in range(1, 41)])
    (folder / "ragev.toml").write_text(CONFIG, encoding="utf-8")


def _run(folder: Path, behaviour: list[str], **options: object) -> tuple[Outcome, RunPlan]:
    plan = RunPlan.build(load_config(folder / "ragev.toml"),
                         RunOptions(**options), [])  # type: ignore[arg-type]
    dataset = load_dataset(folder / "data", "slices")
    answered = records(dataset, behaviour, None, 0.1)
    facts = RunFacts(task_id="evaluation_1_ab_slices", start_time="2026-01-02T03:04:05+00:00",
                     total=len(answered), finished=len(answered))
    params = {None: run_params(plan, dataset, {}, None)}
    return evaluate(EvalInputs(plan=plan, dataset=dataset, records=answered, facts=facts,
                               params=params)), plan


@pytest.fixture
def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Outcome, RunPlan]:
    """The baseline (every passage found), then a run whose Chinese questions 1-8 find
    only other passages: lang:zh and tag:billing/setup lose recall, the run too."""
    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    _run(tmp_path, ["gold"] * 40, update_baseline=True)
    outcome, plan = _run(tmp_path, ["gold"] + ["miss"] * 7 + ["gold"] * 32)
    write_report(outcome, tmp_path / "report.json")
    return outcome, plan


def _slice_lines(lines: list[str] | tuple[str, ...]) -> list[str]:
    return [line for line in lines if line.startswith(("ragev: zh: ", "ragev: billing: ",
                                                       "ragev: setup: ", "ragev: ru: "))]


def test_report_compare_judges_slices_as_the_plugin_did(gated: tuple[Outcome, RunPlan]) -> None:
    outcome, plan = gated
    slice_failures = _slice_lines(outcome.verdict_failures())
    # The case says what it must: slice regressions and a slice threshold missed.
    assert any(line.startswith("ragev: zh: recall ") and "< baseline" in line
               for line in slice_failures), slice_failures
    assert "ragev: zh: recall 0.650 < threshold 0.900 (n=20)" in slice_failures
    assert outcome.gate.comparisons[0].slices
    again = compare_saved(read_saved("ragev-baseline.json"), read_saved("report.json"),
                          plan.rules)
    assert again.verdict_failures() == outcome.verdict_failures()
    assert again.gate.failures == outcome.gate.failures
    assert again.gate.comparisons[0].slices == outcome.gate.comparisons[0].slices
    assert [t.reason for t in again.thresholds] == [t.reason for t in outcome.thresholds]


def test_report_show_checks_slice_thresholds_and_shows_the_recorded_slices(
    gated: tuple[Outcome, RunPlan],
) -> None:
    outcome, plan = gated
    shown = outcome_from_report(read_saved("report.json"), rules=plan.rules)
    assert [t.reason for t in shown.thresholds] == [t.reason for t in outcome.thresholds]
    assert shown.verdict_failures() == outcome.verdict_failures()
    recorded = shown.gate.comparisons[0].slices
    judged = outcome.gate.comparisons[0].slices
    assert [(s.key, s.label, s.n) for s in recorded] == [(s.key, s.label, s.n) for s in judged]
    for saved, fresh in zip(recorded, judged, strict=True):
        assert [(m.metric, m.status, m.delta, m.p, m.regressed) for m in saved.metrics] == [
            (m.metric, m.status, m.delta, m.p, m.regressed) for m in fresh.metrics]


def test_the_cli_prints_the_plugin_s_slice_lines(
    gated: tuple[Outcome, RunPlan], capsys: pytest.CaptureFixture[str]
) -> None:
    outcome, _ = gated
    expected = _slice_lines(outcome.verdict_failures())
    code, out, _ = run_cli(capsys, "report", "compare", "ragev-baseline.json", "report.json",
                           "--config", "ragev.toml")
    assert code == 1
    printed = out.splitlines()
    assert _slice_lines(printed) == expected
    code, out, _ = run_cli(capsys, "report", "show", "report.json", "--config", "ragev.toml")
    assert code == 0
    assert _slice_lines(out.splitlines()) == expected


def test_a_one_language_run_keeps_its_slice_keys_for_its_slice_thresholds(
    tmp_path: Path,
) -> None:
    """A run of one language and no tags writes no slice keys, unless it sets slice
    thresholds: then a saved report checks them on the same questions."""
    _project(tmp_path)
    config = CONFIG.replace('[thresholds.slice."tag:billing"]\nmrr = 0.2\n', "")
    (tmp_path / "ragev.toml").write_text(config.replace('slices = ["lang", "tag"]\n', ""),
                                         encoding="utf-8")
    queries = [(q, ZH[q % 5] + f" ({q})") for q in range(1, 41)]
    data = tmp_path / "data"
    dataset = load_dataset(data, "slices")
    write_dataset(data, queries=queries, corpus=dict(dataset.corpus),
                  answers={100 + p.qid: p.answer for p in dataset.pairs},
                  qrels=[(q, q) for q in range(1, 41)], qas=[(q, 100 + q) for q in range(1, 41)])
    outcome, plan = _run(tmp_path, ["miss"] * 20 + ["gold"] * 20)
    path = write_report(outcome, tmp_path / "report.json")
    assert all(sample["slices"] == ["lang:zh"]
               for sample in json.loads(path.read_text(encoding="utf-8"))["data"]["samples"])
    shown = outcome_from_report(read_saved(path), rules=plan.rules)
    assert [t.reason for t in shown.thresholds] == [t.reason for t in outcome.thresholds]
    # Questions 9 and 10 "miss" onto their own passages: 22 of 40 found.
    assert "ragev: zh: recall 0.550 < threshold 0.900 (n=40)" in [
        t.reason for t in shown.thresholds]
