"""One comparison path: the plugin's gate and ``ragev report compare`` say the same, word
for word, on every case the gate tells apart.

Each case records a baseline with evaluate() (as ``--ragev-update-baseline`` does), runs
again with one thing changed, and gates the run's saved JSON report against the saved
baseline file with ``compare_saved`` (what ``ragev report compare`` calls). The lines
must be the plugin's own: the regressed metrics, the warnings, the reason the gate
could not compare; the verdict the same. Only what the gate does to files (the
``.obtained.json`` it writes, the stale one it removes) is the plugin's alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_ragev.dataset import load_dataset, write_dataset
from pytest_ragev.evaluation import Outcome, RunPlan
from pytest_ragev.gate import GateOutcome
from pytest_ragev.report.reader import ReportError, compare_saved, read_saved
from tests.unit.report._project import (
    ANSWERS,
    CONFIG,
    CORPUS,
    QAS,
    QRELS,
    QUERIES,
    Project,
    make_project,
    run,
    write_report,
)

#: What only the plugin's gate says: the files it writes and removes beside the baseline.
FILE_ACTIONS = ("ragev: this run's snapshot written to ", "ragev: removed the stale ")


def _edit_dataset(project: Project) -> Project:
    """Question 2's reference edited, question 8 removed, question 9 added."""
    queries = {q: text for q, text in QUERIES.items() if q != 8}
    answers = {a: text for a, text in ANSWERS.items() if a != 108}
    write_dataset(project.folder / "data", queries={**queries, 9: "谁写了哈姆雷特？"},
                  corpus=CORPUS,
                  answers={**answers, 102: "Ungefähr 330 Meter.", 109: "莎士比亚。"},
                  qrels=[*(qr for qr in QRELS if qr[0] != 8), (9, 6)],
                  qas=[*(qa for qa in QAS if qa[0] != 8), (9, 109)])
    return Project(project.folder, load_dataset(project.folder / "data", "multi"))


def _with_gate(project: Project, line: str) -> Project:
    """The project with one more ``[gate]`` key."""
    config = CONFIG.replace("[gate]\n", f"[gate]\n{line}\n")
    (project.folder / "ragev.toml").write_text(config, encoding="utf-8")
    return project


def _custom_tokenizer(text: str) -> list[list[str]]:
    return [text.split()]


#: (how the second run differs) -> (project, plan) of the second run.
Change = Callable[[Project], tuple[Project, RunPlan]]
#: What the gate must have decided in the case (else the parity proves less).
Expect = Callable[[GateOutcome], bool]
GOLD = ["gold"] * 8
CASES: dict[str, tuple[Change, list[str], Expect]] = {
    "same data, unchanged": (
        lambda p: (p, p.plan()), GOLD,
        lambda g: g.passed and len(g.comparisons) == 2 and g.comparisons[0].unchanged),
    "same data, regressed": (
        lambda p: (p, p.plan()), ["gold"] * 3 + ["miss"] * 5,
        lambda g: any(line.startswith("ragev: recall ") for line in g.failures)),
    "added, removed and changed questions": (
        lambda p: ((edited := _edit_dataset(p)), edited.plan()), ["gold"] * 5 + ["miss"] * 3,
        lambda g: (g.comparisons[0].added, g.comparisons[0].removed,
                   g.comparisons[0].changed) == ([9], [8], [2])),
    "strict dataset": (
        lambda p: ((edited := _edit_dataset(_with_gate(p, "strict_dataset = true"))),
                   edited.plan()), GOLD,
        lambda g: "strict_dataset = true" in str(g.not_compared)),
    "other profile": (
        lambda p: (p, p.plan(profile="standard")), GOLD,
        lambda g: "numbers across metric profiles" in str(g.not_compared)),
    "other tokenizer": (
        lambda p: (p, RunPlan.build(p.plan().config, p.plan().options, p.plan().custom_metrics,
                                    hooked_tokenizer=_custom_tokenizer)), GOLD,
        lambda g: "text metrics across tokenizers" in str(g.not_compared)),
    "missing variant": (
        lambda p: (p, p.plan()), GOLD,
        lambda g: g.new_variants == ("k2",) and g.not_compared is None),
    "missing variant, all required": (
        lambda p: ((q := _with_gate(p, "require_all_variants = true")), q.plan()), GOLD,
        lambda g: "require_all_variants = true" in str(g.not_compared)),
}


def _gate_lines(outcome: Outcome) -> tuple[tuple[str, ...], tuple[str, ...]]:
    gate = outcome.gate
    return (gate.failures,
            tuple(note for note in gate.notes if not note.startswith(FILE_ACTIONS)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_gate_and_report_compare_say_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    change, behaviour, expect = CASES[case]
    project = make_project(tmp_path)
    only_base = case.startswith("missing variant")
    run(project, project.plan(update_baseline=True, variants=("base",) if only_base else ()),
        GOLD, 0.1)
    current_project, plan = change(project)
    outcome = run(current_project, plan, behaviour, 0.1)
    assert expect(outcome.gate), outcome.gate
    write_report(outcome, tmp_path / "report.json")
    # As a CI job runs it, from the project's folder:
    # ragev report compare ragev-baseline.json report.json
    monkeypatch.chdir(tmp_path)
    report = read_saved("report.json")
    baseline = read_saved("ragev-baseline.json")
    if outcome.gate.not_compared is not None:
        with pytest.raises(ReportError) as refused:
            compare_saved(baseline, report, plan.rules)
        assert str(refused.value) == outcome.gate.not_compared
        return
    gated = compare_saved(baseline, report, plan.rules)
    assert _gate_lines(gated) == _gate_lines(outcome)
    assert gated.gate.comparisons == outcome.gate.comparisons
    assert gated.gate.regressions == outcome.gate.regressions
    assert gated.gate.new_variants == outcome.gate.new_variants
    assert gated.verdict_failures() == outcome.verdict_failures()
    assert gated.failed == outcome.failed
