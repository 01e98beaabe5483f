"""The JSON report in WeKnora's EvaluationDetail shape, while a run goes and at its end."""

from __future__ import annotations

import json

from pytest_ragev.evaluation import Outcome, RunFacts
from pytest_ragev.report import final_report, progress_report
from tests.unit.report._models import make_run


def test_progress_report_has_the_seeds_task_fields() -> None:
    facts = RunFacts(task_id="evaluation_ci_1_ab_mini", start_time="2026-12-03T00:00:00.000+00:00",
                     total=5, finished=2)
    report = progress_report(facts, dataset_id="mini", params={"dataset": {"id": "mini"}})
    assert report == {"success": True, "data": {
        "task": {"id": "evaluation_ci_1_ab_mini", "dataset_id": "mini",
                 "start_time": "2026-12-03T00:00:00.000+00:00", "status": 1, "err_msg": "",
                 "total": 5, "finished": 2},
        "params": {"dataset": {"id": "mini"}}, "metric": None}}
    failed = progress_report(facts, dataset_id="mini", params={}, status=3, err_msg="kaputt")
    assert failed["success"] is False and failed["data"]["task"]["err_msg"] == "kaputt"


def test_final_report_holds_the_metrics_samples_verdict_and_variants() -> None:
    base, variant = make_run(1), make_run(2, variant="k10")
    outcome = Outcome(runs=(base, variant), facts=RunFacts(total=2, finished=2),
                      warnings=("问题 7 没有参考答案",))
    report = final_report(outcome, dataset_id="samples", params={})
    data = json.loads(json.dumps(report, ensure_ascii=False))["data"]
    assert data["task"]["status"] == 2 and report["success"] is True
    assert set(data["metric"]) == {"retrieval_metrics", "generation_metrics", "counts"}
    assert data["metric"]["retrieval_metrics"]["recall"] == base.summary["recall"].mean
    assert len(data["samples"]) == len(base.samples) and "variant" not in data["samples"][0]
    assert data["verdict"] == {"passed": True, "failures": [], "errors": 0, "fallbacks": 0}
    assert data["warnings"] == ["问题 7 没有参考答案"]
    assert list(data["variants"]) == ["k10"] and "baseline" not in data
    stopped = final_report(Outcome(runs=(base,), facts=RunFacts(interrupted="interrupted by SIGTERM"),
                                   interrupted="ragev: run interrupted by SIGTERM"),
                           dataset_id="samples", params={})
    assert stopped["success"] is False and stopped["data"]["task"]["status"] == 3
    assert stopped["data"]["task"]["err_msg"] == (
        "interrupted by SIGTERM before every question was answered")
