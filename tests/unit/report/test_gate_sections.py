"""The gate's parts of every report: short comparisons, edited questions, "not compared"."""

from __future__ import annotations

import json

from pytest_ragev.evaluation import Outcome, RunFacts
from pytest_ragev.gate import GateRules, compare, compare_variants
from pytest_ragev.gate.pairing import CorpusChange
from pytest_ragev.gate.workflow import GateOutcome, not_compared_line
from pytest_ragev.report import final_report, render_html, render_markdown
from pytest_ragev.report.terminal import terminal_lines
from tests.unit.report._models import make_run

RULES = GateRules(resamples=2000)


def _lines(outcome: Outcome, *, full: bool = False) -> list[str]:
    return [line for line, _ in terminal_lines(outcome, verbose=0, full=full)]


def _unchanged_outcome(**gate: object) -> Outcome:
    base = make_run(1)
    comparison = compare(make_run(1), base, RULES, changed=[3, 9])
    return Outcome(runs=(base,), facts=RunFacts(),
                   gate=GateOutcome(rules=RULES, comparisons=(comparison,),
                                    baseline_runs={None: make_run(1)}, **gate))  # type: ignore[arg-type]


def test_a_comparison_where_nothing_changed_is_one_line() -> None:
    lines = _lines(_unchanged_outcome())
    compared = [line for line in lines if "against the baseline" in line]
    assert compared == [
        "ragev: base configuration against the baseline, 58 shared questions (0 added, "
        "0 removed, 2 changed): no metric changed"
    ]
    # --ragev-summary=full: today's table, every metric.
    full = _lines(_unchanged_outcome(), full=True)
    start = full.index("ragev: base configuration against the baseline, 58 shared questions "
                       "(0 added, 0 removed, 2 changed):")
    assert [line.split()[0] for line in full[start + 2:start + 5]] == ["recall", "ndcg10", "bleu4"]


def test_short_comparisons_show_only_the_metrics_that_changed() -> None:
    before = make_run(1)
    after = make_run(1)
    # Only recall moves (by a clear amount); ndcg10 and bleu4 stay as they were.
    after.samples[:] = [s.scored({**s.metrics, "recall": 0.0}) for s in after.samples]
    comparison = compare(before, after, RULES)
    outcome = Outcome(runs=(after,), facts=RunFacts(),
                      gate=GateOutcome(rules=RULES, comparisons=(comparison,)))
    lines = _lines(outcome)
    start = lines.index("ragev: base configuration against the baseline, 60 shared questions:")
    assert lines[start + 2].split()[0] == "recall"
    assert lines[start + 3] == "  (2 more metrics unchanged; --ragev-summary=full shows them)"


def test_variant_tables_the_variants_table_shows_are_not_repeated() -> None:
    base, k10 = make_run(1), make_run(2, variant="k10", shift=0.02)
    outcome = Outcome(runs=(base, k10), facts=RunFacts(),
                      gate=GateOutcome(rules=RULES,
                                       variant_table=compare_variants(base, [k10], RULES)))
    short = _lines(outcome)
    assert not any(line.startswith("ragev: samples (variant k10)") for line in short)
    assert any(line.startswith("ragev: samples (base configuration)") for line in short)
    assert "ragev: variants against the base configuration:" in short
    assert any(line.startswith("ragev: samples (variant k10)") for line in _lines(outcome,
                                                                                   full=True))


def _not_compared() -> Outcome:
    reason = "ragev-baseline.json was computed with metric profile 'weknora', this run uses " \
             "'standard'; numbers across metric versions are not comparable: re-baseline"
    gate = GateOutcome(rules=RULES, baseline_path=None, not_compared=reason,
                       failures=(not_compared_line(reason),))
    return Outcome(runs=(make_run(1),), facts=RunFacts(), gate=gate, failures=gate.failures)


def test_not_compared_in_the_terminal_keeps_the_metrics_and_says_why() -> None:
    lines = _lines(_not_compared())
    assert lines[1].startswith("ragev: samples (base configuration), 60 questions")
    assert any(line.startswith("  recall ") for line in lines)
    assert lines[-2].startswith("ragev: gate not compared: ragev-baseline.json was computed "
                                "with metric profile 'weknora'")
    assert lines[-1] == "ragev: verdict FAILED (gate not compared, exit status 4)"


def test_not_compared_in_the_json_markdown_and_html_reports() -> None:
    outcome = _not_compared()
    data = json.loads(json.dumps(final_report(outcome, dataset_id="samples", params={})))
    assert data["success"] is False and data["data"]["task"]["status"] == 3
    assert data["data"]["task"]["err_msg"].startswith("gate not compared: ragev-baseline.json")
    assert data["data"]["metric"]["retrieval_metrics"]["recall"] is not None
    block = data["data"]["baseline"]
    assert block["compared"] is False and block["comparisons"] == []
    assert block["not_compared"].startswith("ragev-baseline.json was computed")
    model = outcome
    markdown = render_markdown(model)
    assert "**Gate not compared** with the baseline: ragev-baseline.json" in markdown
    assert "| recall |" in markdown  # the run's own metrics
    html = render_html(model)
    assert '<p class="notcompared"><b>Gate not compared</b>' in html
    assert "<td>recall</td>" in html


def test_added_removed_and_changed_ids_in_the_reports() -> None:
    before = make_run(1)
    after = make_run(1)
    after.samples[:] = [s for s in after.samples if s.qid != 60]  # removed
    comparison = compare(before, after, RULES, changed=[3, 9])
    gate = GateOutcome(rules=RULES, comparisons=(comparison,), baseline_runs={None: before},
                       new_variants=("k20",), corpus_change=CorpusChange(140, 142),
                       baseline_path=None)
    outcome = Outcome(runs=(after,), facts=RunFacts(), gate=gate)
    data = final_report(outcome, dataset_id="samples", params={})["data"]["baseline"]
    assert data["comparisons"][0]["changed"] == [3, 9]
    assert data["comparisons"][0]["removed"] == [60] and data["comparisons"][0]["added"] == []
    assert data["new_variants"] == ["k20"]
    assert data["corpus_changed"] == {"passages_before": 140, "passages_after": 142}
    model = outcome
    markdown = render_markdown(model)
    assert ("Not compared: 1 removed (60), 2 changed (3, 9). (removed: in the baseline, not in "
            "this run; changed: question, relevant passages or reference answer edited since "
            "the baseline.)") in markdown
    html = render_html(model)
    assert '<li class="changed"><b>2 changed</b>' in html and "3, 9</span>" in html
    # The terminal gives the counts only.
    assert any("(0 added, 1 removed, 2 changed)" in line for line in _lines(outcome))
    assert not any("3, 9" in line for line in _lines(outcome))
