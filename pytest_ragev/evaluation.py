"""The end of a run as one pure step: the session's records in, the decision out.

:class:`RunPlan` is everything the settings decide, resolved once when a run is
activated (the selected variants, the profile, the paths, the ``[thresholds]`` checks
and the ``[gate]`` rules). At session end the plugin shell gathers an
:class:`EvalInputs` (the plan, the dataset, the records, what happened during the run)
and :func:`evaluate` returns an :class:`Outcome`: the scored runs, the threshold and
gate results, the failure lines and notes. Only the gate touches a file (the baseline);
the shell writes the reports and sets the exit status.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_ragev.config import RagevConfig, RunOptions, select_variants, variant_settings
from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.record import Record
from pytest_ragev.core.redact import redact
from pytest_ragev.core.results import Direction, RunResult
from pytest_ragev.core.types import (
    GENERATION_METRICS,
    METRIC_NAMES,
    RETRIEVAL_METRICS,
    CustomMetric,
    MetricInput,
    PipelineSettings,
)
from pytest_ragev.core.version import __version__
from pytest_ragev.dataset import Dataset, corpus_fingerprint
from pytest_ragev.gate.rules import GateRules
from pytest_ragev.gate.thresholds import (
    MaxValue,
    MinValue,
    ThresholdResult,
    check_question,
    check_thresholds,
    thresholds_from_table,
)
from pytest_ragev.gate.workflow import GateInputs, GateOutcome, run_gate
from pytest_ragev.metrics import aggregate, score

#: A tokenizer for the generation metrics: text -> sentences of tokens.
Tokenizer = Callable[[str], list[list[str]]]


def default_concurrency() -> int:
    """The seed's default: one thread fewer than the CPUs, at least one."""
    return max((os.cpu_count() or 1) - 1, 1)


