"""Sharded runs: the partial reports of ``--ragev-shard K/N`` read back, checked, merged.

A sharded run answers its share of the questions and writes a *partial* JSON report: a
final report with a ``data.shard`` block (which shard of how many, the questions it
owns, how they were assigned, the shell's counts and warnings, the custom metrics'
definitions) whose samples hold whole records (:meth:`Record.to_part_json`). Merging
does no arithmetic of its own: :func:`check_shards` refuses parts that do not make one
run, and :func:`merged_inputs` rebuilds the run's end from them, the records as the
shards scored them, for :func:`~pytest_ragev.evaluation.evaluate`: the very code a
session ends with. So the merged run's means, counts, errors, usage, verdict and
reports are what an unsharded run of the same answers gives, bit for bit, and whatever
a report learns to say later merges with it.

:func:`question_costs` reads the per-question latency of an earlier report, which
balances the shards of the next run (``--ragev-shard-balance``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

from pytest_ragev.config import RagevConfig, RunOptions
from pytest_ragev.core.digest import canonical_json
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.fmt import listed
from pytest_ragev.core.record import QuestionKey, Record
from pytest_ragev.core.tables import changed_keys
from pytest_ragev.core.task import make_task_id
from pytest_ragev.core.types import CustomMetric, MetricCase
from pytest_ragev.dataset import Dataset
from pytest_ragev.evaluation import LATENCY_KEY, EvalInputs, RunFacts, RunPlan, ShardPart
from pytest_ragev.report.reader import ReportError, Saved, read_saved


@dataclass(frozen=True)
class ShardReport:
    """One partial report read back: the saved file, its share and the shard's facts."""

    saved: Saved
    part: ShardPart
    #: What the shard's shell saw: its task, counts, warnings and interruption.
    facts: RunFacts

    @property
    def source(self) -> str:
        """The file it was read from, as given."""
        return self.saved.source

    @property
    def records(self) -> list[Record]:
        """Every record of the shard: the base configuration's, then each variant's."""
        return [sample for run in self.saved.runs for sample in run.samples]

    @property
    def params(self) -> dict[str | None, Mapping[str, Any]]:
        """The settings snapshot of each configuration the shard ran."""
        return {run.variant: run.params for run in self.saved.runs}


def read_shard_report(path: str | Path) -> ShardReport:
    """Read the partial report of one shard; :class:`ReportError` (one line) when the
    file is not one."""
    saved = read_saved(path)
    if saved.shard is None or saved.shard_facts is None:
        raise ReportError(
            f"{saved.source} is not a partial report (it has no data.shard): pass the JSON "
            "reports of the runs made with --ragev-shard K/N"
        )
    # Its runs hold the samples as records: their parsed objects are let go now, not
    # kept beside them while the other shards are read (peak memory 909 -> 724 MB for
    # ten shards of a 100,000-question run).
    kept = replace(saved, data=None if saved.data is None else _without_samples(saved.data))
    return ShardReport(saved=kept, part=saved.shard, facts=saved.shard_facts)


def _without_samples(data: Mapping[str, Any]) -> dict[str, Any]:
    """A report's ``data`` without the samples of its base run and its variants."""
    kept = {key: value for key, value in data.items() if key != "samples"}
    variants = data.get("variants")
    if isinstance(variants, Mapping):
        kept["variants"] = {name: {key: value for key, value in block.items()
                                   if key != "samples"} if isinstance(block, Mapping) else block
                            for name, block in variants.items()}
    return kept


# ------------------------------------------------------------------------------ checks
def _names(parts: Sequence[ShardReport]) -> str:
    return ", ".join(part.source for part in parts)


def _differ(parts: Sequence[ShardReport], value: Any, what: str, fix: str) -> None:
    """Refuse ``parts`` whose ``value(part)`` differ: one line naming the files."""
    first = parts[0]
    other = next((p for p in parts[1:] if value(p) != value(first)), None)
    if other is not None:
        raise ReportError(
            f"{first.source} and {other.source} are shards of different {what} "
            f"({value(first)!s} and {value(other)!s}); {fix}"
        )


def _base_params(part: ShardReport) -> Mapping[str, Any]:
    return next(iter(part.params.values()), {})


