"""The run's settings, resolved once: :class:`RunPlan`.

Built when a run is activated, from the config file, the command line and the hooks'
custom metrics and tokenizer: the selected variants, the profile, the report and
baseline paths, the ``[thresholds]`` checks and the ``[gate]`` rules. Everything that
can be validated before a question runs is validated here (one-line
:class:`~pytest_ragev.core.errors.ConfigError`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_ragev.config import RagevConfig, RunOptions, select_variants, variant_settings
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.results import Direction
from pytest_ragev.core.types import (
    METRIC_NAMES,
    QUALITY_METRICS,
    SIMILARITY,
    CustomMetric,
    PipelineSettings,
)
from pytest_ragev.evaluation.judge import JudgeConfig, check_judged
from pytest_ragev.evaluation.prompts import PROMPTS
from pytest_ragev.evaluation.quality import check_similarity_available, similarity_identity
from pytest_ragev.evaluation.slices import SliceThreshold
from pytest_ragev.gate.rules import GateRules
from pytest_ragev.gate.thresholds import MaxValue, MinValue, thresholds_from_table
from pytest_ragev.metrics import TokenizerChoice, custom_tokenizer, resolve_tokenizer
from pytest_ragev.pipelines.concurrency import PipelineKind, default_concurrency

#: A tokenizer for the generation metrics: text -> sentences of tokens.
Tokenizer = Callable[[str], list[list[str]]]


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
    tokenizer: TokenizerChoice = field(default_factory=lambda: resolve_tokenizer(
        "default", source="ragev.toml"))
    #: ``[metrics] similarity``: the run scores ``similarity``.
    similarity: bool = False
    #: ``[metrics] judged``: the metrics the judge scores, in report order.
    judged: tuple[str, ...] = ()
    #: The ``[judge]`` table, resolved (``None`` when no metric is judged).
    judge: JudgeConfig | None = None
    #: ``[thresholds.slice.<name>]``: each slice's floors and ceilings.
    slice_thresholds: tuple[SliceThreshold, ...] = ()

    @classmethod
    def build(
        cls, config: RagevConfig, options: RunOptions,
        custom_metrics: Sequence[CustomMetric] = (),
        hooked_tokenizer: Tokenizer | None = None,
    ) -> RunPlan:
        """The plan of ``config`` run with ``options`` and the hooks' custom metrics.

        ``hooked_tokenizer`` is what a ``pytest_ragev_tokenizer`` hook returned: it wins
        over ``[metrics] tokenizer``.
        """
        custom = tuple(custom_metrics)
        if hooked_tokenizer is not None:
            tokenizer = custom_tokenizer(hooked_tokenizer, spec="pytest_ragev_tokenizer hook")
        else:
            tokenizer = resolve_tokenizer(config.tokenizer, source=config.source,
                                          base_dir=config.source.parent)
        if config.similarity:
            check_similarity_available(str(config.source))
        judge = check_judged(config.judged, config.judge, source=config.source,
                             base_dir=config.base_dir)
        quality = ((SIMILARITY,) if config.similarity else ()) + config.judged
        names = [*METRIC_NAMES, *quality, *(m.name for m in custom)]
        rules = GateRules.from_config(config, metric_names=names)
        if options.no_baseline and options.update_baseline:
            raise ConfigError(
                "--ragev-no-baseline and --ragev-update-baseline contradict each other: "
                "drop --ragev-no-baseline to write the baseline"
            )
        shard = options.shard
        if shard is not None and options.update_baseline:
            raise ConfigError(
                f"--ragev-shard {shard.label} and --ragev-update-baseline: a shard answers "
                "part of the questions; merge the shards' reports (ragev report merge) and "
                "write the baseline from the merged report (ragev report baseline RUN.json)"
            )
        if shard is not None and (options.report_json or config.report_json) is None:
            raise ConfigError(
                f"--ragev-shard {shard.label} writes its share as a partial JSON report for "
                "ragev report merge: pass --ragev-report PATH (e.g. --ragev-report "
                f"shard-{shard.index}.json) or set [report] json in {config.source}"
            )
        directions: dict[str, Direction] = {name: "higher" for name in (*METRIC_NAMES,
                                                                         *quality)}
        directions.update({m.name: m.direction for m in custom})
        for table, where in ((config.thresholds, "[thresholds]"),
                             (config.item_thresholds, "[item_thresholds]")):
            off = [name for name in table if name in QUALITY_METRICS and name not in quality]
            if off:
                how = ("similarity = true" if off[0] == SIMILARITY
                       else f'judged = ["{off[0]}"] (and a [judge] table)')
                raise ConfigError(
                    f"{config.source}: {where} {off[0]} = {table[off[0]]:g}: the run does not "
                    f"measure {off[0]}; add {how} under [metrics], or remove the threshold"
                )
        thresholds = thresholds_from_table(
            config.thresholds, source=str(config.source), directions=directions
        )
        item_thresholds = thresholds_from_table(
            config.item_thresholds, source=str(config.source), directions=directions,
            where="[item_thresholds]",
        )
        slice_thresholds = tuple(
            SliceThreshold(name=name, checks=tuple(thresholds_from_table(
                table, source=str(config.source), directions=directions,
                where=f"[thresholds.slice.{name}]")))
            for name, table in config.slice_thresholds.items()
        )
        for metric in custom:
            value = config.thresholds.get(metric.name)
            if value is not None and metric.out_of_bounds(value):
                raise ConfigError(
                    f"{config.source}: [thresholds] {metric.name} = {value:g} lies outside the "
                    f"values custom metric {metric.name!r} can take ({metric.range_text}); "
                    "use a number in that range or widen CustomMetric(bounds=...)"
                )
        return cls(
            config=config, options=options, variants=select_variants(config, options.variants),
            custom_metrics=custom, rules=rules, thresholds=tuple(thresholds),
            item_thresholds=tuple(item_thresholds), tokenizer=tokenizer,
            similarity=config.similarity, judged=config.judged, judge=judge,
            slice_thresholds=slice_thresholds,
        )

    @property
    def profile(self) -> str:
        """The metric profile: ``--ragev-profile``, else ``[metrics] profile``."""
        return self.options.profile or self.config.profile

    @property
    def repeat(self) -> int:
        """How many times each question is answered: ``--ragev-repeat``, else ``[run]
        repeat`` (1: once, as without the option)."""
        return self.options.repeat or self.config.repeat

    @property
    def concurrency(self) -> int:
        """Pipeline calls in flight at once (``1`` is strictly serial), for the project's
        own pipeline code; see :meth:`concurrency_for`."""
        return self.concurrency_for("project")

    def concurrency_for(self, kind: PipelineKind) -> int:
        """Calls in flight: ``--ragev-concurrency``, else ``[run] concurrency``, else
        :func:`default_concurrency` for the kind of pipeline. A run with a judge waits
        on the judge's service for every question, so it gets the default of a pipeline
        that waits on a service, whatever answers."""
        value = self.options.concurrency or self.config.concurrency
        if value is not None:
            return value
        return default_concurrency("service" if self.judge is not None else kind)

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
    def quality(self) -> tuple[str, ...]:
        """The answer-quality metrics the run measures, in report order."""
        return ((SIMILARITY,) if self.similarity else ()) + self.judged

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The twelve metrics, the answer-quality ones measured, then the custom ones, in
        report order."""
        return (*METRIC_NAMES, *self.quality, *(m.name for m in self.custom_metrics))

    @property
    def scorers(self) -> dict[str, str]:
        """Who scores each answer-quality metric measured (recorded with the runs: a
        baseline scored by another model or prompt is not compared)."""
        found: dict[str, str] = {}
        if self.similarity:
            found[SIMILARITY] = similarity_identity()
        if self.judge is not None:
            for name in self.judged:
                found[name] = f"{self.judge.label} {PROMPTS[name].version}"
        return found

    def settings(self, variant: str | None) -> PipelineSettings:
        """The pipeline settings of the base configuration (``None``) or of a variant."""
        return variant_settings(self.config, variant)

