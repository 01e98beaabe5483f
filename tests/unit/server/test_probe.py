"""The probe scores one plugin record as the plugin does at the end of the run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_ragev.core.types import MetricInput
from pytest_ragev.metrics import score
from pytest_ragev.server import probe


def _record(**extra: object) -> dict[str, object]:
    record = {"qid": 3, "question": "长城有多长？", "retrieval_gt": [[3, 4]],
              "grades": {"3": 1.0, "4": 1.0}, "retrieval_ids": [4, 9, 3],
              "generated_text": "长城全长超过两万公里。", "generated_gt": "长城超过两万公里。",
              "has_answer": True, "error": None, "variant": None}
    record.update(extra)
    return record


def test_metrics_equal_the_engine() -> None:
    line = probe.sample_line(_record(), "weknora")
    assert line is not None
    expected = score([MetricInput([[3, 4]], [4, 9, 3], "长城全长超过两万公里。",
                                  "长城超过两万公里。")])[0]
    assert line["metrics"] == pytest.approx(expected)


def test_only_the_metrics_that_apply() -> None:
    no_qrels = probe.sample_line(_record(retrieval_gt=[], grades={}), "weknora")
    assert no_qrels is not None and "recall" not in no_qrels["metrics"]
    assert "rougel" in no_qrels["metrics"]
    no_answer = probe.sample_line(_record(has_answer=False, generated_gt=""), "standard")
    assert no_answer is not None and "bleu1" not in no_answer["metrics"]
    failed = probe.sample_line(_record(error="pipeline raised TimeoutError"), "weknora")
    assert failed is not None and failed["metrics"] == {}
    assert probe.sample_line({"qid": "x"}, "weknora") is None


def test_the_hook_appends_one_line_per_record(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv(probe.RECORDS_ENV, str(path))
    monkeypatch.setenv(probe.PROFILE_ENV, "weknora")
    # The plugin attaches each record as JSON text.
    record = json.dumps(_record(), ensure_ascii=False)
    report = SimpleNamespace(when="call", user_properties=[("ragev", record),
                                                            ("other", {"qid": 1})])
    probe.pytest_runtest_logreport(report)
    probe.pytest_runtest_logreport(SimpleNamespace(when="teardown",
                                                   user_properties=[("ragev", record)]))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["question"] == "长城有多长？"
