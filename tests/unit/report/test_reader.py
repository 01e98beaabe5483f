"""A saved JSON report back into RunResult values that the gate can compare."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.core.results import RunResult
from pytest_ragev.gate import compare
from pytest_ragev.report.reader import ReportError, runs_from_report


def _sample(qid: int, recall: float, variant: str | None = None) -> dict[str, Any]:
    sample = {"qid": qid, "question": f"问题 {qid}: Wie hoch ist der Turm?",
              "retrieval_gt": [[qid]], "retrieval_ids": [qid, 99], "generated_text": "Antwort",
              "generated_gt": "答案", "metrics": {"recall": recall, "mrr": recall},
              "error": None}
    if variant is not None:
        sample["variant"] = variant
    return sample


def _block(samples: list[dict[str, Any]], profile: str = "weknora") -> dict[str, Any]:
    recalls = [s["metrics"]["recall"] for s in samples]
    mean = sum(recalls) / len(recalls) if recalls else None
    return {
        "params": {"dataset": {"id": "faq", "fingerprint": "f" * 64},
                   "pipeline": {"name": "builtin"}, "metrics": {"profile": profile}},
        "metric": {"retrieval_metrics": {"recall": mean, "mrr": mean, "precision": None},
                   "generation_metrics": {"rougel": None},
                   "custom_metrics": {"latency": 0.25},
                   "counts": {"recall": len(recalls), "mrr": len(recalls), "precision": 0,
                              "rougel": 0, "latency": len(recalls)}},
        "samples": samples,
    }


def _report(base: list[float], variant: list[float] | None = None) -> dict[str, Any]:
    data = {"task": {"id": "evaluation_x", "dataset_id": "faq", "status": 2},
            **_block([_sample(i + 1, r) for i, r in enumerate(base)])}
    if variant is not None:
        data["variants"] = {"k256": _block([_sample(i + 1, r, "k256")
                                            for i, r in enumerate(variant)])}
    return {"success": True, "data": data}


def test_base_and_variant_runs() -> None:
    runs = runs_from_report(_report([1.0, 0.5], [0.5, 0.5]), directions={"latency": "lower"})
    base, variant = runs
    assert isinstance(base, RunResult) and base.variant is None and variant.variant == "k256"
    assert base.fingerprint == "f" * 64 and base.profile == "weknora" and base.dataset_id == "faq"
    assert base.summary["recall"].mean == 0.75 and base.summary["recall"].n == 2
    assert base.summary["precision"].mean is None and base.summary["precision"].n == 0
    assert base.summary["latency"].direction == "lower"
    assert list(base.summary)[:3] == ["precision", "recall", "mrr"]  # report order
    assert base.samples[0].question.startswith("问题 1")
    assert base.params_hash != "" and base.params_hash == variant.params_hash


def test_two_reports_compare_with_the_gate() -> None:
    before = runs_from_report(_report([1.0] * 30))[0]
    after = runs_from_report(_report([0.0] * 30))[0]
    result = compare(before, after)
    recall = result.get("recall")
    assert recall is not None and recall.status == "regressed" and recall.delta == -1.0


def test_a_variant_only_report_keeps_the_variant_name() -> None:
    report = _report([])
    report["data"].update(_block([_sample(1, 1.0, "k256")]))
    assert runs_from_report(report["data"])[0].variant == "k256"


@pytest.mark.parametrize(
    ("change", "message"),
    [(lambda d: d.update(samples={}), "data.samples is a dict, not a list"),
     (lambda d: d.update(metric=[1]), "data.metric is a list, not an object"),
     (lambda d: d["samples"][0].pop("qid"), "data.samples[0] is not a sample record "
                                            "(missing key 'qid')"),
     (lambda d: d["metric"]["retrieval_metrics"].update(recall="high"),
      "data.metric.retrieval_metrics.recall is 'high'"),
     (lambda d: d["metric"]["counts"].update(recall=-1), "data.metric.counts.recall is -1")],
)
def test_bad_reports_name_the_key(change: Any, message: str) -> None:
    report = _report([1.0])
    change(report["data"])
    with pytest.raises(ReportError) as info:
        runs_from_report(report, source="r.json")
    assert str(info.value).startswith("r.json: ") and message in str(info.value)


def test_not_a_report() -> None:
    with pytest.raises(ReportError, match="the top level is a list"):
        runs_from_report([])


@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=20))
def test_samples_and_means_read_back(recalls: list[float]) -> None:
    run = runs_from_report(_report(recalls))[0]
    assert [s.metrics["recall"] for s in run.samples] == recalls
    assert run.scores("recall") == {i + 1: r for i, r in enumerate(recalls)}
