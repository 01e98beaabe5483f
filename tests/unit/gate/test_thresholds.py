"""[thresholds]: floors and ceilings, their lines and their errors."""

from __future__ import annotations

import pytest

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.gate import (
    MaxValue,
    MinValue,
    check_thresholds,
    thresholds_from_table,
)
from tests.unit.gate._runs import make_run


def test_threshold_line_format_and_direction() -> None:
    run = make_run(
        {"recall": {q: 0.412 for q in range(118)}, "latency": {q: 1.3 for q in range(118)}},
        directions={"latency": "lower"},
    )
    checks = thresholds_from_table(
        {"recall": 0.5, "latency": 1.0},
        source="ragev.toml",
        directions={"recall": "higher", "latency": "lower"},
    )
    assert checks == [MinValue("recall", 0.5), MaxValue("latency", 1.0)]
    results = check_thresholds(run, checks)
    assert [r.reason for r in results] == [
        "ragev: recall 0.412 < threshold 0.500 (n=118)",
        "ragev: latency 1.300 > threshold 1.000 (n=118)",
    ]
    assert not any(r.passed for r in results)
    assert MinValue("recall", 0.4).fails(run) is None
    assert MaxValue("latency", 2).fails(run) is None


def test_threshold_without_values_fails_and_bad_table_raises() -> None:
    run = make_run({"recall": {}})
    assert MinValue("recall", 0.5).fails(run) == (
        "ragev: recall has no values (n=0), threshold 0.500 unmet"
    )
    with pytest.raises(ConfigError, match=r"'recal' is not a metric; did you mean 'recall'\?"):
        thresholds_from_table({"recal": 0.5}, source="t", directions={"recall": "higher"})
    with pytest.raises(ConfigError, match="recall = 'high' is invalid; use a number"):
        thresholds_from_table({"recall": "high"}, source="t", directions={"recall": "higher"})