@dataclass(frozen=True)
class RunPlan:
    """The run's settings, resolved once: CLI > ini > config file > default.

    Build it with :meth:`build`, which validates everything that can be validated
    before a question runs and raises a one-line :class:`ConfigError` otherwise.
    """

    config: RagevConfig
    options: RunOptions
    variants: tuple[str | None, ...]
    custom_metrics: tuple[CustomMetric, ...] = ()
    rules: GateRules = field(default_factory=GateRules)
    thresholds: tuple[MinValue | MaxValue, ...] = ()
    item_thresholds: tuple[MinValue | MaxValue, ...] = ()

    @classmethod
    def build(
        cls, config: RagevConfig, options: RunOptions,
        custom_metrics: Sequence[CustomMetric] = (),
    ) -> RunPlan:
        """The plan of ``config`` run with ``options`` and the hooks' custom metrics."""
        custom = tuple(custom_metrics)
        names = [*METRIC_NAMES, *(m.name for m in custom)]
        rules = (GateRules.from_table(config.gate, source=str(config.source), metric_names=names)
                 if config.gate else GateRules())
        if "top_regressions" not in config.gate:
            # [gate] top_regressions falls back to [report]'s (default 10).
            rules = replace(rules, top_regressions=config.top_regressions)
        if options.no_baseline and options.update_baseline:
            raise ConfigError(
                "--ragev-no-baseline and --ragev-update-baseline contradict each other: "
                "drop --ragev-no-baseline to write the baseline"
            )
        directions: dict[str, Direction] = {name: "higher" for name in METRIC_NAMES}
        directions.update({m.name: m.direction for m in custom})
        thresholds = thresholds_from_table(
            config.thresholds, source=str(config.source), directions=directions
        )
        item_thresholds = thresholds_from_table(
            config.item_thresholds, source=str(config.source), directions=directions,
            where="[item_thresholds]",
        )
        return cls(
            config=config, options=options, variants=select_variants(config, options.variants),
            custom_metrics=custom, rules=rules, thresholds=tuple(thresholds),
            item_thresholds=tuple(item_thresholds),
        )

    @property
    def profile(self) -> str:
        """The metric profile: ``--ragev-profile``, else ``[metrics] profile``."""
        return self.options.profile or self.config.profile

    @property
    def concurrency(self) -> int:
        """Pipeline calls in flight at once (``1`` is strictly serial)."""
        value = self.options.concurrency or self.config.concurrency
        return value if value is not None else default_concurrency()

    @property
    def report_json(self) -> Path | None:
        return self.options.report_json or self.config.report_json

    @property
    def report_markdown(self) -> Path | None:
        return self.options.report_markdown or self.config.report_markdown

    @property
    def report_html(self) -> Path | None:
        return self.options.report_html or self.config.report_html

    @property
    def baseline_path(self) -> Path | None:
        """The baseline to gate against; ``None`` without one or with ``--ragev-no-baseline``."""
        if self.options.no_baseline:
            return None
        return self.options.baseline or self.config.baseline_path

    @property
    def configured(self) -> tuple[str | None, ...]:
        """Every configuration of the config file: the base one, then the variants."""
        return (None, *(v.name for v in self.config.variants))

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The twelve metrics, then the custom ones, in report order."""
        return (*METRIC_NAMES, *(m.name for m in self.custom_metrics))

    def settings(self, variant: str | None) -> PipelineSettings:
        """The pipeline settings of the base configuration (``None``) or of a variant."""
        return variant_settings(self.config, variant)


@dataclass(frozen=True)
class RunFacts:
    """What happened during the run, as the shell saw it.

    ``interrupted`` says how a run that did not finish was stopped (``"interrupted by
    SIGTERM"``, ``"stopped early (...)"``, ``"interrupted"``); ``None`` when it finished.
    """

    task_id: str = ""
    start_time: str = ""
    total: int = 0
    finished: int = 0
    interrupted: str | None = None
    duplicates: int = 0
    cache_hits: int = 0
    cache_misses: int = 0


@dataclass(frozen=True)
class EvalInputs:
    """Everything :func:`evaluate` reads.

    ``params`` holds each configuration's resolved, redacted settings snapshot (see
    :func:`run_params`); ``tokenizer`` replaces the metric tokenizer when a
    ``pytest_ragev_tokenizer`` hook returned one.
    """

    plan: RunPlan
    dataset: Dataset
    records: Sequence[Record]
    facts: RunFacts
    params: Mapping[str | None, Mapping[str, Any]]
    tokenizer: Tokenizer | None = None


@dataclass(frozen=True)
class Outcome:
    """What the run decided: the runs, every check, the lines to print and report."""

    runs: tuple[RunResult, ...]
    facts: RunFacts
    thresholds: tuple[ThresholdResult, ...] = ()
    gate: GateOutcome = field(default_factory=GateOutcome)
    failures: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    errors: int = 0
    fallbacks: int = 0
    #: Set when the run stopped early: says how far it got (it fails the verdict).
    interrupted: str | None = None

    @property
    def failed(self) -> bool:
        """A failed check, a question that raised, or a run that did not finish."""
        return bool(self.failures) or self.errors > 0 or self.interrupted is not None

    def verdict_failures(self) -> list[str]:
        """The failed checks, then the interruption line (errors have their own count)."""
        return [*self.failures, *([self.interrupted] if self.interrupted else [])]

    @property
    def base(self) -> RunResult | None:
        """The first run: the base configuration's, or the first variant's when only
        variants ran."""
        return self.runs[0] if self.runs else None


# ---------------------------------------------------------------------- scoring
def score_records(
    records: Sequence[Record],
    *,
    profile: str,
    custom: Sequence[CustomMetric] = (),
    tokenizer: Tokenizer | None = None,
) -> list[Record]:
    """The records with their metrics: only those that apply to each question."""
    ok = [r for r in records if not r.error]
    inputs = [r.metric_input() for r in ok]
    grades = [dict(r.grades) or None for r in ok]
    rows = score(inputs, profile=profile, grades=grades, tokenizer=tokenizer) if inputs else []
    scored: dict[int, Record] = {}
    for record, metric_input, row in zip(ok, inputs, rows, strict=True):
        has_qrels = bool(record.retrieval_gt)
        kept = {
            name: float(row[name])
            for name in METRIC_NAMES
            if (name in RETRIEVAL_METRICS and has_qrels)
            or (name in GENERATION_METRICS and record.has_answer)
        }
        for metric in custom:
            applies = (
                metric.kind == "all"
                or (metric.kind == "retrieval" and has_qrels)
                or (metric.kind == "generation" and record.has_answer)
            )
            if applies:
                kept[metric.name] = _custom_value(metric, metric_input, record.qid)
        scored[id(record)] = record.scored(kept)
    return [scored.get(id(r), r.scored({})) for r in records]


def _custom_value(metric: CustomMetric, metric_input: MetricInput, qid: int) -> float:
    value = metric.function(metric_input)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"custom metric {metric.name!r} returned {value!r} for q{qid}; return a float in [0, 1]"
        )
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ConfigError(
            f"custom metric {metric.name!r} returned {value!r} for q{qid}; return a float in [0, 1]"
        )
    return value


def build_run(
    records: Sequence[Record],
    *,
    plan: RunPlan,
    dataset: Dataset,
    variant: str | None,
    params: Mapping[str, Any],
    tokenizer: Tokenizer | None = None,
) -> RunResult:
    """The :class:`RunResult` of one configuration from its records (in qid order)."""
    samples = score_records(
        sorted(records, key=lambda r: r.qid), profile=plan.profile,
        custom=plan.custom_metrics, tokenizer=tokenizer,
    )
    summary = aggregate(
        [s.metrics for s in samples if s.error is None],
        names=list(plan.metric_names),
        directions={m.name: m.direction for m in plan.custom_metrics},
    )
    return RunResult(
        dataset_id=dataset.dataset_id,
        fingerprint=dataset.fingerprint,
        dataset_stats=dataset.stats.to_json(),
        profile=plan.profile,
        params=dict(params),
        params_hash=sha256_json(params),
        samples=samples,
        summary=summary,
        variant=variant,
    )


def run_params(
    plan: RunPlan, dataset: Dataset, pipeline_snapshot: Mapping[str, Any],
    variant: str | None,
) -> dict[str, Any]:
    """The resolved, redacted settings snapshot recorded as the report's ``params``.

    ``pipeline_snapshot`` is the pipeline's own view of its knobs (defaults filled in).
    """
    config = plan.config
    params: dict[str, Any] = redact(
        {
            "dataset": {
                "id": dataset.dataset_id,
                "path": _portable_path(config.dataset_path, config.source.parent),
                "fingerprint": dataset.fingerprint,
                "limit": plan.options.limit,
            },
            "pipeline": {"name": plan.settings(variant).name, **pipeline_snapshot},
            "metrics": {"profile": plan.profile},
            "thresholds": dict(config.thresholds),
        }
    )
    return params


def _portable_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` in posix form when it lies under it, else absolute.

    Keeps machine paths out of committed baselines and the settings hash the same on
    every checkout.
    """
    try:
        return path.relative_to(base).as_posix() or "."
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------- verdict
def evaluate(inputs: EvalInputs) -> Outcome:
    """Score every configuration that ran, check thresholds and the baseline, decide.

    A baseline that cannot be used is part of the outcome (``gate.not_compared``), not
    an exception. Raises :class:`~pytest_ragev.core.errors.BaselineError` when a partial
    ``--ragev-update-baseline`` cannot read the file it must merge into, and
    :class:`ConfigError` when a custom metric misbehaves.
    """
    plan, facts = inputs.plan, inputs.facts
    by_variant: dict[str | None, list[Record]] = {}
    for record in inputs.records:
        by_variant.setdefault(record.variant, []).append(record)
    runs = tuple(
        build_run(by_variant[variant], plan=plan, dataset=inputs.dataset, variant=variant,
                  params=inputs.params[variant], tokenizer=inputs.tokenizer)
        for variant in plan.variants if variant in by_variant
    )
    interrupted = None
    if facts.interrupted is not None:
        interrupted = (
            f"ragev: run {facts.interrupted}: {facts.finished} of {facts.total} "
            "questions answered"
        )
    errors = sum(1 for run in runs for s in run.samples if s.error)
    fallbacks = sum(1 for run in runs for s in run.samples if s.meta.get("fallback"))
    # Thresholds hold the base configuration (the one you ship); variants are checked
    # only when one is selected alone.
    gated = runs[:1] if runs and runs[0].variant is None else runs
    thresholds = tuple(result for run in gated for result in check_thresholds(run, plan.thresholds))
    below = [f"q{s.qid}" + (f" [{run.variant}]" if run.variant else "")
             for run in runs for s in run.samples if check_question(s, plan.item_thresholds)]
    floors = ([f"ragev: {len(below)} question(s) below their [item_thresholds]: "
               f"{', '.join(below[:20])}" + (f", … ({len(below) - 20} more)" if len(below) > 20
                                            else "")] if below else [])
    notes = []
    if facts.duplicates:
        notes.append(
            f"ragev: {facts.duplicates} duplicate records for the same question were ignored "
            "(the first one counts)"
        )
    dataset = inputs.dataset
    gate = run_gate(runs, GateInputs(
        rules=plan.rules,
        baseline_path=plan.baseline_path,
        update=plan.options.update_baseline,
        interrupted=facts.interrupted is not None,
        configured=plan.configured,
        plugin_version=__version__,
        every_qid=tuple(pair.qid for pair in dataset.pairs),
        limit=plan.options.limit,
        source_fingerprint=dataset.source_fingerprint,
        # Only a run with a baseline needs the content hashes (computed on first use).
        hashes=dataset.question_hashes if plan.baseline_path is not None else {},
        corpus_fingerprint=(corpus_fingerprint(dataset.corpus)
                            if plan.baseline_path is not None else None),
        no_baseline=plan.options.no_baseline,
    ))
    return Outcome(
        runs=runs,
        facts=facts,
        thresholds=thresholds,
        gate=gate,
        failures=(*(t.reason for t in thresholds if t.reason is not None), *floors,
                  *gate.failures),
        notes=(*notes, *gate.notes),
        warnings=tuple(dataset.warnings),
        errors=errors,
        fallbacks=fallbacks,
        interrupted=interrupted,
    )
