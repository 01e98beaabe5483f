"""The results of an evaluation run, as plain data.

The session builds these on the controller from the records that travelled on the
test reports; baselines, checks and every report format read them. Nothing here
imports pytest, numpy or pyarrow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: Whether a larger value of a metric is better (all twelve built-ins) or worse.
Direction = Literal["higher", "lower"]


@dataclass(frozen=True)
class SampleResult:
    """One question's outcome.

    ``metrics`` holds only the metrics that apply: no retrieval metrics for a
    question without qrels, no generation metrics for one without a reference
    answer, and nothing at all when the pipeline raised (``error`` then says why).
    """

    qid: int
    question: str
    retrieval_gt: list[list[int]]
    retrieval_ids: list[int]
    generated_text: str
    generated_gt: str
    metrics: dict[str, float]
    error: str | None = None
    variant: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record as it appears in ``data.samples`` of the JSON report."""
        return {
            "qid": self.qid,
            "question": self.question,
            "retrieval_gt": self.retrieval_gt,
            "retrieval_ids": self.retrieval_ids,
            "generated_text": self.generated_text,
            "generated_gt": self.generated_gt,
            "metrics": self.metrics,
            "error": self.error,
            **({"variant": self.variant} if self.variant is not None else {}),
            **({"meta": self.meta} if self.meta else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SampleResult:
        """Inverse of :meth:`to_json`."""
        return cls(
            qid=int(data["qid"]),
            question=str(data.get("question", "")),
            retrieval_gt=[[int(x) for x in group] for group in data.get("retrieval_gt", [])],
            retrieval_ids=[int(x) for x in data.get("retrieval_ids", [])],
            generated_text=str(data.get("generated_text", "")),
            generated_gt=str(data.get("generated_gt", "")),
            metrics={str(k): float(v) for k, v in dict(data.get("metrics", {})).items()},
            error=data.get("error"),
            variant=data.get("variant"),
            meta=dict(data.get("meta", {})),
        )


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

    def scores(self, metric: str) -> dict[int, float]:
        """Per-question values of ``metric``, keyed by qid (questions it applies to only)."""
        return {s.qid: s.metrics[metric] for s in self.samples if metric in s.metrics}
