"""JUnit properties: the run's figures where CI dashboards read them."""

from __future__ import annotations

from pytest_ragev.evaluation import Outcome
from pytest_ragev.report import (
    junit_properties,
)
from tests.unit.report._models import make_run, report_outcome


def test_junit_properties(model: Outcome) -> None:
    props = dict(junit_properties(model))
    assert props["ragev.verdict"] == "failed"
    assert props["ragev.errors"] == "2" and props["ragev.fallbacks"] == "1"
    assert props["ragev.task_id"] == "evaluation_ci_1_abcd_samples"
    assert props["ragev.questions"] == "60"
    recall = model.runs[0].summary["recall"].mean
    assert props["ragev.recall"] == f"{recall:.6f}"
    assert props["ragev.recall.status"] == "regressed"
    assert float(props["ragev.recall.delta"]) < 0
    assert "ragev.k10.recall" in props
    names = [name for name, _ in junit_properties(model)]
    assert len(names) == len(set(names))
    passed = dict(junit_properties(report_outcome(runs=[make_run(1)])))
    assert passed["ragev.verdict"] == "passed" and passed["ragev.failures"] == "0"
