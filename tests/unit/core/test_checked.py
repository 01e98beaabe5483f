"""The checked reader of saved JSON: metric values checked in bulk as one by one."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_ragev.core.checked import Checked


class Damaged(Exception):
    pass


def checked() -> Checked:
    return Checked("r.json", error=Damaged)


def test_metric_values_accept_what_metric_value_accepts_and_name_places_only_on_failure(
) -> None:
    asked: list[str] = []

    def where(name: str) -> str:
        asked.append(name)
        return f"data.samples[3].metrics.{name} (qid 4)"

    # Floats in [0, 1] for the built-ins, any finite number for a custom metric: no place
    # is written for any of them.
    checked().metric_values({"recall": 0.0, "mrr": 1.0, "latency_s": 1e9, "tokens": -3.5},
                            where)
    assert asked == []
    # An int, which metric_value takes too, is taken (the one-by-one check decides).
    checked().metric_values({"ndcg10": 1, "tokens": 12}, where)


@pytest.mark.parametrize(("name", "value", "problem"), [
    ("recall", 1.0000001, "is 1.0000001, not a number in [0, 1]"),
    ("recall", -0.0001, "is -0.0001, not a number in [0, 1]"),
    ("correctness", math.nan, "is NaN, not a number in [0, 1]"),
    ("latency_s", math.inf, "is Infinity, not a finite number"),
    ("latency_s", -math.inf, "is -Infinity, not a finite number"),
    ("latency_s", math.nan, "is NaN, not a finite number"),
    ("recall", True, "is true, not a number"),
    ("recall", "0.5", "is \"0.5\", not a number"),
    ("recall", None, "is null, not a number"),
])
def test_metric_values_refuse_as_metric_value_does(name: str, value: Any, problem: str) -> None:
    values = {"precision": 0.5, name: value, "rougel": 7.0}
    with pytest.raises(Damaged) as bulk:
        checked().metric_values(values, lambda metric: f"data.samples[0].metrics.{metric}")
    # The first bad value in order, with the very line metric_value gives it.
    with pytest.raises(Damaged) as one:
        checked().metric_value(value, f"data.samples[0].metrics.{name}", name)
    assert str(bulk.value) == str(one.value) == f"r.json: data.samples[0].metrics.{name} {problem}"
