"""The dashboard's compare view: the questions behind each regressed metric, and what
makes two runs hard to compare."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.server.dashboard import comparability, compare_page, run_page

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