def _params_of(part: ShardReport, section: str, key: str) -> str:
    value = _base_params(part).get(section, {})
    return str(value.get(key, "")) if isinstance(value, Mapping) else ""


def check_shards(parts: Sequence[ShardReport]) -> None:
    """Refuse, in one line naming the files, partial reports that are not the shards of
    one run: another count of shards, plugin version, dataset, metric profile,
    tokenizer, assignment or configurations; other settings; two reports of one shard
    or shards that own the same question; a missing shard; questions no shard owns."""
    if not parts:
        raise ReportError("no partial report given; pass every shard's JSON report")
    again = "run every shard with the same settings, then merge their reports"
    _differ(parts, lambda p: p.part.spec.total, "runs: their shard counts differ",
            "merge the N reports of one --ragev-shard K/N run")
    _differ(parts, lambda p: p.part.plugin_version or "unknown", "pytest-ragev versions",
            "run every shard with the same pytest-ragev")
    _differ(parts, lambda p: _params_of(p, "dataset", "fingerprint")[:12] or "unknown",
            "datasets", "run every shard on the same dataset (and --ragev-limit)")
    _differ(parts, lambda p: _params_of(p, "metrics", "profile") or "unknown",
            "metric profiles", again)
    _differ(parts, lambda p: _params_of(p, "metrics", "tokenizer") or "unknown",
            "tokenizers", again)
    _differ(parts, lambda p: p.part.assignment, "assignments",
            "run every shard with the same --ragev-shard-balance report, or none")
    _differ(parts, lambda p: "[" + ", ".join("base" if c is None else c
                                             for c in p.part.configurations) + "]",
            "configurations", "select the same variants (--ragev-variant) in every shard")
    first = parts[0]
    for other in parts[1:]:
        for variant, params in first.params.items():
            theirs = other.params.get(variant)
            if theirs is not None and canonical_json(theirs) != canonical_json(params):
                keys = changed_keys(dict(params), dict(theirs))
                label = "the base configuration" if variant is None else f"variant {variant!r}"
                raise ReportError(
                    f"{first.source} and {other.source} are shards of different settings "
                    f"({label}: {listed(keys) if keys else 'params'}); {again}"
                )
    by_index: dict[int, ShardReport] = {}
    for part in parts:
        known = by_index.get(part.part.spec.index)
        if known is not None:
            raise ReportError(
                f"{known.source} and {part.source} are both shard {part.part.spec.label} "
                "(overlapping shards: one report per shard); pass each shard's report once"
            )
        by_index[part.part.spec.index] = part
    owner: dict[int, ShardReport] = {}
    for part in parts:
        for qid in part.part.questions:
            known = owner.setdefault(qid, part)
            if known is not part:
                shared = sorted(set(known.part.questions) & set(part.part.questions))
                raise ReportError(
                    f"{known.source} and {part.source} overlap: both own q{shared[0]}"
                    f"{f' and {len(shared) - 1} more' if len(shared) > 1 else ''}; "
                    "merge the reports of one --ragev-shard K/N run"
                )
    total = first.part.spec.total
    missing = [k for k in range(1, total + 1) if k not in by_index]
    if missing:
        shown = ", ".join(f"{k}/{total}" for k in missing)
        raise ReportError(
            f"shard {shown} missing: {_names(parts)} are {len(parts)} of {total} shards; "
            "pass every shard's report (a missing shard's questions would go unjudged)"
        )
    _differ(parts, lambda p: p.part.dataset_questions, "datasets: question counts differ",
            "run every shard on the same dataset")
    if len(owner) != first.part.dataset_questions:
        raise ReportError(
            f"{_names(parts)} own {len(owner)} of the dataset's "
            f"{first.part.dataset_questions} questions; the shards of one run own every "
            "question once: merge the reports of one --ragev-shard K/N run"
        )


