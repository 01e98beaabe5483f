"""The terminal summary: the comparison table, the diffs, the variants table, the verdict."""

from __future__ import annotations

from pytest_ragev.core.shard import ShardSpec
from pytest_ragev.evaluation import Outcome, RunFacts, ShardPart
from pytest_ragev.gate import check_thresholds, thresholds_from_table
from pytest_ragev.report import terminal_lines
from pytest_ragev.report.terminal import (
    render_comparison,
    render_question_diffs,
    render_variant_table,
    variant_cell,
)
from tests.unit.report._models import make_run


def test_terminal_renderers(model: Outcome) -> None:
    assert model.comparison is not None and model.gate.variant_table is not None
    lines = render_comparison(model.comparison)
    assert lines[0] == "ragev: base configuration against the baseline, 60 shared questions:"
    assert lines[1].split() == ["metric", "baseline", "current", "Δ", "90%", "CI", "p", "n",
                                "status"]
    assert any(line.split()[0] == "recall" and line.endswith("regressed") for line in lines)
    # Columns line up: every row as long as the header once trailing status is dropped.
    assert len({line.index(" 60 ") for line in lines[2:]}) == 1

    diff_lines = render_question_diffs(model.gate.regressions)
    assert diff_lines[0].startswith("ragev: 10 most regressed question(s)")
    assert any("retrieved [10*, 11*, 7] → [15, 10*]" in line for line in diff_lines)
    assert any(line.strip().startswith("answer    'answer 1' → ") for line in diff_lines)

    table_lines = render_variant_table(model.gate.variant_table)
    table = model.gate.variant_table
    names = [str(r.name) for r in table.rows]
    assert table_lines[1].split()[:2] == ["metric", "(base)"]
    assert all(name in table_lines[1] for name in names)
    recall = next(line for line in table_lines if line.strip().startswith("recall"))
    assert "▲" in recall
    assert "  k10 changes: pipeline.top_k" in table_lines
    # Right-aligned figures: every metric row's last cell ends at the same column.
    first = next(i for i, line in enumerate(table_lines) if line.split()[:1] == [table.metrics[0]])
    metric_rows = table_lines[first : first + len(table.metrics)]
    assert [row.split()[0] for row in metric_rows] == list(table.metrics)
    last = table.rows[-1]
    ends = {
        row.index(cell) + len(cell)
        for row, cell in (
            (row, variant_cell(last.cells[m].mean, last.cells[m].delta, last.cells[m].marker or " ").rstrip())
            for row, m in zip(metric_rows, table.metrics, strict=True)
        )
    }
    assert len(ends) == 1


def test_terminal_lines_end_with_the_verdict_and_its_reasons() -> None:
    run = make_run(1)
    checks = thresholds_from_table({"recall": 0.99}, source="ragev.toml",
                                   directions={"recall": "higher"})
    results = tuple(check_thresholds(run, checks))
    outcome = Outcome(
        runs=(run,), facts=RunFacts(cache_hits=3, cache_misses=1, interrupted="interrupted"),
        thresholds=results, failures=tuple(r.reason for r in results if r.reason),
        warnings=("2 questions have no reference answer: 7, 8",), errors=1,
        interrupted="ragev: run interrupted: 3 of 5 questions answered",
    )
    lines = list(terminal_lines(outcome, verbose=0))
    texts = [line for line, _ in lines]
    assert any("recall" in line and "FAIL" in line for line in texts)
    assert "ragev: errors 1, fallback answers 0, answer cache 3 hits / 1 misses" in texts
    assert ("ragev: warning: 2 questions have no reference answer: 7, 8", {"yellow": True}) in lines
    assert texts[-2] == "ragev: run interrupted: 3 of 5 questions answered"
    assert lines[-1] == ("ragev: verdict FAILED (1 check, 1 error, interrupted)",
                         {"red": True, "bold": True})
    passed = list(terminal_lines(Outcome(runs=(run,), facts=RunFacts()), verbose=0))
    assert passed[-1] == ("ragev: verdict passed", {"green": True, "bold": True})


def test_a_shard_says_only_that_it_was_not_gated() -> None:
    run = make_run(1)
    part = ShardPart(spec=ShardSpec(2, 4), questions=tuple(s.qid for s in run.samples),
                     dataset_questions=40)
    outcome = Outcome(runs=(run,), facts=RunFacts(), notes=(part.line,), shard=part)
    texts = [line for line, _ in terminal_lines(outcome, verbose=0)]
    assert texts[-1] == part.line
    assert texts[-1].startswith(f"ragev: shard 2 of 4: {len(run.samples)} of 40 questions "
                                "answered, written as a partial report; not gated: ")
    assert not [line for line in texts if line.startswith("ragev: verdict")]
    # A shard whose own questions raised says why it fails, still without a verdict.
    failing = Outcome(runs=(run,), facts=RunFacts(), notes=(part.line,), shard=part,
                      failures=("ragev: 1 question(s) below their [item_thresholds]: q3",))
    texts = [line for line, _ in terminal_lines(failing, verbose=0)]
    assert texts[-2:] == [part.line, "ragev: 1 question(s) below their [item_thresholds]: q3"]
    assert failing.failed and not [line for line in texts if line.startswith("ragev: verdict")]
