"""How the gate judges each metric: :class:`MetricRule` per metric, :class:`GateRules` for the run.

Built from a config's ``[gate]`` table by :meth:`GateRules.from_config` (the one
reading that the plugin's run plan and ``ragev report`` share), or from the table alone
by :meth:`GateRules.from_table`, with one-line :class:`ConfigError` messages naming the
key and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_ragev.config import RagevConfig
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.tables import Table, suggest

#: How a metric's change is judged; see :class:`MetricRule`.
Mode = Literal["significant", "tolerance", "any"]
MODES: tuple[Mode, ...] = ("significant", "tolerance", "any")

#: The multiple-comparison correction across the gated metrics of one run.
Correction = Literal["holm", "maxt", "none"]
CORRECTIONS: tuple[Correction, ...] = ("holm", "maxt", "none")
#: How failure lines and reports name a correction that adjusted p.
CORRECTION_NAMES: Mapping[str, str] = {"holm": "Holm", "maxt": "max-T"}

_DEFAULT_RESAMPLES = 10_000
#: How many regressed questions the reports list when neither [gate] nor [report] says.
DEFAULT_TOP = 10


@dataclass(frozen=True)
class MetricRule:
    """How one metric is gated.

    ``max_drop`` is the absolute change in the worse direction that is tolerated;
    ``max_drop_pct`` the tolerated change in percent of the baseline mean (``5`` means
    5 %); when both are set the larger allowance wins, so a change fails only when it
    exceeds every tolerance configured. ``significance`` is the one-sided alpha.

    ``mode``:

    * ``"significant"`` (default): regressed when the change is beyond the tolerance
      **and** significant (``p < significance``). Noise never fails the gate.
    * ``"tolerance"``: regressed when the change is beyond the tolerance; the test is
      reported but ignored. For deterministic pipelines, where every change is real.
    * ``"any"``: regressed when the change is beyond the tolerance **or** significantly
      worse at all (even within the tolerance). The strictest rule.

    ``enabled = False`` keeps the metric in the tables but out of the verdict.
    """

    max_drop: float = 0.0
    max_drop_pct: float | None = None
    significance: float = 0.05
    mode: Mode = "significant"
    enabled: bool = True

    def tolerance(self, baseline_mean: float) -> float:
        """The allowed change in the worse direction for a baseline mean (never divides)."""
        relative = 0.0
        if self.max_drop_pct is not None:
            relative = self.max_drop_pct / 100.0 * abs(baseline_mean)
        return max(self.max_drop, relative)


_RULE_KEYS = ("mode", "max_drop", "max_drop_pct", "significance", "enabled")
_GATE_KEYS = (*_RULE_KEYS, "correction", "resamples", "seed", "top_regressions", "metrics",
              "strict_dataset", "require_all_variants", "min_detectable_drop", "slices",
              "min_slice")
_DEFAULT_DETECTABLE = 0.05

#: The kinds of slices ``[gate] slices`` may name: a question's language, its tags.
SLICE_KINDS: tuple[str, ...] = ("lang", "tag")
#: Slices with fewer questions are neither reported nor gated (``[gate] min_slice``).
DEFAULT_MIN_SLICE = 10


@dataclass(frozen=True)
class GateRules:
    """The whole ``[gate]`` table: the default rule, per-metric rules and test settings.

    ``correction`` controls the family-wise error over the metrics of one run, so an
    unchanged pipeline fails on *any* of its twelve metrics with probability at most
    alpha, not about twelve times alpha: ``"maxt"`` (the default) adjusts the metrics'
    one-sided p-values with the joint sign-flip distribution of the metrics
    (Westfall–Young step-down max-T), which keeps most of the power when the metrics
    move together, as they do; ``"holm"`` uses Holm–Bonferroni, valid whatever the
    dependence but far less powerful here; ``"none"`` tests each metric on its own.

    ``strict_dataset`` refuses a baseline recorded on another dataset fingerprint (by
    default the unchanged questions are compared and the edited ones listed);
    ``require_all_variants`` refuses a baseline without a run of every variant that ran
    (by default a new variant is a warning, not compared); ``min_detectable_drop`` is
    the drop of a metric's mean the gate should be able to see (a warning says when the
    paired test cannot at the run's size; ``0`` turns it off).

    ``slices`` names the kinds of slices (:data:`SLICE_KINDS`) whose paired differences
    are tested too, in one max-T family with the run's metrics (see
    :mod:`pytest_ragev.gate.slices`); ``min_slice`` is the fewest questions a slice needs
    to be reported or tested.
    """

    default: MetricRule = field(default_factory=MetricRule)
    per_metric: Mapping[str, MetricRule] = field(default_factory=dict)
    resamples: int = _DEFAULT_RESAMPLES
    seed: int = 0
    top_regressions: int = DEFAULT_TOP
    correction: Correction = "maxt"
    strict_dataset: bool = False
    require_all_variants: bool = False
    min_detectable_drop: float = _DEFAULT_DETECTABLE
    slices: tuple[str, ...] = ()
    min_slice: int = DEFAULT_MIN_SLICE

    def rule_for(self, metric: str) -> MetricRule:
        """The rule of ``metric``: its own sub-table merged over the global keys."""
        return self.per_metric.get(metric, self.default)

    @classmethod
    def from_config(cls, config: RagevConfig, *, metric_names: Iterable[str]) -> GateRules:
        """The rules of ``config``'s ``[gate]`` table (the defaults when it has none).

        ``[gate] top_regressions`` falls back to ``[report] top_regressions`` (default
        10). ``metric_names`` are the metrics a ``[gate.metrics.<name>]`` sub-table may
        name. Raises :class:`ConfigError` as :meth:`from_table` does.
        """
        return cls.from_table(config.gate, source=str(config.source),
                              metric_names=metric_names,
                              top_regressions=config.top_regressions)

    @classmethod
    def from_table(
        cls,
        table: Mapping[str, Any],
        *,
        source: str,
        metric_names: Iterable[str],
        top_regressions: int = DEFAULT_TOP,
    ) -> GateRules:
        """Build the rules from a parsed ``[gate]`` TOML table.

        ``source`` names the file in error messages; ``metric_names`` are the metrics
        a ``[gate.metrics.<name>]`` sub-table may name; ``top_regressions`` is the count
        of regressed questions to list when the table sets none. Raises
        :class:`ConfigError` (one line) on unknown keys, wrong types and out-of-range
        values.
        """
        known_metrics = list(metric_names)
        gate = Table(table, where="[gate]", source=source)
        gate.check_keys(_GATE_KEYS)
        default = _rule_from_table(gate, MetricRule())
        resamples = gate.integer("resamples", _DEFAULT_RESAMPLES, low=100, example="10000")
        seed = gate.integer("seed", 0, low=0, example="0")
        top = gate.integer("top_regressions", top_regressions, low=0, example="10")
        correction = gate.choice("correction", "maxt", CORRECTIONS, what="correction")
        strict = gate.boolean("strict_dataset", False)
        require_all = gate.boolean("require_all_variants", False)
        detectable = gate.number("min_detectable_drop", _DEFAULT_DETECTABLE, low=0.0,
                                 high=1.0, example="0.05")
        assert resamples is not None and seed is not None and top is not None
        assert strict is not None and require_all is not None and detectable is not None
        slices = _slice_kinds(gate)
        min_slice = gate.integer("min_slice", DEFAULT_MIN_SLICE, low=1, example="10")
        assert min_slice is not None
        sub_tables = gate.sub("metrics", where="[gate.metrics]",
                              fix="write it as [gate.metrics.<metric>]")
        per_metric: dict[str, MetricRule] = {}
        for name in sub_tables.table:
            where = f"[gate.metrics.{name}]"
            if name not in known_metrics:
                raise ConfigError(
                    f"{source}: {where}: unknown metric {name!r}; "
                    f"{suggest(name, known_metrics, noun='metrics')}"
                )
            sub = sub_tables.sub(
                name, where=where, fix=f"write it as {where} with keys such as max_drop = 0.01"
            )
            sub.check_keys(_RULE_KEYS)
            per_metric[str(name)] = _rule_from_table(sub, default)
        floor = 1.0 / (resamples + 1)
        for where, rule in [("[gate]", default),
                            *((f"[gate.metrics.{n}]", r) for n, r in per_metric.items())]:
            if rule.significance <= floor:
                raise ConfigError(
                    f"{source}: {where} significance = {rule.significance:g} can never be "
                    f"reached with resamples = {resamples} (the smallest p-value is "
                    f"1/(resamples+1) = {floor:.2g}); raise resamples or significance"
                )
        return cls(
            default=default, per_metric=per_metric, resamples=resamples, seed=seed,
            top_regressions=top, correction=correction,  # type: ignore[arg-type]
            strict_dataset=strict, require_all_variants=require_all,
            min_detectable_drop=detectable, slices=slices, min_slice=min_slice,
        )


def _slice_kinds(gate: Table) -> tuple[str, ...]:
    """``[gate] slices``: a list of :data:`SLICE_KINDS`, each once (report order)."""
    value = gate.get("slices", [])
    example = 'slices = ["lang", "tag"]'
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise gate.fail("slices", value, f"write a list of slice kinds, e.g. {example}")
    for name in value:
        if name not in SLICE_KINDS:
            raise gate.fail("slices", value, f"{name!r} is not a kind of slice; "
                            f"{suggest(name, SLICE_KINDS, noun='kinds')}")
    return tuple(kind for kind in SLICE_KINDS if kind in value)


def _rule_from_table(table: Table, inherited: MetricRule) -> MetricRule:
    mode = table.choice("mode", inherited.mode, MODES, what="gate mode")
    enabled = table.boolean("enabled", inherited.enabled)
    max_drop = table.number("max_drop", inherited.max_drop, low=0.0, example="0.01")
    max_drop_pct = table.number("max_drop_pct", inherited.max_drop_pct, low=0.0, example="5")
    # The interval is printed at level 1 - 2*alpha, so alpha must stay below one half.
    significance = table.number(
        "significance", inherited.significance, low=0.0, high=0.5, low_open=True,
        high_open=True, example="0.05",
    )
    assert max_drop is not None and significance is not None and enabled is not None
    return MetricRule(
        max_drop=max_drop, max_drop_pct=max_drop_pct, significance=significance,
        mode=mode, enabled=enabled,  # type: ignore[arg-type]
    )