# ------------------------------------------------------------------------ the merged run
@dataclass(frozen=True)
class RecordedValues:
    """A custom metric's values as the shards recorded them, by (variant, qid).

    The project's ``pytest_ragev_metrics`` hook computed them where each question was
    answered; outside pytest the hook is not there, so the merged run's metric gives
    each question the value its shard recorded.
    """

    name: str
    values: Mapping[QuestionKey, float]

    def __call__(self, case: MetricCase) -> float:
        key = (case.variant, case.case.qid)
        if key not in self.values:
            where = f"q{case.case.qid}" + (f" [{case.variant}]" if case.variant else "")
            raise ConfigError(f"custom metric {self.name!r} has no value recorded for {where} "
                              "in the shards' reports; merge reports of one run")
        return self.values[key]


def recorded_metrics(
    records: Sequence[Record], definitions: Sequence[Mapping[str, object]]
) -> list[CustomMetric]:
    """The custom metrics ``definitions`` describe (name, direction, kind, bounds), each
    giving the values ``records`` carry: the project's hook computed them where the
    questions were answered, and is not there outside pytest."""
    metrics = []
    for entry in definitions:
        name = str(entry["name"])
        values = {record.key: record.metrics[name] for record in records
                  if name in record.metrics}
        bounds = cast(Sequence[float | None], entry.get("bounds", (None, None)))
        metrics.append(CustomMetric(
            name=name, function=RecordedValues(name, values),
            direction=cast(Literal["higher", "lower"], entry.get("direction", "higher")),
            kind=cast(Literal["retrieval", "generation", "all"], entry.get("kind", "all")),
            bounds=(bounds[0], bounds[1]),
        ))
    return metrics


def check_tokenizer(plan: RunPlan, recorded: str, source: str) -> None:
    """Refuse a plan whose tokenizer is not the one ``recorded`` (by ``source``)."""
    if recorded and recorded != plan.tokenizer.identity:
        raise ReportError(
            f"{plan.config.source} tokenizes with {plan.tokenizer.identity!r}, but {source} "
            f"was scored with {recorded!r} (a pytest_ragev_tokenizer hook, or other library "
            "versions); run with the config and environment that run had, or name its "
            "tokenizer in [metrics] tokenizer"
        )


def merge_options(parts: Sequence[ShardReport], **chosen: Any) -> RunOptions:
    """The run options the shards ran with (``--ragev-limit``, ``--ragev-profile``, the
    selected variants), plus ``chosen`` (the merge's own: reports, baseline, gate)."""
    params = _base_params(parts[0])
    dataset = params.get("dataset", {})
    limit = dataset.get("limit") if isinstance(dataset, Mapping) else None
    configurations = parts[0].part.configurations
    return RunOptions(
        limit=limit if isinstance(limit, int) else None,
        profile=_params_of(parts[0], "metrics", "profile") or None,
        variants=tuple("base" if c is None else c for c in configurations),
        **chosen,
    )


def merge_plan(parts: Sequence[ShardReport], config: RagevConfig, options: RunOptions
               ) -> RunPlan:
    """The plan of the merged run: ``config``'s (its ``[thresholds]``, ``[gate]``,
    ``[baseline]``) with the shards' custom metrics; :class:`ReportError` when the config
    would judge the shards' numbers with another tokenizer, scorer or thresholds than
    those they recorded."""
    records = [record for part in parts for record in part.records]
    try:
        plan = RunPlan.build(config, options,
                             recorded_metrics(records, parts[0].part.custom_metrics))
    except ConfigError as exc:
        raise ReportError(str(exc)) from None
    params = _base_params(parts[0])
    metrics = params.get("metrics", {})
    check_tokenizer(plan, _params_of(parts[0], "metrics", "tokenizer"), "the shards")
    scorers = metrics.get("scorers", {}) if isinstance(metrics, Mapping) else {}
    if plan.quality and dict(scorers) != plan.scorers:
        raise ReportError(
            f"{config.source} scores {listed(sorted(plan.scorers))} otherwise than the "
            "shards did (another judge, model or prompt version); merge with the config "
            "the shards ran with"
        )
    thresholds = params.get("thresholds", {})
    if isinstance(thresholds, Mapping) and dict(thresholds) != dict(config.thresholds):
        keys = changed_keys(dict(thresholds), dict(config.thresholds))
        raise ReportError(
            f"{config.source}: [thresholds] {listed(keys)} changed since the shards ran; "
            "merge with the config the shards ran with"
        )
    return plan


