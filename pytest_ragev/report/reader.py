"""A saved JSON report (``--ragev-report``) read back into :class:`RunResult` values.

The JSON report carries, per run, the settings snapshot (``params``), the means and
counts (``metric``) and one record per question (``samples``): everything a paired
comparison needs. :func:`runs_from_report` turns the base run and every variant of one
report into runs that :func:`pytest_ragev.gate.compare` accepts, so two saved reports
can be compared as the gate compares a run with its baseline.

What a report does not hold is filled in plainly: ``dataset_stats`` is empty, and a
custom metric's direction is ``"higher"`` unless ``directions`` names it (the report
keeps custom means but not their directions). Nothing here reads files or imports numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.results import Direction, MetricSummary, RunResult, SampleResult
from pytest_ragev.core.types import METRIC_NAMES


class ReportError(RagevError):
    """A JSON report lacks a key a run needs, or holds a value of the wrong type."""


_BLOCKS = ("retrieval_metrics", "generation_metrics", "custom_metrics")


def runs_from_report(
    report: Any,
    *,
    source: str = "report",
    directions: Mapping[str, Direction] | None = None,
) -> list[RunResult]:
    """The runs of one parsed JSON report: the base run first, then the variants by name.

    ``report`` is the whole document (``{"success": ..., "data": {...}}``) or its
    ``data`` object. A report whose base configuration did not run (only
    ``--ragev-variant`` runs) holds the first variant at the top; that run keeps
    ``variant=None`` here only if its samples say so. Raises :class:`ReportError`
    naming ``source`` and the key when the report cannot be read.
    """
    data = _mapping(report, "the top level", source)
    if "data" in data and "task" not in data:
        data = _mapping(data["data"], "data", source)
    task = _mapping(data.get("task", {}), "data.task", source)
    dataset_id = str(task.get("dataset_id", ""))
    wanted = dict(directions or {})
    runs = [_run(data, "data", source, dataset_id=dataset_id, variant=None, directions=wanted)]
    variants = _mapping(data.get("variants", {}), "data.variants", source)
    for name in sorted(variants):
        where = f"data.variants.{name}"
        runs.append(
            _run(_mapping(variants[name], where, source), where, source,
                 dataset_id=dataset_id, variant=str(name), directions=wanted)
        )
    base_samples = runs[0].samples
    if base_samples and all(s.variant is not None for s in base_samples):
        # Only variants ran: the top-level block is the first selected variant's.
        first = base_samples[0].variant
        runs[0] = _replace_variant(runs[0], first)
    return runs


def _replace_variant(run: RunResult, variant: str | None) -> RunResult:
    return RunResult(
        dataset_id=run.dataset_id, fingerprint=run.fingerprint, dataset_stats=run.dataset_stats,
        profile=run.profile, params=run.params, params_hash=run.params_hash,
        samples=run.samples, summary=run.summary, variant=variant,
    )


def _run(
    block: Mapping[str, Any],
    where: str,
    source: str,
    *,
    dataset_id: str,
    variant: str | None,
    directions: Mapping[str, Direction],
) -> RunResult:
    params = dict(_mapping(block.get("params") or {}, f"{where}.params", source))
    dataset = _mapping(params.get("dataset", {}), f"{where}.params.dataset", source)
    metrics_params = _mapping(params.get("metrics", {}), f"{where}.params.metrics", source)
    metric = _mapping(block.get("metric") or {}, f"{where}.metric", source)
    samples_raw = block.get("samples", [])
    if not isinstance(samples_raw, list):
        raise ReportError(f"{source}: {where}.samples is {_kind(samples_raw)}, not a list")
    samples: list[SampleResult] = []
    for index, item in enumerate(samples_raw):
        at = f"{where}.samples[{index}]"
        try:
            sample = SampleResult.from_json(_mapping(item, at, source))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"{source}: {at} is not a sample record ({_why(exc)})") from None
        samples.append(sample)
    counts = _mapping(metric.get("counts", {}), f"{where}.metric.counts", source)
    summary: dict[str, MetricSummary] = {}
    for block_name in _BLOCKS:
        means = _mapping(metric.get(block_name, {}), f"{where}.metric.{block_name}", source)
        for name, mean in means.items():
            summary[str(name)] = MetricSummary(
                name=str(name),
                mean=_mean(mean, f"{where}.metric.{block_name}.{name}", source),
                n=_count(counts.get(name, 0), f"{where}.metric.counts.{name}", source),
                direction=directions.get(str(name), "higher"),
            )
    ordered = {name: summary[name] for name in METRIC_NAMES if name in summary}
    ordered.update({name: item for name, item in summary.items() if name not in ordered})
    return RunResult(
        dataset_id=str(dataset.get("id") or dataset_id),
        fingerprint=str(dataset.get("fingerprint", "")),
        dataset_stats={},
        profile=str(metrics_params.get("profile", "weknora")),
        params=params,
        params_hash=sha256_json(params),
        samples=samples,
        summary=ordered,
        variant=variant,
    )


def _mapping(value: Any, where: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ReportError(
            f"{source}: {where} is {_kind(value)}, not an object; is this a pytest-ragev "
            "JSON report (--ragev-report)?"
        )
    return value


def _mean(value: Any, where: str, source: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReportError(f"{source}: {where} is {value!r}, not a number or null")
    return float(value)


def _count(value: Any, where: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReportError(f"{source}: {where} is {value!r}, not a count")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing key {exc.args[0]!r}"
    return str(exc)
