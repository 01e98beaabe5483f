"""The checks before any question runs: the hooks' custom metrics, the baseline target."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragev.core.types import CustomMetric
from pytest_ragev.plugin.preflight import check_baseline_target, custom_metrics


def _metric(name: str) -> CustomMetric:
    return CustomMetric(name=name, function=lambda case: 1.0)


def test_the_custom_metrics_of_every_hook_in_order() -> None:
    first, second, third = _metric("tokens"), _metric("latency"), _metric("cost")
    # pluggy gives one result per implementation; a hook that returns None adds nothing.
    assert custom_metrics([[first, second], None, (third,)]) == (first, second, third)
    assert custom_metrics([]) == ()


def test_a_custom_metric_must_be_a_custom_metric_with_a_name_of_its_own() -> None:
    with pytest.raises(pytest.UsageError, match=r"returned 'tokens'; return pytest_ragev\."):
        custom_metrics([["tokens"]])
    with pytest.raises(pytest.UsageError, match=r"'latency' is used twice"):
        custom_metrics([[_metric("latency")], [_metric("latency")]])
    # A built-in metric's name, one of the twelve or an answer-quality one.
    for name in ("recall", "correctness", "similarity"):
        with pytest.raises(pytest.UsageError, match=rf"'{name}' is one of pytest-ragev's own "
                                                    "metrics"):
            custom_metrics([[_metric(name)]])


def test_the_baseline_target_must_be_a_writable_file_path(tmp_path: Path) -> None:
    source = tmp_path / "ragev.toml"
    check_baseline_target(tmp_path / "new" / "deeper" / "baseline.json", source)  # made later
    with pytest.raises(pytest.UsageError, match=r"needs a baseline path; set \[baseline\] path"):
        check_baseline_target(None, source)
    with pytest.raises(pytest.UsageError, match=r"is a folder"):
        check_baseline_target(tmp_path, source)
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(pytest.UsageError, match=r"is not a writable folder"):
        check_baseline_target(blocker / "baseline.json", source)