def merged_facts(parts: Sequence[ShardReport], *, rootdir: str) -> RunFacts:
    """What the shells of the shards saw, as one run's: counts added up, the earliest
    start, the task id they share (else a new one), the warnings every shard gave (a
    knob no shard's code read), the first interruption, said with its shard."""
    facts = [part.facts for part in parts]
    ids = {fact.task_id for fact in facts}
    dataset_id = parts[0].saved.runs[0].dataset_id if parts[0].saved.runs else "run"
    task_id = ids.pop() if len(ids) == 1 and "" not in ids else make_task_id(dataset_id)
    warnings = [line for line in facts[0].warnings
                if all(line in fact.warnings for fact in facts[1:])]
    stopped = next(((part, part.facts.interrupted) for part in parts
                    if part.facts.interrupted), None)
    interrupted = None if stopped is None else f"{stopped[1]} ({stopped[0].part.spec.words})"
    starts = [fact.start_time for fact in facts if fact.start_time]
    return RunFacts(
        task_id=task_id,
        start_time=min(starts) if starts else "",
        total=sum(fact.total for fact in facts),
        finished=sum(fact.finished for fact in facts),
        interrupted=interrupted,
        duplicates=sum(fact.duplicates for fact in facts),
        cache_hits=sum(fact.cache_hits for fact in facts),
        cache_misses=sum(fact.cache_misses for fact in facts),
        rootdir=rootdir,
        warnings=tuple(warnings),
    )


def merged_inputs(
    parts: Sequence[ShardReport], plan: RunPlan, dataset: Dataset, facts: RunFacts
) -> EvalInputs:
    """What :func:`~pytest_ragev.evaluation.evaluate` reads to end the merged run: the
    shards' records as they scored them (each question once: none is scored again), the
    configurations' settings as they recorded them. :class:`ReportError` when
    ``dataset`` is not the one the shards ran on."""
    recorded = _params_of(parts[0], "dataset", "fingerprint")
    if recorded and dataset.fingerprint != recorded:
        raise ReportError(
            f"the dataset at {dataset.path} has fingerprint {dataset.fingerprint[:12]}, but "
            f"{_names(parts)} ran on {recorded[:12]}; merge with the dataset the shards "
            "ran on"
        )
    qids = {pair.qid for pair in dataset.pairs}
    owned = {qid for part in parts for qid in part.part.questions}
    if owned != qids:
        raise ReportError(
            f"the shards own {len(owned)} questions, the dataset at {dataset.path} has "
            f"{len(qids)} ({len(owned - qids)} unknown, {len(qids - owned)} unowned); merge "
            "with the dataset the shards ran on"
        )
    records = [record for part in parts for record in part.records]
    params: dict[str | None, Mapping[str, Any]] = {}
    for part in parts:
        for variant, snapshot in part.params.items():
            params.setdefault(variant, snapshot)
    return EvalInputs(
        plan=plan, dataset=dataset, records=records, facts=facts, params=params,
        scored=frozenset(record.key for record in records),
    )


# ------------------------------------------------------------------------------- costs
def question_costs(path: str | Path) -> dict[int, float]:
    """qid -> the seconds its answers took in the run a JSON report (final, merged or
    partial) recorded: the ``meta`` ``latency_s`` of its samples, added up over the
    configurations. :class:`ReportError` when the file records none."""
    saved = read_saved(path)
    costs: dict[int, float] = {}
    for run in saved.runs:
        for sample in run.samples:
            value = sample.meta.get(LATENCY_KEY)
            if isinstance(value, int | float) and not isinstance(value, bool) \
                    and math.isfinite(value) and value >= 0:
                costs[sample.qid] = costs.get(sample.qid, 0.0) + float(value)
    if not costs:
        raise ReportError(
            f"{saved.source} records no per-question latency (Answer.meta "
            f"{LATENCY_KEY!r}), so it cannot balance the shards; pass the report of a run "
            "whose answers recorded it, or leave --ragev-shard-balance out"
        )
    return costs


__all__ = [
    "RecordedValues",
    "ShardReport",
    "check_shards",
    "check_tokenizer",
    "merge_options",
    "merge_plan",
    "merged_facts",
    "merged_inputs",
    "question_costs",
    "read_shard_report",
    "recorded_metrics",
]
