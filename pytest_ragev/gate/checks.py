"""The regression gate: thresholds, paired tests against a baseline, per-question diffs.

Everything here reads the plain-data results of :mod:`pytest_ragev.core.results` and
returns plain data (plus one-line reasons the plugin prints as they are). numpy is
imported inside the functions that need it, so importing this module stays cheap.

The statistics, in short (``docs/baselines.md`` has the long version):

* Changes are measured on the questions both runs share (by qid), per metric, as
  ``current - baseline`` per question; the metric's direction decides what "worse" is.
* The p-value is a one-sided paired sign-flip permutation test of "no change" against
  "worse" (or "better" for improvements): under no change, each per-question
  difference is as likely to have the opposite sign. It is exact up to Monte-Carlo
  error, so the false-alarm rate stays at or below ``significance``.
* The confidence interval is a paired percentile bootstrap of the mean difference at
  level ``1 - 2 * significance`` (90 % for the default 0.05): its worse-side bound
  excludes zero exactly when a one-sided test at ``significance`` would reject,
  which keeps the printed interval consistent with the verdict.
* Both use generators seeded from ``(seed, n)`` (one stream each) so verdicts are
  reproducible and one metric's p-value does not depend on which other metrics were
  compared.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pytest_ragev.core.errors import BaselineError, ConfigError
from pytest_ragev.core.results import Direction, MetricSummary, RunResult, SampleResult

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: How a metric's change is judged; see :class:`MetricRule`.
Mode = Literal["significant", "tolerance", "any"]
MODES: tuple[Mode, ...] = ("significant", "tolerance", "any")

#: The multiple-comparison correction across the gated metrics of one run.
Correction = Literal["holm", "maxt", "none"]
CORRECTIONS: tuple[Correction, ...] = ("holm", "maxt", "none")
#: How failure lines and reports name a correction that adjusted p.
CORRECTION_NAMES: Mapping[str, str] = {"holm": "Holm", "maxt": "max-T"}

#: What happened to one metric between the baseline and the current run.
Status = Literal[
    "regressed", "improved", "unchanged", "within tolerance", "not significant", "no data"
]

_DEFAULT_RESAMPLES = 10_000
_DEFAULT_TOP = 10
# Resamples are drawn in blocks of this many rows: bounds memory (block x n floats) and
# keeps the random stream identical whatever the number of metrics compared together.
_BLOCK = 2_000
_BLOCK_CELLS = 4_000_000


# --------------------------------------------------------------------------- rules


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
_GATE_KEYS = (*_RULE_KEYS, "correction", "resamples", "seed", "top_regressions", "metrics")


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
    """

    default: MetricRule = field(default_factory=MetricRule)
    per_metric: Mapping[str, MetricRule] = field(default_factory=dict)
    resamples: int = _DEFAULT_RESAMPLES
    seed: int = 0
    top_regressions: int = _DEFAULT_TOP
    correction: Correction = "maxt"

    def rule_for(self, metric: str) -> MetricRule:
        """The rule of ``metric``: its own sub-table merged over the global keys."""
        return self.per_metric.get(metric, self.default)

    @classmethod
    def from_table(
        cls,
        table: Mapping[str, Any],
        *,
        source: str,
        metric_names: Iterable[str],
    ) -> GateRules:
        """Build the rules from a parsed ``[gate]`` TOML table.

        ``source`` names the file in error messages; ``metric_names`` are the metrics
        a ``[gate.metrics.<name>]`` sub-table may name. Raises :class:`ConfigError`
        (one line) on unknown keys, wrong types and out-of-range values.
        """
        known_metrics = list(metric_names)
        _reject_unknown(table, _GATE_KEYS, source=source, where="[gate]")
        default = _rule_from_table(table, MetricRule(), source=source, where="[gate]")
        resamples = _int_key(table, "resamples", _DEFAULT_RESAMPLES, 100, source, "[gate]")
        seed = _int_key(table, "seed", 0, 0, source, "[gate]")
        top = _int_key(table, "top_regressions", _DEFAULT_TOP, 0, source, "[gate]")
        correction = table.get("correction", "maxt")
        if correction not in CORRECTIONS:
            raise ConfigError(
                f"{source}: [gate] correction = {correction!r} is not a correction"
                f"{_did_you_mean(str(correction), CORRECTIONS)}; use one of: "
                f"{', '.join(CORRECTIONS)}"
            )
        sub_tables = table.get("metrics", {})
        if not isinstance(sub_tables, Mapping):
            raise ConfigError(
                f"{source}: [gate] metrics must be a table of per-metric tables, got "
                f"{_show(sub_tables)}; write it as [gate.metrics.<metric>]"
            )
        per_metric: dict[str, MetricRule] = {}
        for name, sub in sub_tables.items():
            where = f"[gate.metrics.{name}]"
            if name not in known_metrics:
                raise ConfigError(
                    f"{source}: {where}: unknown metric {name!r}"
                    f"{_did_you_mean(name, known_metrics)}; "
                    f"known metrics: {', '.join(known_metrics)}"
                )
            if not isinstance(sub, Mapping):
                raise ConfigError(
                    f"{source}: [gate.metrics] {name} must be a table, got {_show(sub)}; "
                    f"write it as {where} with keys such as max_drop = 0.01"
                )
            _reject_unknown(sub, _RULE_KEYS, source=source, where=where)
            per_metric[str(name)] = _rule_from_table(sub, default, source=source, where=where)
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
            top_regressions=top, correction=correction,
        )


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _did_you_mean(word: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(word), list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _reject_unknown(
    table: Mapping[str, Any], allowed: Sequence[str], *, source: str, where: str
) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(
                f"{source}: {where}: unknown key {key!r}{_did_you_mean(key, allowed)}; "
                f"allowed keys: {', '.join(allowed)}"
            )


def _is_number(value: Any) -> bool:
    # TOML booleans are Python ints; "max_drop = true" is a mistake, not 1.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _float_key(
    table: Mapping[str, Any], key: str, fallback: float | None, source: str, where: str,
    *, low: float, high: float | None = None, low_open: bool = False, example: str,
) -> float | None:
    if key not in table:
        return fallback
    value = table[key]
    if not _is_number(value) or not math.isfinite(float(value)):
        raise ConfigError(
            f"{source}: {where} {key} must be a number, got {_show(value)}; e.g. {key} = {example}"
        )
    number = float(value)
    too_low = number <= low if low_open else number < low
    too_high = high is not None and number >= high
    if too_low or too_high:
        if high is not None:
            span = f"between {low:g} and {high:g} (exclusive)"
        else:
            span = f"greater than {low:g}" if low_open else f"at least {low:g}"
        raise ConfigError(
            f"{source}: {where} {key} = {value!r} is out of range: it must be {span}; "
            f"e.g. {key} = {example}"
        )
    return number


