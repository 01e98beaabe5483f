"""What every report says of a run, from one Outcome."""

from __future__ import annotations

from pathlib import Path

from pytest_ragev.core.shard import ShardSpec
from pytest_ragev.evaluation import Outcome, RunFacts, ShardPart
from pytest_ragev.gate import (
    GateRules,
    compare,
)
from pytest_ragev.report import render_html, render_markdown
from tests.unit.report._html import find, text, tree
from tests.unit.report._models import RULES, make_run, report_outcome


def test_the_outcome_answers_what_reports_ask() -> None:
    runs = [make_run(1), make_run(2, variant="b")]
    outcome = report_outcome(runs=runs, start_time="2000-01-01T00:00:00+00:00", duration_s=3.5)
    assert outcome.facts.duration_s == 3.5 and outcome.base_ran
    assert outcome.base is runs[0] and outcome.variants == [runs[1]]
    assert outcome.comparison is None and outcome.baseline is None
    assert outcome.passed and outcome.verdict_failures() == []
    failed = report_outcome(runs=runs, failures=["ragev: recall 0.5 < 0.6"])
    assert not failed.passed and failed.verdict_failures() == ["ragev: recall 0.5 < 0.6"]
    # A saved report read back records no duration: none is shown, never a made-up one.
    assert " s</span>" not in render_html(report_outcome(runs=runs))
    assert " s</span>" in render_html(outcome)


def test_write_example_report(tmp_path: Path, model: Outcome) -> None:
    # The renderer's output is a plain string; writing it is all a caller does.
    target = tmp_path / "report.html"
    target.write_text(render_html(model), encoding="utf-8")
    assert target.stat().st_size > 5000


def test_reports_of_a_variant_only_session_name_the_variant() -> None:
    variant = make_run(3, variant="k10")
    alone = report_outcome(runs=[variant])
    markdown = render_markdown(alone)
    assert "The base configuration did not run; variants in this run: `k10`." in markdown
    assert "Means of variant `k10`:" in markdown and "| recall |" in markdown
    page = tree(render_html(alone))
    assert "The base configuration did not run; variants in this run: k10." in text(page)
    bars = [r["attrs"]["data-series"] for r in find(page, "rect", "bar")]  # type: ignore[index]
    assert set(bars) == {"k10"}
    compared = report_outcome(
        runs=[variant], comparisons=[compare(make_run(4, variant="k10"), variant,
                                                          RULES)],
        baseline_runs={"k10": make_run(4, variant="k10")},
    )
    markdown = render_markdown(compared)
    assert "#### Variant k10 against its baseline" in markdown
    assert "Means of variant" not in markdown


def test_reports_say_when_p_is_adjusted(model: Outcome) -> None:
    # The fixture's comparison gates three metrics with the Holm correction.
    note = "p is adjusted for the 3 metrics tested together (Holm)."
    assert note in render_markdown(model)
    assert note in text(tree(render_html(model)))
    baseline, current = make_run(1), make_run(2, shift=-0.1)
    plain = report_outcome(
        runs=[current], baseline_runs={None: baseline},
        comparisons=[compare(baseline, current, GateRules(resamples=2000, correction="none"))],
    )
    assert "adjusted" not in render_markdown(plain)


def test_facts_of_a_variant_only_session_count_every_variant() -> None:
    runs = [make_run(3, variant="k10"), make_run(4, variant="k20")]
    model = report_outcome(runs=runs)
    assert not model.base_ran
    assert "2 variant(s)" in render_markdown(model)
    assert "2 variant(s)" in text(tree(render_html(model)))
    names = "The base configuration did not run; variants in this run: "
    assert names + "`k10`, `k20`." in render_markdown(model)
    assert names + "k10, k20." in text(tree(render_html(model)))
    both = report_outcome(runs=[make_run(1), runs[0]])
    assert both.base_ran and "1 variant(s)" in render_markdown(both)


def test_a_shards_markdown_and_html_headlines_say_not_gated_not_passed() -> None:
    run = make_run(1)
    part = ShardPart(spec=ShardSpec(2, 4), questions=tuple(s.qid for s in run.samples),
                     dataset_questions=40)
    shard = Outcome(runs=(run,), facts=RunFacts(), notes=(part.line,), shard=part)
    assert render_markdown(shard).startswith("## pytest-ragev: ⏸️ not gated (shard 2 of 4)\n")
    page = render_html(shard)
    assert "<title>pytest-ragev: not gated (shard 2 of 4)</title>" in page
    assert '<span class="badge ungated">not gated (shard 2 of 4)</span>' in page
    assert "passed" not in page.split("<body", 1)[1].split("</h1>", 1)[0]
    # A shard whose own questions failed says so, as any run does.
    failing = Outcome(runs=(run,), facts=RunFacts(), notes=(part.line,), shard=part,
                      failures=("ragev: 1 question(s) below their [item_thresholds]: q3",))
    assert render_markdown(failing).startswith("## pytest-ragev: ❌ failed\n")
    assert '<span class="badge fail">failed</span>' in render_html(failing)
