"""The dashboard's compare view: the questions behind each regressed metric, and what
makes two runs hard to compare."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.core.types import METRIC_NAMES
from pytest_ragev.server.dashboard import (
    SCRIPT,
    comparability,
    compare_page,
    phase_text,
    run_page,
    runs_page,
    safe_next,
    trends_page,
)
from pytest_ragev.server.keys import Principal

QUESTIONS = ["长城有多长？", "Wann wurde der Kölner Dom fertiggestellt?",
             "Какая самая длинная река в Европе?"]


def _run(scores: Mapping[str, Mapping[int, float]], *, profile: str = "weknora",
         fingerprint: str = "a" * 64, params: dict[str, Any] | None = None) -> RunResult:
    qids = sorted({qid for values in scores.values() for qid in values})
    samples = [
        SampleResult(qid=qid, question=QUESTIONS[qid % 3] + f" ({qid})",
                     retrieval_gt=[[qid]], retrieval_ids=[qid], generated_text="…",
                     generated_gt="…", metrics={m: v[qid] for m, v in scores.items()})
        for qid in qids
    ]
    summary = {name: MetricSummary(name=name, mean=sum(v.values()) / len(v), n=len(v))
               for name, v in scores.items()}
    return RunResult(dataset_id="multi", fingerprint=fingerprint, dataset_stats={},
                     profile=profile, params=params or {"pipeline": {"mode": "a"}},
                     params_hash="h" * 64, samples=samples, summary=summary)


def _row(task_id: str, config: str = "tradeoff") -> dict[str, Any]:
    return {"task": {"id": task_id, "start_time": "2026-12-05T11:14:33.000+00:00",
                     "status": 2, "err_msg": "", "total": 30, "finished": 30,
                     "end_time": None, "duration": 3.0, "dataset_id": "multi"},
            "request": {"config": config, "knowledge_base_id": config, "chat_id": None,
                        "rerank_id": None, "variant": [], "limit": None, "profile": None},
            "metric": None, "verdict": None}


def test_a_retrieval_regression_behind_a_generation_gain_lists_its_questions() -> None:
    qids = range(1, 31)
    before = _run({"ndcg10": dict.fromkeys(qids, 1.0), "rougel": dict.fromkeys(qids, 0.2)})
    # Odd questions rank a wrong passage first (-0.5), every answer is now right (+0.8):
    # summed over the metrics, no question got worse.
    after = _run({"ndcg10": {q: 0.5 if q % 2 else 1.0 for q in qids},
                  "rougel": dict.fromkeys(qids, 1.0)}, params={"pipeline": {"mode": "b"}})
    page = compare_page(_row("evaluation_1_a"), _row("evaluation_1_b"), before, after)
    assert "Questions that got worse" in page
    assert 'data-regressed="ndcg10"' in page
    section = page[page.index('data-regressed="ndcg10"'):]
    listed = [int(q) for q in re.findall(r"<tr><td>(\d+)</td>", section)]
    assert listed == [1, 3, 5, 7, 9]  # worst first, ties by qid, five per metric
    assert "−0.500" in section  # the figure as every report writes it (U+2212)
    assert "Over all metrics" not in page  # the summed ranking lists nobody here
    assert "their settings differ in pipeline.mode." in page


def test_runs_that_are_hard_to_compare_say_why() -> None:
    scores = {"recall": {1: 1.0, 2: 0.5}}
    base = _run(scores)
    assert comparability(_row("a"), _row("b"), base, _run(scores)) == []
    other = _run(scores, profile="standard", fingerprint="b" * 64)
    lines = comparability(_row("a"), _row("b", config="slow"), base, other)
    assert lines[0].startswith("A was scored with the weknora profile, B with standard")
    assert lines[1].startswith("the datasets differ (A multi aaaaaaaaaaaa, B multi bbbbbbbbbbbb)")
    assert lines[2] == "A ran config tradeoff, B config slow."
    limited = _run(scores, fingerprint="c" * 64,
                   params={"pipeline": {"mode": "a"}, "dataset": {"limit": 12}})
    assert comparability(_row("a"), _row("b"), base, limited) == [
        "A ran all questions of multi, B the first 12 questions: only the questions both "
        "ran are compared."]
    page = compare_page(_row("a"), _row("b", config="slow"), base, other)
    assert 'class="warn" data-caveats="3"' in page


def test_a_running_task_page_has_the_parts_the_script_keeps_current() -> None:
    row = _row("evaluation_1_running")
    row["task"] = {**row["task"], "status": 1, "finished": 4}
    row["metric"] = {"retrieval_metrics": {"recall": 0.75}, "generation_metrics": {},
                     "counts": {"recall": 4}}
    page = run_page(row, params=None, has_report=False, log_tail=None, previous=None)
    live = page[page.index('<div data-live="evaluation_1_running">'):]
    assert '<td data-field="questions">4/30</td>' in live
    assert '<td class="num" data-metric="recall">0.750</td>' in live
    assert '<td class="num" data-metric-n="recall">4</td>' in live
    assert 'data-running="1"' in page  # the progress bar the script polls for



def test_the_compare_page_shows_each_slice_s_change_when_the_runs_record_slices() -> None:
    qids = range(60)
    slices = {q: ("lang:zh" if q % 3 == 0 else "lang:de" if q % 3 == 1 else "lang:ru",
                  *(("tag:billing",) if q % 2 else ())) for q in qids}

    def sliced(run: RunResult) -> RunResult:
        return replace(run, samples=[replace(s, slices=slices[s.qid]) for s in run.samples])

    before = sliced(_run({"recall": dict.fromkeys(qids, 1.0), "rougel": dict.fromkeys(qids, 0.8)}))
    # The Chinese questions lose their recall; the others keep it.
    after = sliced(_run({"recall": {q: 0.0 if q % 3 == 0 else 1.0 for q in qids},
                         "rougel": dict.fromkeys(qids, 0.8)}))
    page = compare_page(_row("a"), _row("b"), before, after)
    section = page[page.index("<h2>Slices</h2>"):]
    rows = {row[0]: row[1:] for row in re.findall(
        r"<tr><td>([a-z:]+)</td><td class=\"num\">(\d+)</td>(.*?)</tr>", section)}
    assert set(rows) == {"lang:zh", "lang:de", "lang:ru", "tag:billing"}
    assert rows["lang:zh"][0] == "20" and "−1.000 (regressed)" in rows["lang:zh"][1]
    assert "+0.000 (unchanged)" in rows["lang:de"][1]
    assert "<h2>Slices</h2>" not in compare_page(_row("a"), _row("b"), _run(
        {"recall": {1: 1.0}}), _run({"recall": {1: 0.0}}))


@pytest.mark.parametrize(("asked", "kept"), [
    ("/trends", "/trends"), ("/?config=slow&status=2", "/?config=slow&status=2"),
    ("/runs/evaluation_1_0_00_multi", "/runs/evaluation_1_0_00_multi"),
    ("//evil.example/x", "/"), ("/\\evil.example/x", "/"), ("/\\/evil.example", "/"),
    ("/\t/evil.example", "/"), ("/\n/evil.example", "/"), ("/\r//evil.example", "/"),
    ("/ /evil.example", "/"), ("/\x7f/evil", "/"), ("https://evil.example", "/"),
    ("javascript:alert(1)", "/"), ("", "/"), (None, "/"),
])
def test_login_goes_only_to_a_path_of_this_server(asked: str | None, kept: str) -> None:
    assert safe_next(asked) == kept


def test_the_scripts_redirect_check_resolves_the_url_as_the_browser_does() -> None:
    # The page's script must apply the same rule: it resolves `next` against the origin
    # and keeps it only when it stays there (a character test missed /\host, /<tab>/host).
    assert "target.origin !== location.origin" in SCRIPT
    assert "new URL(next, location.origin)" in SCRIPT
    assert "next.charAt(1) === '/'" not in SCRIPT


def test_a_failed_verdict_is_not_green_and_says_why() -> None:
    failed = {**_row("evaluation_1_failed"), "verdict": {
        "passed": False, "failures": ["ragev: recall 0.500 < 0.9 <b>"], "errors": 0}}
    passed = {**_row("evaluation_1_passed"), "verdict": {"passed": True, "failures": []}}
    page = runs_page([failed, passed], total=2, page=1, page_size=50,
                     principal=Principal("k1", "viewer", "none", 1), filters={})
    rows = dict(re.findall(r'<tr data-status="2" data-live="([^"]+)">(.*?)</tr>', page, re.S))
    assert '<span class="badge s2x">success</span>' in rows["evaluation_1_failed"]
    assert ('<span class="badge vfail" data-verdict="failed" title="ragev: recall 0.500 &lt; '
            '0.9 &lt;b&gt;">failed</span>') in rows["evaluation_1_failed"]
    assert '<span class="badge s2">success</span>' in rows["evaluation_1_passed"]
    assert 'data-verdict="passed"' in rows["evaluation_1_passed"]
    run = run_page(failed, params=None, has_report=False, log_tail=None, previous=None)
    assert re.search(r"<h1>evaluation_1_failed <span class=\"badge s2x\">success</span> "
                     r"verdict <span class=\"badge vfail\"", run)


def test_a_running_task_shows_its_phase() -> None:
    assert phase_text({"name": "building_kb", "done": 120, "total": 400}) == (
        "building the knowledge base 120/400")
    assert phase_text({"name": "scoring"}) == "scoring" and phase_text(None) == ""
    row = {**_row("evaluation_1_running"), "phase": {"name": "answering"}}
    row["task"] = {**row["task"], "status": 1}
    page = run_page(row, params=None, has_report=False, log_tail=None, previous=None)
    assert '<span class="phase" data-field="phase">answering</span>' in page
    done = run_page(_row("evaluation_1_done"), params=None, has_report=False, log_tail=None,
                    previous=None)
    assert 'data-field="phase"' not in done


def test_trends_keep_limited_runs_on_a_line_of_their_own() -> None:
    point = {"id": "t", "start_time": "2026-12-05T11:14:33.000+00:00",
             "metric": {"retrieval_metrics": {"recall": 0.5}}}
    page = trends_page([("multi", "slow", None, [point]), ("multi", "slow", 3, [point])])
    assert 'data-series="multi/slow"' in page and "· all questions ·" in page
    assert 'data-series="multi/slow/limit=3"' in page and "the first 3 questions" in page


def test_a_long_config_name_may_break_at_its_separators() -> None:
    row = _row("evaluation_1_x", config="team/<chunk>-256_v2")
    page = runs_page([row], total=1, page=1, page_size=50,
                     principal=Principal("k1", "viewer", "none", 1), filters={})
    assert '<td class="config">team/<wbr>&lt;chunk&gt;-<wbr>256_<wbr>v2</td>' in page
    assert "1 task · page 1 of 1" in page


def test_judged_similarity_and_custom_metrics_have_rows_and_trends() -> None:
    """The run page and the trends show every metric a run has a mean for, not only the
    twelve: the judged ones (quality_metrics) and custom ones, names escaped."""
    metric = {"retrieval_metrics": {"recall": 0.5},
              "generation_metrics": {"rougel": 0.25},
              "quality_metrics": {"correctness": 0.75, "faithfulness": 1.0},
              "custom_metrics": {"länge<b>": 0.125},
              "counts": {"recall": 3, "correctness": 3, "länge<b>": 3}}
    row = {**_row("evaluation_1_judged"), "metric": metric,
           "request": {**_row("x")["request"], "judge_id": "qwen-72b"}}
    page = run_page(row, params=None, has_report=False, log_tail=None, previous=None)
    cells = dict(re.findall(r'<td class="num" data-metric="([^"]+)">([^<]*)</td>', page))
    assert cells["recall"] == "0.500" and cells["correctness"] == "0.750"
    assert cells["faithfulness"] == "1.000" and cells["länge&lt;b&gt;"] == "0.125"
    names = re.findall(r'data-metric="([^"]+)"', page)
    assert names == [*METRIC_NAMES, "correctness", "faithfulness", "länge&lt;b&gt;"]
    assert "<tr><td>judge</td><td>qwen-72b</td></tr>" in page
    point = {"id": "t", "start_time": "2026-12-05T11:14:33.000+00:00", "metric": metric}
    trends = trends_page([("multi", "slow", None, [point])])
    assert ">correctness</text>" in trends and ">länge&lt;b&gt;</text>" in trends
