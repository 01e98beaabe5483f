"""The sections every report gains for a person who must act: errors, unattributed chunks,
latency and tokens, the answering pipeline, the weakest questions, the drill-down."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.evaluation import (
    Outcome,
    QuestionError,
    RunFacts,
    chunk_share,
    lowest_questions,
)
from pytest_ragev.gate import GateRules, compare, top_regressions
from pytest_ragev.gate.workflow import GateOutcome
from pytest_ragev.report import (
    final_report,
    junit_properties,
    render_html,
    render_markdown,
    terminal_lines,
)
from pytest_ragev.report.terminal import REGRESSIONS_SHOWN, drill_down, render_errors
from tests.unit.report._html import find, rows, text, tree
from tests.unit.report._models import EVIL, make_run, report_outcome

QUESTIONS = {
    1: "长城有多长？",
    2: "Wie lang ist der Rhein?",
    3: "Какова длина Волги?",
    4: "富士山の標高は？",
    5: "한라산의 높이는?",
}
ERRORS = (
    QuestionError(qid=3, question=QUESTIONS[3], error="TimeoutError: 模型超时 after 30 s"),
    QuestionError(qid=5, question=QUESTIONS[5], error=f"ValueError: {EVIL}"),
    QuestionError(qid=5, question=QUESTIONS[5], error="TimeoutError: read timed out",
                  variant="k10"),
)


def reasons_run(variant: str | None = None) -> RunResult:
    """Five questions: two raised, three answered with chunk texts, latency and tokens."""
    samples = []
    recall = {1: 0.0, 2: 0.5, 4: 1.0}
    for qid, question in QUESTIONS.items():
        error = next((e.error for e in ERRORS if e.qid == qid and e.variant == variant), None)
        metrics = {} if error else {"recall": recall.get(qid, 1.0), "rougel": 0.2 * qid}
        samples.append(SampleResult(
            qid=qid, question=question, retrieval_gt=[[qid]],
            retrieval_ids=[] if error else [90 + qid, qid],
            generated_text="" if error else f"答案 {qid}", generated_gt=f"参考答案 {qid}",
            metrics=metrics, error=error, variant=variant,
            meta={} if error else {"latency_s": qid / 10, "prompt_tokens": 100,
                                   "completion_tokens": 7},
            chunks=0 if error else 2, unattributed=0 if error else 1,
            unattributed_example=None if error else f"改写过的段落 {qid}",
        ))
    summary = {
        name: MetricSummary(name, sum(s.metrics[name] for s in samples if name in s.metrics) / 3, 3)
        for name in ("recall", "rougel")
    }
    return RunResult(
        dataset_id="mini", fingerprint="ab" * 32, dataset_stats={}, profile="weknora",
        params={"pipeline": {"name": "conftest", "answered_by": "conftest hooks (conftest.py)"}},
        params_hash="h", samples=samples, summary=summary, variant=variant,
    )


def outcome_of(*, gate: GateOutcome | None = None) -> Outcome:
    base, variant = reasons_run(), reasons_run("k10")
    return Outcome(
        runs=(base, variant), facts=RunFacts(task_id="evaluation_1_ab_mini"),
        gate=gate or GateOutcome(), errors=3, error_list=ERRORS,
        warnings=("3/6 retrieved chunks (50%) matched no corpus passage",),
        lowest=tuple(lowest_questions(base, m, 10) for m in ("recall", "rougel")),
        passages={1: "长城是中国古代的军事防御工程。", 2: "Der Rhein ist 1233 Kilometer lang.",
                  91: f"Ein Ablenker {EVIL}"},
    )


def test_terminal_errors_section_counts_types_and_names_questions() -> None:
    lines = render_errors(ERRORS)
    assert lines[0] == "ragev: errors: 3 question(s) raised (TimeoutError 2, ValueError 1):"
    assert lines[1:5] == ["  q3  Какова длина Волги?", "      TimeoutError: 模型超时 after 30 s",
                          "  q5  한라산의 높이는?", f"      ValueError: {EVIL}"]
    assert lines[5] == "  q5 [k10]  한라산의 높이는?"
    short = render_errors(ERRORS, limit=1)
    assert short[-1].startswith("  … 2 more (-v lists all")
    texts = [line for line, _ in terminal_lines(outcome_of(), verbose=0)]
    assert texts[-2] == ("ragev: 3 questions raised an error: q3, q5, q5 [k10] "
                         "(TimeoutError 2, ValueError 1)")
    assert "  pipeline: conftest hooks (conftest.py)" in texts
    assert ("  latency p50 0.20 s, p95 0.38 s (3 answers); tokens 300 prompt + 21 completion "
            "= 321 (3 answers)") in texts
    # Both runs' chunks: three answers of the base run, four of k10, two chunks each.
    assert "ragev: errors 3, fallback answers 0, unattributed chunks 7/14 (50%)" in texts


def test_terminal_lists_the_weakest_questions_with_v_when_nothing_was_compared() -> None:
    quiet = [line for line, _ in terminal_lines(outcome_of(), verbose=0)]
    assert not any("lowest-scoring" in line for line in quiet)
    loud = [line for line, _ in terminal_lines(outcome_of(), verbose=1)]
    start = loud.index("ragev: 2 lowest-scoring question(s) by recall of 3 (* = relevant passage):")
    assert loud[start + 1:start + 5] == [
        "  q1  recall 0.000  长城有多长？",
        "      retrieved [91, 1*]  relevant [1*]",
        "      reference '参考答案 1'",
        "      answer    '答案 1'",
    ]
    assert "ragev: 3 lowest-scoring question(s) by rougel of 3 (* = relevant passage):" in loud


def regression_gate(report_html: str | None = None) -> tuple[GateOutcome, str | None]:
    baseline, current = make_run(1), make_run(2, shift=-0.1)
    comparison = compare(baseline, current, GateRules(resamples=2000))
    return GateOutcome(comparisons=(comparison,), regressions=tuple(
        top_regressions(baseline, current, 10)), baseline_runs={None: baseline}), report_html


def test_after_a_regression_the_top_three_and_a_pointer_show_without_v() -> None:
    gate, _ = regression_gate()
    outcome = dataclasses.replace(outcome_of(gate=gate), report_html="reports/ragev.html")
    lines = drill_down(outcome, verbose=0)
    assert lines[0] == f"ragev: {REGRESSIONS_SHOWN} most regressed question(s) (* = relevant passage):"
    assert sum(line.startswith("  q") for line in lines) == REGRESSIONS_SHOWN
    assert lines[-1] == ("ragev: per-question details: -v lists 10; "
                         "the HTML report reports/ragev.html shows each question")
    without_html = drill_down(dataclasses.replace(outcome, report_html=None), verbose=0)
    assert without_html[-1].endswith("--ragev-html PATH shows each question")
    assert drill_down(outcome, verbose=1) == []  # -v prints all of them already
    assert drill_down(outcome_of(), verbose=0) == []  # nothing regressed


def test_markdown_has_the_errors_and_the_weakest_questions() -> None:
    page = render_markdown(outcome_of())
    assert "### Errors (3)" in page and "`TimeoutError` 2 · `ValueError` 1" in page
    assert "| q3 | Какова длина Волги? | TimeoutError: 模型超时 after 30 s |" in page
    # User text is escaped: no markup, and its "|" does not split the cell.
    assert "<script>" not in page and "&lt;script&gt;alert('x')&lt;/script&gt; \\| pipe" in page
    assert "> ⚠️ 3/6 retrieved chunks (50%) matched no corpus passage" in page
    assert "pipeline `conftest hooks (conftest.py)`" in page
    assert "unattributed chunks 3/6 (50%)" in page  # the base run's
    assert "### Lowest-scoring questions by recall" in page
    assert "| 1 | 0.000 | 长城有多长？ | 参考答案 1 | [91, 1✓] | 答案 1 |" in page
    # With a baseline, the regressed questions are the per-question view.
    gate, _ = regression_gate()
    compared = outcome_of(gate=gate)
    assert "Lowest-scoring" not in render_markdown(compared)


def test_html_errors_weakest_questions_and_their_passages() -> None:
    page = render_html(outcome_of())
    doc = tree(page)
    [errors] = find(doc, "table", "errors")
    assert rows(errors)[1] == ["q3", "Какова длина Волги?", "TimeoutError",
                               "TimeoutError: 模型超时 after 30 s"]
    assert rows(errors)[2][-1] == f"ValueError: {EVIL}"
    assert "<script>alert" not in page
    recall_table = find(doc, "table", "lowest")[0]
    first = rows(recall_table)[1]
    assert first[:4] == ["1", "0.000", "长城有多长？", "参考答案 1"]
    # The retrieved list opens onto the passages' texts; a relevant one is marked.
    [details] = find(recall_table, "details")[:1]
    items = [text(li) for li in find(details, "li")]
    assert items == [f"91: Ein Ablenker {EVIL}", "1✓: 长城是中国古代的军事防御工程。"]
    assert "warning: 3/6 retrieved chunks (50%) matched no corpus passage" in text(doc)


def test_html_questions_table_is_sortable_and_filterable() -> None:
    page = render_html(outcome_of())
    doc = tree(page)
    [table] = find(doc, "table", "sortable")
    assert table["attrs"]["id"] == "questions"  # type: ignore[index]
    header = [h["attrs"]["data-key"] for h in find(table, "th")]  # type: ignore[index]
    assert header == ["qid", "question", "error", "recall", "rougel", "retrieved"]
    cells = [find(row, "td") for row in find(table, "tr")[1:]]
    assert [c[0]["attrs"]["data-sort"] for c in cells] == ["1", "2", "3", "4", "5"]  # type: ignore[index]
    # A question that raised has no value to sort: empty, so it sorts last either way.
    assert cells[2][3]["attrs"]["data-sort"] == "" and text(cells[2][3]) == "—"  # type: ignore[index]
    assert [i["attrs"]["data-filter"] for i in find(doc, "input")] == ["questions"]  # type: ignore[index]
    [script] = find(doc, "script")
    assert "table.sortable" in text(script) and "data-filter" in text(script)


def test_json_report_has_errors_attribution_usage_and_the_weakest_questions() -> None:
    data = json.loads(json.dumps(final_report(outcome_of(), dataset_id="mini", params={})))["data"]
    assert data["errors"]["total"] == 3
    assert data["errors"]["by_type"] == {"TimeoutError": 2, "ValueError": 1}
    assert data["errors"]["questions"][0] == {
        "qid": 3, "variant": None, "question": "Какова длина Волги?", "type": "TimeoutError",
        "error": "TimeoutError: 模型超时 after 30 s"}
    assert data["attribution"] == {"chunks": 6, "unattributed": 3, "share": 0.5,
                                   "first": "改写过的段落 1"}
    assert data["usage"]["latency_s"] == {"p50": 0.2, "p95": pytest.approx(0.38), "n": 3}
    assert data["usage"]["tokens"] == {"prompt": 300, "completion": 21, "total": 321, "n": 3}
    assert data["variants"]["k10"]["attribution"]["chunks"] == 8
    assert [q["qid"] for q in data["lowest"]["recall"]] == [1, 2]
    assert data["lowest"]["recall"][0] == {
        "qid": 1, "question": "长城有多长？", "value": 0.0, "reference": "参考答案 1",
        "retrieval_ids": [91, 1], "relevant": [1], "generated_text": "答案 1"}
    assert data["samples"][0]["unattributed"] == 1
    assert data["verdict"]["failures"] == [
        "ragev: 3 questions raised an error: q3, q5, q5 [k10] (TimeoutError 2, ValueError 1)"]


def test_junit_has_error_types_chunks_latency_and_tokens() -> None:
    props = dict(junit_properties(outcome_of()))
    assert props["ragev.errors.TimeoutError"] == "2" and props["ragev.errors.ValueError"] == "1"
    assert props["ragev.pipeline"] == "conftest hooks (conftest.py)"
    assert (props["ragev.chunks"], props["ragev.unattributed_chunks"]) == ("6", "3")
    assert props["ragev.latency_p50_s"] == "0.200000"
    assert props["ragev.tokens.total"] == "321"
    plain = dict(junit_properties(report_outcome(runs=[make_run(1)])))
    assert not [name for name in plain if name.startswith(("ragev.chunks", "ragev.latency"))]


def test_chunk_share_of_a_run() -> None:
    share = chunk_share(reasons_run().samples)
    assert (share.chunks, share.unattributed, share.first) == (6, 3, "改写过的段落 1")
    assert share.text == "3/6 retrieved chunks (50%) matched no corpus passage"


def test_html_errors_table_is_capped_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_ragev.report import html

    monkeypatch.setattr(html, "ERRORS_SHOWN", 2)
    page = render_html(outcome_of())
    [errors] = find(tree(page), "table", "errors")
    assert len(rows(errors)) == 3  # the header and two questions
    assert ("The first 2 of 3 are listed; the JSON report (--ragev-report) lists every one."
            in page)
    # The counts per type still cover all three.
    assert "TimeoutError <b>2</b>" in page
    monkeypatch.setattr(html, "ERRORS_SHOWN", 3)
    assert "are listed" not in render_html(outcome_of())
