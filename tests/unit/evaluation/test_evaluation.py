"""The run plan and the end of a run as a pure function: records in, decision out."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragev import CustomMetric
from pytest_ragev.config import RunOptions, load_config
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.evaluation import RunPlan


def write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    config = tmp_path / "ragev.toml"
    config.write_text(body, encoding="utf-8")
    return config


def test_unknown_threshold_metric_gets_a_suggestion(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[dataset]\npath = "data"\n[thresholds]\nrecal = 0.5\n'))
    with pytest.raises(ConfigError, match="did you mean 'recall'"):
        RunPlan.build(config, RunOptions())
    # A custom metric of that name is fine.
    plan = RunPlan.build(config, RunOptions(), [CustomMetric("recal", lambda m: 1.0)])
    assert [check.metric for check in plan.thresholds] == ["recal"]
