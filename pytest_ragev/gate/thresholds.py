"""Absolute floors and ceilings from ``[thresholds]``: :class:`MinValue`, :class:`MaxValue`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pytest_ragev.core import fmt
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.record import Record
from pytest_ragev.core.results import RunResult
from pytest_ragev.core.tables import is_number, suggest


@dataclass(frozen=True)
class MinValue:
    """An absolute floor from ``[thresholds]``: the run's mean must be at least ``minimum``."""

    metric: str
    minimum: float

    def fails(self, current: RunResult, baseline: RunResult | None = None) -> str | None:
        """``ragev: recall 0.412 < threshold 0.500 (n=118)`` when below the floor."""
        summary = current.summary_of(self.metric)
        label = fmt.label(self.metric, current.variant)
        if summary.mean is None:
            return f"ragev: {label} has no values (n=0), threshold {fmt.num(self.minimum)} unmet"
        if summary.mean < self.minimum:
            return (
                f"ragev: {label} {fmt.num(summary.mean)} < threshold {fmt.num(self.minimum)} "
                f"(n={summary.n})"
            )
        return None


@dataclass(frozen=True)
class MaxValue:
    """A ceiling from ``[thresholds]`` for a lower-is-better metric."""

    metric: str
    maximum: float

    def fails(self, current: RunResult, baseline: RunResult | None = None) -> str | None:
        """``ragev: latency 1.300 > threshold 1.000 (n=118)`` when above the ceiling."""
        summary = current.summary_of(self.metric)
        label = fmt.label(self.metric, current.variant)
        if summary.mean is None:
            return f"ragev: {label} has no values (n=0), threshold {fmt.num(self.maximum)} unmet"
        if summary.mean > self.maximum:
            return (
                f"ragev: {label} {fmt.num(summary.mean)} > threshold {fmt.num(self.maximum)} "
                f"(n={summary.n})"
            )
        return None


@dataclass(frozen=True)
class ThresholdResult:
    """The outcome of one threshold on one run (``reason`` is ``None`` when it passed);
    ``slice`` names the slice of a ``[thresholds.slice.<name>]`` check (its key, or the
    name as written when it names no slice of the run)."""

    metric: str
    threshold: float
    kind: Literal["min", "max"]
    value: float | None
    n: int
    variant: str | None
    reason: str | None
    slice: str | None = None

    @property
    def passed(self) -> bool:
        """Whether the run met the threshold."""
        return self.reason is None


def thresholds_from_table(
    table: Mapping[str, Any],
    *,
    source: str,
    directions: Mapping[str, str],
    where: str = "[thresholds]",
) -> list[MinValue | MaxValue]:
    """Checks from a parsed ``[thresholds]`` table (``recall = 0.5``).

    ``directions`` maps every known metric to its direction: a higher-is-better metric
    gets a floor (:class:`MinValue`), a lower-is-better one a ceiling (:class:`MaxValue`).
    ``where`` names the table in messages (``[item_thresholds]`` holds per-question ones).
    """
    checks: list[MinValue | MaxValue] = []
    known = list(directions)
    for name, value in table.items():
        if name not in directions:
            raise ConfigError(
                f"{source}: {where} {name!r} is not a metric; "
                f"{suggest(name, known, noun='metrics')}"
            )
        if not is_number(value) or not math.isfinite(float(value)):
            raise ConfigError(
                f"{source}: {where} {name} = {value!r} is invalid; use a number, "
                f"e.g. {name} = 0.5"
            )
        if directions[name] not in ("higher", "lower"):
            raise ValueError(f"direction of {name!r} must be 'higher' or 'lower'")
        if directions[name] == "higher":
            checks.append(MinValue(metric=str(name), minimum=float(value)))
        else:
            checks.append(MaxValue(metric=str(name), maximum=float(value)))
    return checks


def check_thresholds(
    run: RunResult, checks: Sequence[MinValue | MaxValue]
) -> list[ThresholdResult]:
    """Evaluate every threshold on ``run``."""
    results = []
    for check in checks:
        summary = run.summary_of(check.metric)
        is_min = isinstance(check, MinValue)
        results.append(
            ThresholdResult(
                metric=check.metric,
                threshold=check.minimum if isinstance(check, MinValue) else check.maximum,
                kind="min" if is_min else "max",
                value=summary.mean,
                n=summary.n,
                variant=run.variant,
                reason=check.fails(run),
            )
        )
    return results


def check_question(record: Record, checks: Sequence[MinValue | MaxValue]) -> list[str]:
    """The ``[item_thresholds]`` lines one question fails (its metrics that apply only).

    ``ragev: q7 recall 0.000 < item threshold 0.500`` (``[k10]`` after the qid for a
    variant). A question without a metric (no qrels, no reference answer, an error) is
    not judged on it.
    """
    lines = []
    label = f"q{record.qid}" + (f" [{record.variant}]" if record.variant else "")
    for check in checks:
        value = record.metrics.get(check.metric)
        if value is None:
            continue
        if isinstance(check, MinValue) and value < check.minimum:
            lines.append(f"ragev: {label} {check.metric} {fmt.num(value)} < item threshold "
                         f"{fmt.num(check.minimum)}")
        elif isinstance(check, MaxValue) and value > check.maximum:
            lines.append(f"ragev: {label} {check.metric} {fmt.num(value)} > item threshold "
                         f"{fmt.num(check.maximum)}")
    return lines
