"""The results of an evaluation run, as plain data.

The session builds these on the controller from the records that travelled on the
test reports; baselines, checks and every report format read them. Nothing here
imports pytest, numpy or pyarrow.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_ragev.core.record import Record
from pytest_ragev.core.types import BUILTIN_METRICS

#: Whether a larger value of a metric is better (all twelve built-ins) or worse.
Direction = Literal["higher", "lower"]

#: One question's outcome: the scored :class:`~pytest_ragev.core.record.Record`.
SampleResult = Record


def metric_value_problem(name: str, value: float) -> str | None:
    """What is wrong with a saved value (or mean) of metric ``name``, else ``None``.

    Every built-in metric (the twelve and the answer-quality ones) lies in [0, 1]. A
    custom metric's bounds are known only to the hook that defines it
    (``bounds=(0.0, None)`` for seconds or tokens), so only that its value is finite is
    checked. A NaN must be refused: it would drop the question
    from every paired comparison without a word. The text continues "<where> ...",
    e.g. ``is 5.0, not a number in [0, 1]``. Baselines and saved JSON reports share it.
    """
    if name in BUILTIN_METRICS:
        if math.isfinite(value) and 0.0 <= value <= 1.0:
            return None
        return f"is {json.dumps(value)}, not a number in [0, 1]"
    if math.isfinite(value):
        return None
    return f"is {json.dumps(value)}, not a finite number"


@dataclass(frozen=True)
class MetricSummary:
    """The run's figure for one metric: the mean over the ``n`` questions it applies to.

    ``mean`` is ``None`` when ``n == 0`` (never a silent zero).
    """

    name: str
    mean: float | None
    n: int
    direction: Direction = "higher"


@dataclass(frozen=True)
class RunResult:
    """Everything one configuration (the base config or one variant) produced.

    ``params`` is the resolved settings snapshot with secrets already redacted;
    ``params_hash`` a sha256 over its canonical JSON. ``summary`` is keyed by metric
    name in report order (the twelve built-ins first, then custom metrics).
    """

    dataset_id: str
    fingerprint: str
    dataset_stats: dict[str, Any]
    profile: str
    params: dict[str, Any]
    params_hash: str
    samples: list[SampleResult]
    summary: dict[str, MetricSummary]
    variant: str | None = None
    #: The identity of the text metrics' tokenizer (``default/3 jieba==0.42.1``); runs
    #: are compared only when theirs are equal (empty: a run built without one).
    tokenizer: str = ""
    #: Who scored the answer-quality metrics the run measured: metric -> identity
    #: (``similarity``: the model and its rescaling; a judged metric: the judge's model,
    #: endpoint and prompt version). A metric scored by another is not compared.
    scorers: Mapping[str, str] = field(default_factory=dict)

    @property
    def repeat(self) -> int:
        """How many times the run answered each question (``--ragev-repeat``, ``[run]
        repeat``): recorded in its settings (``params.run.repeat``) only when above 1."""
        run = self.params.get("run")
        value = run.get("repeat") if isinstance(run, Mapping) else None
        return value if type(value) is int and value > 1 else 1

    def summary_of(self, metric: str) -> MetricSummary:
        """The run's summary of ``metric``; an empty one (``mean=None``, ``n=0``) when the
        run has no such metric, so a missing metric reads as "no value", never as zero."""
        summary = self.summary.get(metric)
        return summary if summary is not None else MetricSummary(name=metric, mean=None, n=0)

    def scores(self, metric: str) -> dict[int, float]:
        """Per-question values of ``metric``, keyed by qid (questions it applies to only)."""
        return {s.qid: s.metrics[metric] for s in self.samples if metric in s.metrics}
