"""End to end: reports and baselines are strict JSON (#16 item 12).

A pipeline that puts NaN or an infinity into ``Answer.meta`` used to get bare ``NaN`` /
``Infinity`` into the JSON report, which JSON parsers other than Python's refuse. They are
now recorded as null, with one warning line for the run.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Project = Callable[..., Path]

NAN_META = textwrap.dedent(
    """
    import math
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        meta = {"latency_ms": 12.5, "置信度": math.nan if case.qid % 2 else 0.9,
                "scores": [1.0, math.inf]}
        return Answer(retrieved=list(case.pids), text=case.answer or "", meta=meta)
    """
)


def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_meta_is_null_in_the_report_and_the_baseline_with_one_warning(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project('[baseline]\npath = "ragev-baseline.json"\n', conftest=NAN_META)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-update-baseline")
    assert result.ret == 0, result.stdout.str()[-3000:]
    out = result.stdout.str()
    assert out.count("held NaN or an infinity in Answer.meta") == 1
    line = next(line for line in out.splitlines() if "held NaN" in line)
    assert line.startswith("ragev: warning: 5 answer(s) held NaN or an infinity")
    assert "(first: q1 meta['置信度'])" in line and "recorded as null" in line
    report = _strict((pytester.path / "r.json").read_text(encoding="utf-8"))
    metas = {s["qid"]: s.get("meta") for s in report["data"]["samples"]}
    assert metas[1] == {"latency_ms": 12.5, "置信度": None, "scores": [1.0, None]}
    assert metas[2] == {"latency_ms": 12.5, "置信度": 0.9, "scores": [1.0, None]}
    _strict((pytester.path / "ragev-baseline.json").read_text(encoding="utf-8"))
