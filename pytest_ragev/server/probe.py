"""Loaded into each task's pytest run (``-p pytest_ragev.server.probe``): per-question lines.

The plugin's progress report holds ``finished/total`` but no metrics until the run
ends, while the original API answers the running mean during a run. So the server
loads this module into the evaluation's own process: for each question the plugin
records, it scores that one record with the metric engine and appends one JSON line
(the sample as the final report writes it) to the file named by
``$RAGEV_SERVE_RECORDS``. The server reads the lines as they come and averages them.

pytest finds hook functions by name, so nothing here imports pytest; the only pytest
object touched is the test report's ``when`` and ``user_properties``, where the plugin
puts each question's record.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from pytest_ragev.core.types import GENERATION_METRICS, RETRIEVAL_METRICS, MetricInput
from pytest_ragev.metrics import score

#: The environment variables the server sets for the run.
RECORDS_ENV = "RAGEV_SERVE_RECORDS"
PROFILE_ENV = "RAGEV_SERVE_PROFILE"
_lock = threading.Lock()


def sample_line(record: dict[str, Any], profile: str) -> dict[str, Any] | None:
    """The sample (with metrics) of one plugin record, or ``None`` if it is not one."""
    try:
        qid = int(record["qid"])
        gt = [[int(x) for x in group] for group in record["retrieval_gt"]]
        ids = [int(x) for x in record["retrieval_ids"]]
        text = str(record["generated_text"])
        reference = str(record["generated_gt"])
    except (KeyError, TypeError, ValueError):
        return None
    error = record.get("error") or None
    metrics: dict[str, float] = {}
    if error is None:
        raw_grades = record.get("grades") or {}
        grades = {int(pid): float(grade) for pid, grade in dict(raw_grades).items()} or None
        row = score([MetricInput(gt, ids, text, reference)], profile=profile, grades=[grades])[0]
        # As the plugin does: no retrieval metrics without qrels, no generation metrics
        # without a reference answer.
        has_qrels, has_answer = bool(gt), bool(record.get("has_answer", True))
        metrics = {
            name: float(value) for name, value in row.items()
            if (name in RETRIEVAL_METRICS and has_qrels)
            or (name in GENERATION_METRICS and has_answer)
        }
    return {
        "qid": qid, "question": str(record.get("question", "")), "retrieval_gt": gt,
        "retrieval_ids": ids, "generated_text": text, "generated_gt": reference,
        "metrics": metrics, "error": error, "variant": record.get("variant"),
    }


def pytest_runtest_logreport(report: Any) -> None:
    """Append one line per recorded question (hook found by name by pytest)."""
    path = os.environ.get(RECORDS_ENV)
    if not path or getattr(report, "when", None) != "call":
        return
    profile = os.environ.get(PROFILE_ENV) or "weknora"
    for name, value in getattr(report, "user_properties", ()):
        # The plugin attaches each record as JSON text (so --junitxml writes JSON).
        if name != "ragev" or not isinstance(value, str):
            continue
        try:
            line = sample_line(json.loads(value), profile)
        except (TypeError, ValueError):  # the final report still scores it
            line = None
        if line is None:
            continue
        text = json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n"
        with _lock, open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