def _int_key(
    table: Mapping[str, Any], key: str, fallback: int, low: int, source: str, where: str
) -> int:
    if key not in table:
        return fallback
    value = table[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(
            f"{source}: {where} {key} must be an integer, got {_show(value)}; "
            f"e.g. {key} = {fallback}"
        )
    if value < low:
        raise ConfigError(
            f"{source}: {where} {key} = {value} is out of range: it must be at least {low}; "
            f"e.g. {key} = {fallback}"
        )
    return value


def _rule_from_table(
    table: Mapping[str, Any], inherited: MetricRule, *, source: str, where: str
) -> MetricRule:
    mode = table.get("mode", inherited.mode)
    if mode not in MODES:
        raise ConfigError(
            f"{source}: {where} mode = {mode!r} is not a gate mode"
            f"{_did_you_mean(str(mode), MODES)}; use one of: {', '.join(MODES)}"
        )
    enabled = table.get("enabled", inherited.enabled)
    if not isinstance(enabled, bool):
        raise ConfigError(
            f"{source}: {where} enabled must be true or false, got {_show(enabled)}"
        )
    max_drop = _float_key(
        table, "max_drop", inherited.max_drop, source, where, low=0.0, example="0.01"
    )
    max_drop_pct = _float_key(
        table, "max_drop_pct", inherited.max_drop_pct, source, where, low=0.0, example="5"
    )
    # The interval is printed at level 1 - 2*alpha, so alpha must stay below one half.
    significance = _float_key(
        table, "significance", inherited.significance, source, where,
        low=0.0, high=0.5, low_open=True, example="0.05",
    )
    assert max_drop is not None and significance is not None  # inherited values are set
    return MetricRule(
        max_drop=max_drop, max_drop_pct=max_drop_pct, significance=significance,
        mode=mode, enabled=enabled,
    )


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class PairedStats:
    """A paired comparison of one metric over ``n`` shared questions.

    ``delta = current_mean - baseline_mean`` (raw, not direction-adjusted);
    ``ci_low``/``ci_high`` bound ``delta`` at ``ci_level``; ``p_lower`` is the one-sided
    p-value for "the current run is lower", ``p_higher`` for "higher".
    """

    n: int
    baseline_mean: float
    current_mean: float
    delta: float
    ci_low: float
    ci_high: float
    ci_level: float
    p_lower: float
    p_higher: float

    def p_worse(self, direction: Direction) -> float:
        """The one-sided p-value of a change in the worse direction."""
        return self.p_lower if direction == "higher" else self.p_higher

    def p_better(self, direction: Direction) -> float:
        """The one-sided p-value of a change in the better direction."""
        return self.p_higher if direction == "higher" else self.p_lower


def paired_stats(
    pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    alphas: Mapping[str, float] | None = None,
    resamples: int = _DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, PairedStats]:
    """Paired permutation p-values and bootstrap intervals for several metrics at once.

    ``pairs`` maps a metric name to its (baseline, current) per-question values, aligned
    by question. Metrics with the same number of questions share one matrix product,
    so 12 metrics x 400 questions x 10,000 resamples take a fraction of a second.
    ``alphas`` sets each metric's significance (default 0.05; interval at 1 - 2*alpha).
    """
    import numpy as np

    by_size: dict[int, list[str]] = {}
    diffs: dict[str, npt.NDArray[np.float64]] = {}
    means: dict[str, tuple[float, float]] = {}
    for name, (before, after) in pairs.items():
        old = np.asarray(before, dtype=np.float64)
        new = np.asarray(after, dtype=np.float64)
        if old.shape != new.shape or old.ndim != 1:
            raise ValueError(f"{name}: baseline and current values must be aligned 1-d sequences")
        if old.size == 0:
            continue
        diffs[name] = new - old
        means[name] = (float(old.mean()), float(new.mean()))
        by_size.setdefault(int(old.size), []).append(name)

    results: dict[str, PairedStats] = {}
    for n, names in by_size.items():
        matrix = np.stack([diffs[name] for name in names], axis=1)  # n x metrics
        p_lower, p_higher, boots = _resample(matrix, resamples=resamples, seed=seed)
        for column, name in enumerate(names):
            alpha = (alphas or {}).get(name, 0.05)
            low, high = np.quantile(boots[:, column], [alpha, 1.0 - alpha])
            before_mean, after_mean = means[name]
            results[name] = PairedStats(
                n=n,
                baseline_mean=before_mean,
                current_mean=after_mean,
                delta=float(matrix[:, column].mean()),
                ci_low=float(low),
                ci_high=float(high),
                ci_level=1.0 - 2.0 * alpha,
                p_lower=float(p_lower[column]),
                p_higher=float(p_higher[column]),
            )
    return results


def _resample(
    matrix: npt.NDArray[np.float64], *, resamples: int, seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Sign-flip permutation tail counts and bootstrap means for each column of ``matrix``."""
    import numpy as np

    n, width = matrix.shape
    observed = matrix.mean(axis=0)
    totals = matrix.sum(axis=0)
    # Permuted means equal to the observed one (ties, e.g. all-zero differences) must
    # count as "at least as extreme"; float sums in another order differ in the last bits.
    slack = 1e-9 * np.maximum(1.0, np.abs(matrix).sum(axis=0) / n)
    at_or_below = np.zeros(width)
    at_or_above = np.zeros(width)
    boots = np.empty((resamples, width))
    # Two streams: the p-values (the verdict) never depend on how the bootstrap draws.
    sign_rng = np.random.default_rng([seed, n, 0])
    boot_rng = np.random.default_rng([seed, n, 1])
    # Blocks shrink for very large datasets so one block stays around 4 million cells;
    # the block size depends on n only, so the random streams stay reproducible.
    block = max(1, min(_BLOCK, _BLOCK_CELLS // n))
    rows = np.arange(block, dtype=np.int64)[:, None] * n
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        # One random bit per question and resample (unpacked bytes: ten times faster
        # than drawing integers); flipping signs maps a mean m to (2 * bits @ d - sum d) / n.
        raw = np.frombuffer(sign_rng.bytes((size * n + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(raw, count=size * n).reshape(size, n).astype(np.float64)
        flipped = (2.0 * (bits @ matrix) - totals) / n
        at_or_below += (flipped <= observed + slack).sum(axis=0)
        at_or_above += (flipped >= observed - slack).sum(axis=0)
        # Bootstrap: how often each question is drawn, as a count matrix, so the
        # resampled means are one matrix product instead of a gather per metric.
        # int32 draws are about three times cheaper than int64 ones; n fits easily.
        picks = boot_rng.integers(0, n, size=(size, n), dtype=np.int32) + rows[:size]
        counts = np.bincount(picks.ravel(), minlength=size * n).reshape(size, n)
        boots[start : start + size] = counts.astype(np.float64) @ matrix / n
    # The +1 counts the observed assignment itself: a p-value is never exactly zero.
    return (1.0 + at_or_below) / (resamples + 1.0), (1.0 + at_or_above) / (resamples + 1.0), boots


# --------------------------------------------------------------------------- formatting


def _num(value: float, signed: bool = False) -> str:
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    # U+2212 MINUS SIGN: the report's figures line up and read as numbers, not dashes.
    return text.replace("-", "−")


def _p_text(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _correction_text(correction: str, family: int) -> str:
    if family <= 1 or correction == "none":
        return ""
    return f" ({CORRECTION_NAMES.get(correction, correction)}, {family} metrics)"


def _level_text(level: float) -> str:
    return f"{level * 100:.4g}%"


def _label(metric: str, variant: str | None) -> str:
    return f"{metric} [{variant}]" if variant else metric


# --------------------------------------------------------------------------- thresholds


class Check(Protocol):
    """A gate check: ``fails`` returns the one-line reason, or ``None`` when it passes."""

    @property
    def metric(self) -> str: ...

    def fails(self, current: RunResult, baseline: RunResult | None = None) -> str | None: ...


@dataclass(frozen=True)
class MinValue:
    """An absolute floor from ``[thresholds]``: the run's mean must be at least ``minimum``."""

    metric: str
    minimum: float

    def fails(self, current: RunResult, baseline: RunResult | None = None) -> str | None:
        """``ragev: recall 0.412 < threshold 0.500 (n=118)`` when below the floor."""
        summary = _summary(current, self.metric)
        label = _label(self.metric, current.variant)
        if summary.mean is None:
            return f"ragev: {label} has no values (n=0), threshold {_num(self.minimum)} unmet"
        if summary.mean < self.minimum:
            return (
                f"ragev: {label} {_num(summary.mean)} < threshold {_num(self.minimum)} "
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
        summary = _summary(current, self.metric)
        label = _label(self.metric, current.variant)
        if summary.mean is None:
            return f"ragev: {label} has no values (n=0), threshold {_num(self.maximum)} unmet"
        if summary.mean > self.maximum:
            return (
                f"ragev: {label} {_num(summary.mean)} > threshold {_num(self.maximum)} "
                f"(n={summary.n})"
            )
        return None


def _summary(run: RunResult, metric: str) -> MetricSummary:
    summary = run.summary.get(metric)
    if summary is None:
        return MetricSummary(name=metric, mean=None, n=0)
    return summary


@dataclass(frozen=True)
class ThresholdResult:
    """The outcome of one threshold on one run (``reason`` is ``None`` when it passed)."""

    metric: str
    threshold: float
    kind: Literal["min", "max"]
    value: float | None
    n: int
    variant: str | None
    reason: str | None

    @property
    def passed(self) -> bool:
        """Whether the run met the threshold."""
        return self.reason is None


def thresholds_from_table(
    table: Mapping[str, Any],
    *,
    source: str,
    directions: Mapping[str, str],
) -> list[MinValue | MaxValue]:
    """Checks from a parsed ``[thresholds]`` table (``recall = 0.5``).

    ``directions`` maps every known metric to its direction: a higher-is-better metric
    gets a floor (:class:`MinValue`), a lower-is-better one a ceiling (:class:`MaxValue`).
    """
    checks: list[MinValue | MaxValue] = []
    known = list(directions)
    for name, value in table.items():
        if name not in directions:
            raise ConfigError(
                f"{source}: [thresholds]: unknown metric {name!r}{_did_you_mean(name, known)}; "
                f"known metrics: {', '.join(known)}"
            )
        if not _is_number(value) or not math.isfinite(float(value)):
            raise ConfigError(
                f"{source}: [thresholds] {name} must be a number, got {_show(value)}; "
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
        summary = _summary(run, check.metric)
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


# --------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class MetricComparison:
    """One metric, baseline against current, over the questions both runs share.

    Means are over those shared questions (so ``delta`` is what the test saw), not the
    runs' overall means. ``delta``, ``ci_low`` and ``ci_high`` are ``current - baseline``;
    ``p`` is the one-sided p-value in the direction of the change (worse for a drop),
    adjusted for the ``family`` of metrics tested together by ``correction`` (``holm`` or
    ``maxt``; ``family`` is 1 without one), and ``p_raw`` the p-value before adjustment.
    Everything numeric is ``None`` when no question has the metric in both runs.
    """

    metric: str
    direction: Direction
    baseline_mean: float | None
    current_mean: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    ci_level: float
    p: float | None
    n: int
    status: Status
    reason: str | None
    rule: MetricRule
    p_raw: float | None = None
    family: int = 1
    correction: str = "none"

    @property
    def regressed(self) -> bool:
        """Whether this metric fails the gate."""
        return self.status == "regressed" and self.rule.enabled


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare`: one :class:`MetricComparison` per metric, report order."""

    metrics: list[MetricComparison]
    common_qids: list[int]
    added: list[int]
    removed: list[int]
    variant: str | None = None

    @property
    def regressions(self) -> list[MetricComparison]:
        """The metrics that fail the gate."""
        return [m for m in self.metrics if m.regressed]

    @property
    def failure_lines(self) -> list[str]:
        """One ``ragev: ...`` line per regressed metric."""
        return [m.reason for m in self.regressions if m.reason is not None]

    @property
    def passed(self) -> bool:
        """True when no enabled metric regressed."""
        return not self.regressions

    def get(self, metric: str) -> MetricComparison | None:
        """The comparison of ``metric``, if it was compared."""
        for item in self.metrics:
            if item.metric == metric:
                return item
        return None


def _metric_order(*runs: RunResult) -> list[str]:
    order: list[str] = []
    for run in runs:
        for name in run.summary:
            if name not in order:
                order.append(name)
    return order


def _direction(metric: str, *runs: RunResult) -> Direction:
    for run in runs:
        if metric in run.summary:
            return run.summary[metric].direction
    return "higher"


def _paired_scores(
    baseline: RunResult, current: RunResult, metric: str
) -> dict[int, tuple[float, float]]:
    """``(baseline, current)`` scores of ``metric`` per shared question, in qid order."""
    before = baseline.scores(metric)
    after = current.scores(metric)
    # A NaN from a custom metric would poison every resampled mean (and comparisons with
    # NaN are all false, which would read as a tiny p-value): such questions sit out.
    return {
        q: (before[q], after[q]) for q in sorted(before.keys() & after.keys())
        if math.isfinite(before[q]) and math.isfinite(after[q])
    }


def _aligned(scores: Mapping[int, tuple[float, float]]) -> tuple[list[float], list[float]]:
    """The baseline's and the current run's scores as two lists in the same order."""
    return [b for b, _ in scores.values()], [a for _, a in scores.values()]


def _differences(scores: Mapping[int, tuple[float, float]]) -> dict[int, float]:
    """``current - baseline`` per question."""
    return {q: after - before for q, (before, after) in scores.items()}


def compare(
    baseline_run: RunResult,
    current_run: RunResult,
    rules: GateRules | None = None,
    *,
    metrics: Sequence[str] | None = None,
) -> Comparison:
    """Compare every metric of two runs over their shared questions and judge each.

    Raises :class:`BaselineError` when the runs share no question.
    """
    rules = rules or GateRules()
    before_qids = {s.qid for s in baseline_run.samples}
    after_qids = {s.qid for s in current_run.samples}
    common = sorted(before_qids & after_qids)
    if not common:
        raise BaselineError(
            f"ragev: the baseline and the current run share no question "
            f"(baseline has {len(before_qids)}, current {len(after_qids)}); "
            "re-baseline on this dataset with --ragev-update-baseline"
        )
    names = list(metrics) if metrics is not None else _metric_order(current_run, baseline_run)
    scores = {name: _paired_scores(baseline_run, current_run, name) for name in names}
    pairs = {name: _aligned(scores[name]) for name in names}
    stats = paired_stats(
        pairs,
        alphas={name: rules.rule_for(name).significance for name in names},
        resamples=rules.resamples,
        seed=rules.seed,
    )
    directions = {name: _direction(name, current_run, baseline_run) for name in names}
    # The family: metrics with data whose verdict can depend on the test.
    family = [
        name for name in names
        if name in stats and rules.rule_for(name).enabled
        and rules.rule_for(name).mode != "tolerance"
    ]
    worse: dict[str, float] = {}
    better: dict[str, float] = {}
    if rules.correction == "holm" and len(family) > 1:
        worse = holm({n: stats[n].p_worse(directions[n]) for n in family})
        better = holm({n: stats[n].p_better(directions[n]) for n in family})
    elif rules.correction == "maxt" and len(family) > 1:
        diffs = {n: _differences(scores[n]) for n in family}
        worse_sign = {n: -1.0 if directions[n] == "higher" else 1.0 for n in family}
        worse = step_down_maxt(diffs, worse_sign, resamples=rules.resamples, seed=rules.seed)
        better = step_down_maxt(
            diffs, {n: -sign for n, sign in worse_sign.items()},
            resamples=rules.resamples, seed=rules.seed,
        )
    items = [
        judge(
            name,
            stats.get(name),
            directions[name],
            rules.rule_for(name),
            variant=current_run.variant,
            p_worse=worse.get(name),
            p_better=better.get(name),
            family=len(family) if name in worse else 1,
            correction=rules.correction if name in worse else "none",
        )
        for name in names
    ]
    return Comparison(
        metrics=items,
        common_qids=common,
        added=sorted(after_qids - before_qids),
        removed=sorted(before_qids - after_qids),
        variant=current_run.variant,
    )


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values: ``adjusted < alpha`` iff Holm's step-down rejects.

    Sorted ascending, the i-th smallest of m p-values becomes
    ``max over j <= i of min(1, (m - j + 1) * p_(j))``. It controls the probability of
    any false rejection among the m hypotheses at alpha, whatever their dependence.
    """
    order = sorted(p_values, key=lambda name: (p_values[name], name))
    m = len(order)
    adjusted: dict[str, float] = {}
    running = 0.0
    for index, name in enumerate(order):
        running = max(running, min(1.0, (m - index) * p_values[name]))
        adjusted[name] = running
    return adjusted


def step_down_maxt(
    diffs: Mapping[str, Mapping[int, float]],
    signs: Mapping[str, float],
    *,
    resamples: int = _DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, float]:
    """Westfall–Young step-down max-T adjusted one-sided p-values over several metrics.

    ``diffs`` maps each metric to its per-question differences (keyed by qid);
    ``signs[m]`` is ``+1`` when a positive difference is the direction tested (``-1``
    for "lower"). One random sign per *question*, shared by every metric, keeps the
    metrics' dependence: each resample flips the questions' signs, standardises each
    metric's flipped sum by ``sqrt(sum d^2)`` (its spread under the null) and takes the
    maximum over the metrics not yet rejected. The adjusted p of the k-th most extreme
    metric is the share of resamples whose maximum over metrics k.. reaches its
    observed statistic, made monotone. It controls the chance of any false rejection at
    alpha (sign-flip symmetry gives subset pivotality); when the metrics move together
    it is close to the uncorrected p, when they are independent close to Holm.
    A metric whose differences are all zero gets 1.0.
    """
    import numpy as np

    names = [n for n in diffs if any(v != 0 for v in diffs[n].values())]
    adjusted = {n: 1.0 for n in diffs}
    if not names:
        return adjusted
    qids = sorted({q for n in names for q in diffs[n]})
    row = {q: i for i, q in enumerate(qids)}
    matrix = np.zeros((len(qids), len(names)))
    for column, name in enumerate(names):
        for qid, value in diffs[name].items():
            matrix[row[qid], column] = signs[name] * value
    scale = np.sqrt((matrix**2).sum(axis=0))
    matrix /= scale  # flipped sums are now on one scale
    totals = matrix.sum(axis=0)
    order = np.argsort(-totals, kind="stable")  # most extreme first
    observed = totals[order]
    slack = 1e-9 * max(1.0, float(np.abs(matrix).sum(axis=0).max()))
    n = len(qids)
    rng = np.random.default_rng([seed, n, 2])
    block = max(1, min(_BLOCK, _BLOCK_CELLS // n))
    reached = np.zeros(len(names))
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        raw = np.frombuffer(rng.bytes((size * n + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(raw, count=size * n).reshape(size, n).astype(np.float64)
        flipped = (2.0 * (bits @ matrix) - totals)[:, order]
        # running[:, k]: the maximum over the metrics from the k-th most extreme on.
        running = np.maximum.accumulate(flipped[:, ::-1], axis=1)[:, ::-1]
        reached += (running >= observed - slack).sum(axis=0)
    p = np.maximum.accumulate((1.0 + reached) / (resamples + 1.0))
    for rank, column in enumerate(order):
        adjusted[names[int(column)]] = float(p[rank])
    return adjusted


def judge(
    metric: str,
    stats: PairedStats | None,
    direction: Direction,
    rule: MetricRule,
    *,
    variant: str | None = None,
    p_worse: float | None = None,
    p_better: float | None = None,
    family: int = 1,
    correction: str = "none",
) -> MetricComparison:
    """Apply ``rule`` to the paired statistics of one metric.

    ``p_worse``/``p_better`` replace the one-sided p-values of ``stats`` when a
    multiple-comparison correction adjusted them over ``family`` metrics.
    """
    if stats is None:
        return MetricComparison(
            metric=metric, direction=direction, baseline_mean=None, current_mean=None,
            delta=None, ci_low=None, ci_high=None, ci_level=1.0 - 2.0 * rule.significance,
            p=None, n=0, status="no data", reason=None, rule=rule,
        )
    worsening = -stats.delta if direction == "higher" else stats.delta
    raw = stats.p_worse(direction) if worsening > 0 else stats.p_better(direction)
    p_worse = stats.p_worse(direction) if p_worse is None else p_worse
    p_better = stats.p_better(direction) if p_better is None else p_better
    beyond = worsening > rule.tolerance(stats.baseline_mean)
    significant_worse = worsening > 0 and p_worse < rule.significance
    if rule.mode == "significant":
        regressed = beyond and significant_worse
    elif rule.mode == "tolerance":
        regressed = beyond
    else:  # "any"
        regressed = beyond or significant_worse

    status: Status
    if regressed:
        status = "regressed"
    elif stats.delta == 0.0 and stats.ci_low == stats.ci_high == 0.0:
        status = "unchanged"
    elif worsening < 0 and p_better < rule.significance:
        status = "improved"
    elif worsening > 0 and (significant_worse or rule.mode == "tolerance"):
        status = "within tolerance"
    else:
        status = "not significant"
    p = p_worse if worsening > 0 else p_better
    reason = None
    if regressed:
        sign = "<" if direction == "higher" else ">"
        reason = (
            f"ragev: {_label(metric, variant)} {_num(stats.current_mean)} {sign} baseline "
            f"{_num(stats.baseline_mean)} (Δ {_num(stats.delta, signed=True)}, "
            f"{_level_text(stats.ci_level)} CI [{_num(stats.ci_low)}, {_num(stats.ci_high)}], "
            f"{_p_text(p)}{_correction_text(correction, family)}, n={stats.n})"
        )
    return MetricComparison(
        metric=metric, direction=direction, baseline_mean=stats.baseline_mean,
        current_mean=stats.current_mean, delta=stats.delta, ci_low=stats.ci_low,
        ci_high=stats.ci_high, ci_level=stats.ci_level, p=p, n=stats.n, status=status,
        reason=reason, rule=rule, p_raw=raw, family=family, correction=correction,
    )


@dataclass(frozen=True)
class NoRegression:
    """The baseline check of one metric as a :class:`Check` (see :func:`compare`)."""

    metric: str
    rules: GateRules = field(default_factory=GateRules)

    def fails(self, current: RunResult, baseline: RunResult | None = None) -> str | None:
        """The regression line, or ``None`` (also when there is no baseline to compare)."""
        if baseline is None:
            return None
        item = compare(baseline, current, self.rules, metrics=[self.metric]).metrics[0]
        return item.reason if item.regressed else None


# --------------------------------------------------------------------------- per-question diffs


@dataclass(frozen=True)
class MetricDelta:
    """One metric of one question before and after (``None`` where it did not apply)."""

    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        """``after - before`` when both exist."""
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


@dataclass(frozen=True)
class QuestionDiff:
    """What changed for one question between the baseline and the current run.

    ``worsening`` ranks the diffs: the sum over shared metrics of the change in each
    metric's worse direction (``inf`` when the question newly failed with an error).
    ``relevant`` holds the relevant passage ids, so renderers can mark them.
    """

    qid: int
    question: str
    worsening: float
    metrics: dict[str, MetricDelta]
    retrieved_before: list[int]
    retrieved_after: list[int]
    relevant: frozenset[int]
    answer_before: str
    answer_after: str
    error_before: str | None = None
    error_after: str | None = None
    variant: str | None = None


def _relevant(sample: SampleResult) -> frozenset[int]:
    return frozenset(pid for group in sample.retrieval_gt for pid in group)


def question_diff(
    before: SampleResult,
    after: SampleResult,
    directions: Mapping[str, Direction],
    *,
    metric: str | None = None,
) -> QuestionDiff:
    """The diff of one question (``metric`` restricts the ranking score to one metric)."""
    names = [m for m in after.metrics if m in before.metrics or m in after.metrics]
    names += [m for m in before.metrics if m not in names]
    deltas = {m: MetricDelta(before.metrics.get(m), after.metrics.get(m)) for m in names}
    if after.error is not None and before.error is None:
        worsening = math.inf
    else:
        worsening = 0.0
        for name, item in deltas.items():
            if metric is not None and name != metric:
                continue
            change = item.delta
            if change is None:
                continue
            worsening += -change if directions.get(name, "higher") == "higher" else change
    return QuestionDiff(
        qid=after.qid,
        question=after.question or before.question,
        worsening=worsening,
        metrics=deltas,
        retrieved_before=list(before.retrieval_ids),
        retrieved_after=list(after.retrieval_ids),
        relevant=_relevant(after) | _relevant(before),
        answer_before=before.generated_text,
        answer_after=after.generated_text,
        error_before=before.error,
        error_after=after.error,
        variant=after.variant,
    )


def top_regressions(
    baseline_run: RunResult,
    current_run: RunResult,
    n: int = _DEFAULT_TOP,
    metric: str | None = None,
) -> list[QuestionDiff]:
    """The ``n`` shared questions that got worst, worst first (ties by qid).

    Only questions that actually got worse are listed. With ``metric`` the ranking uses
    that metric alone; otherwise the sum of all metrics' worse-direction changes.
    A question that newly raised an error ranks first.
    """
    if n <= 0:
        return []
    directions = {
        name: _direction(name, current_run, baseline_run)
        for name in _metric_order(current_run, baseline_run)
    }
    before = {s.qid: s for s in baseline_run.samples}
    diffs = []
    for sample in current_run.samples:
        old = before.get(sample.qid)
        if old is None:
            continue
        diff = question_diff(old, sample, directions, metric=metric)
        if diff.worsening > 1e-12:
            diffs.append(diff)
    diffs.sort(key=lambda d: (-d.worsening, d.qid))
    return diffs[:n]


# --------------------------------------------------------------------------- variants


@dataclass(frozen=True)
class VariantCell:
    """One metric of one variant: its mean, and its paired change against the base run."""

    mean: float | None
    n: int
    delta: float | None
    p: float | None
    significant: bool
    better: bool | None

    @property
    def marker(self) -> str:
        """``▲``/``▼`` for a significant improvement/worsening, empty otherwise."""
        if not self.significant or self.better is None:
            return ""
        return "▲" if self.better else "▼"


@dataclass(frozen=True)
class VariantRow:
    """One row of the variant table (``name`` is ``None`` for the base configuration)."""

    name: str | None
    cells: dict[str, VariantCell]
    changed_knobs: list[str]


@dataclass(frozen=True)
class VariantTable:
    """Variant x metric: means, changes against the base run, significance markers."""

    metrics: list[str]
    base: VariantRow
    rows: list[VariantRow]


def compare_variants(
    base: RunResult, variants: Sequence[RunResult], rules: GateRules | None = None
) -> VariantTable:
    """The variants table: each variant's paired comparison with the base run.

    The test is two-sided here (a variant may be better or worse, and neither is a
    failure): a cell is marked when either one-sided p-value is below half the metric's
    significance.
    """
    rules = rules or GateRules()
    names = _metric_order(base, *variants)
    base_cells = {
        name: VariantCell(
            mean=_summary(base, name).mean, n=_summary(base, name).n, delta=None, p=None,
            significant=False, better=None,
        )
        for name in names
    }
    base_row = VariantRow(name=None, cells=base_cells, changed_knobs=[])
    rows = []
    for variant in variants:
        pairs = {name: _aligned(_paired_scores(base, variant, name)) for name in names}
        stats = paired_stats(
            pairs,
            alphas={name: rules.rule_for(name).significance for name in names},
            resamples=rules.resamples,
            seed=rules.seed,
        )
        cells = {}
        for name in names:
            summary = _summary(variant, name)
            item = stats.get(name)
            if item is None:
                cells[name] = VariantCell(
                    mean=summary.mean, n=summary.n, delta=None, p=None,
                    significant=False, better=None,
                )
                continue
            direction = _direction(name, variant, base)
            p = min(1.0, 2.0 * min(item.p_lower, item.p_higher))
            better = None if item.delta == 0 else (item.delta > 0) == (direction == "higher")
            cells[name] = VariantCell(
                mean=summary.mean, n=summary.n, delta=item.delta, p=p,
                significant=p < rules.rule_for(name).significance and item.delta != 0,
                better=better,
            )
        rows.append(
            VariantRow(
                name=variant.variant or "?",
                cells=cells,
                changed_knobs=changed_knobs(base.params, variant.params),
            )
        )
    return VariantTable(metrics=names, base=base_row, rows=rows)


def changed_knobs(base_params: Mapping[str, Any], variant_params: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two settings snapshots, sorted.

    Nested tables are walked; a key present on one side only counts as changed.
    """
    changed: list[str] = []

    def walk(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str) -> None:
        for key in sorted(set(old) | set(new), key=str):
            dotted = f"{prefix}{key}"
            if key not in old or key not in new:
                changed.append(dotted)
            elif isinstance(old[key], Mapping) and isinstance(new[key], Mapping):
                walk(old[key], new[key], dotted + ".")
            elif old[key] != new[key]:
                changed.append(dotted)

    walk(base_params, variant_params, "")
    return sorted(changed)


# --------------------------------------------------------------------------- terminal text
# The renderers live in pytest_ragev.report.terminal (which imports this module); these
# entry points keep the gate's whole terminal vocabulary importable from one place.


def render_comparison(comparison: Comparison) -> list[str]:
    """Aligned lines: baseline, current, Δ, CI, p, n and status per metric."""
    from pytest_ragev.report.terminal import render_comparison as render

    return render(comparison)


def render_question_diffs(diffs: Sequence[QuestionDiff]) -> list[str]:
    """Lines for ``-v``: each regressed question's metric changes, retrieval and answer."""
    from pytest_ragev.report.terminal import render_question_diffs as render

    return render(diffs)


def render_variant_table(table: VariantTable) -> list[str]:
    """Aligned lines: variant x metric, Δ against the base run, ▲/▼ significance markers."""
    from pytest_ragev.report.terminal import render_variant_table as render

    return render(table)
