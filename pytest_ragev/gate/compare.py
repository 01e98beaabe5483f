"""A run against its baseline run: every metric compared over the shared questions and judged."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import TYPE_CHECKING, Literal

from pytest_ragev.core import fmt
from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.results import Direction, RunResult
from pytest_ragev.gate.rules import CORRECTION_NAMES, GateRules, MetricRule
from pytest_ragev.gate.slices import GroupTests, group_tests, slice_groups, slice_label
from pytest_ragev.gate.stats import (
    EXPANSION_FROM,
    PairedStats,
    decision_band,
    expansion_interval,
    holm,
    maxt_columns,
    paired_stats,
    smallest_p,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


#: What happened to one metric between the baseline and the current run.
Status = Literal[
    "regressed", "improved", "unchanged", "within tolerance", "not significant", "no data"
]



@dataclass(frozen=True)
class MetricComparison:
    """One metric, baseline against current, over the questions both runs share.

    Means are over those shared questions (so ``delta`` is what the test saw), not the
    runs' overall means. ``delta``, ``ci_low`` and ``ci_high`` are ``current - baseline``;
    ``p`` is the one-sided p-value in the direction of the change (worse for a drop),
    adjusted for the ``family`` of metrics tested together by ``correction`` (``holm`` or
    ``maxt``; ``family`` is 1 without one), and ``p_raw`` the p-value before adjustment.
    With ``[gate] slices`` the family is every metric over the whole run and over each
    of the ``slices`` slices tested (``family`` counts those tests). Everything numeric
    is ``None`` when no question has the metric in both runs.
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
    slices: int = 0

    @property
    def regressed(self) -> bool:
        """Whether this metric fails the gate."""
        return self.status == "regressed" and self.rule.enabled


@dataclass(frozen=True)
class SliceComparison:
    """One slice (``lang:zh``, ``tag:billing``) of a run against the same questions of
    its baseline run: each metric compared over the slice's shared questions.

    ``label`` is how lines name the slice (``zh``); ``n`` counts its compared questions.
    Its metrics' p-values are adjusted over the whole family (every metric over the
    run and over every slice tested); its failure lines name the slice.
    """

    key: str
    label: str
    n: int
    metrics: list[MetricComparison]

    @property
    def regressions(self) -> list[MetricComparison]:
        """The metrics that fail the gate on this slice."""
        return [m for m in self.metrics if m.regressed]

    def get(self, metric: str) -> MetricComparison | None:
        """The comparison of ``metric`` on this slice, if it was compared."""
        return next((item for item in self.metrics if item.metric == metric), None)


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare`: one :class:`MetricComparison` per metric, report order.

    ``common_qids`` are the questions compared; ``added``/``removed`` those only in the
    current run resp. the baseline; ``changed`` those in both whose content was edited
    since the baseline (listed, not compared). ``slices`` holds the slices tested with
    ``[gate] slices``, largest first.
    """

    metrics: list[MetricComparison]
    common_qids: list[int]
    added: list[int]
    removed: list[int]
    variant: str | None = None
    changed: list[int] = field(default_factory=list)
    slices: list[SliceComparison] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        """Whether no metric changed on any compared question (a one-line summary)."""
        return all(m.status in ("unchanged", "no data") for m in self.metrics)

    @property
    def regressions(self) -> list[MetricComparison]:
        """The metrics that fail the gate."""
        return [m for m in self.metrics if m.regressed]

    @property
    def slice_regressions(self) -> list[tuple[SliceComparison, MetricComparison]]:
        """The metrics that fail the gate on a slice, with their slice."""
        return [(item, m) for item in self.slices for m in item.regressions]

    @property
    def failure_lines(self) -> list[str]:
        """One ``ragev: ...`` line per regressed metric, then per regressed slice metric
        (``ragev: zh: rougel 0.310 < baseline 0.360 (...)``)."""
        lines = [m.reason for m in self.regressions if m.reason is not None]
        return lines + [m.reason for _, m in self.slice_regressions if m.reason is not None]

    @property
    def passed(self) -> bool:
        """True when no enabled metric regressed, over the run or on a slice."""
        return not self.regressions and not self.slice_regressions

    def get(self, metric: str) -> MetricComparison | None:
        """The comparison of ``metric``, if it was compared."""
        for item in self.metrics:
            if item.metric == metric:
                return item
        return None


def metric_order(*runs: RunResult) -> list[str]:
    """The metrics of ``runs``, each once: the first run's in its report order, then
    those only a later run has."""
    order: list[str] = []
    for run in runs:
        for name in run.summary:
            if name not in order:
                order.append(name)
    return order


def metric_direction(metric: str, *runs: RunResult) -> Direction:
    """Whether higher or lower is better for ``metric``, as the first run that has it
    says (``"higher"``, the built-ins' direction, when none has)."""
    for run in runs:
        if metric in run.summary:
            return run.summary[metric].direction
    return "higher"


class PairedTable:
    """Two runs' per-question scores side by side: one row per shared question (qid
    order, ``skip`` left out), one column per metric, ``NaN`` where a metric is missing
    or not finite in either run.

    Built once per comparison from the samples (one pass over each run), so pairing
    twelve metrics over 100,000 questions costs array operations, not dict lookups.
    """

    def __init__(
        self, baseline: RunResult, current: RunResult, names: Sequence[str],
        skip: Collection[int] = (),
    ) -> None:
        import numpy as np

        self.names = list(names)
        before_qids, before = _score_matrix(baseline, self.names)
        after_qids, after = _score_matrix(current, self.names)
        common, at_before, at_after = np.intersect1d(
            before_qids, after_qids, assume_unique=True, return_indices=True)
        if skip:
            keep = ~np.isin(common, np.fromiter(skip, dtype=np.int64, count=len(skip)))
            common, at_before, at_after = common[keep], at_before[keep], at_after[keep]
        self.qids = common
        self.before = before[at_before]
        self.after = after[at_after]
        # A NaN from a custom metric would poison every resampled mean (and comparisons
        # with NaN are all false, which would read as a tiny p-value): such questions
        # sit out, as do questions a metric does not apply to in one of the runs.
        self.paired = np.isfinite(self.before) & np.isfinite(self.after)

    def pair(self, metric: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The baseline's and the current run's scores of ``metric``, in qid order."""
        column = self.names.index(metric)
        rows = self.paired[:, column]
        return self.before[rows, column], self.after[rows, column]

    def differences(self, metrics: Sequence[str]) -> npt.NDArray[np.float64]:
        """``current - baseline`` per shared question and metric, 0 where not paired."""
        import numpy as np

        columns = [self.names.index(m) for m in metrics]
        diff = self.after[:, columns] - self.before[:, columns]
        return np.where(self.paired[:, columns], diff, 0.0)


def paired_table(
    baseline: RunResult, current: RunResult, skip: Collection[int] = ()
) -> PairedTable:
    """The :class:`PairedTable` of every metric of two runs (report order), to share
    between :func:`compare` and :func:`~pytest_ragev.gate.diffs.top_regressions`
    (``skip``: the questions edited since the baseline, as both are given)."""
    return PairedTable(baseline, current, metric_order(current, baseline), skip=skip)


def _score_matrix(
    run: RunResult, names: Sequence[str]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The run's qids (sorted) and its questions x metrics scores (NaN: missing)."""
    import numpy as np

    samples = sorted(run.samples, key=lambda s: s.qid)
    nan = math.nan
    qids = np.fromiter((s.qid for s in samples), dtype=np.int64, count=len(samples))
    if not names:
        return qids, np.empty((len(samples), 0))
    # One C-level lookup of every metric per question; only a question that lacks one
    # (no qrels, no reference answer, an error) takes the slow path.
    pick = itemgetter(*names) if len(names) > 1 else (lambda m: (m[names[0]],))
    rows = []
    for sample in samples:
        try:
            rows.append(pick(sample.metrics))
        except KeyError:
            rows.append(tuple(sample.metrics.get(name, nan) for name in names))
    values = np.array(rows, dtype=np.float64).reshape(len(samples), len(names))
    return qids, values


def compare(
    baseline_run: RunResult,
    current_run: RunResult,
    rules: GateRules | None = None,
    *,
    metrics: Sequence[str] | None = None,
    changed: Collection[int] = (),
    table: PairedTable | None = None,
) -> Comparison:
    """Compare every metric of two runs over their shared questions and judge each.

    ``changed`` lists shared questions whose content was edited since the baseline
    (:func:`~pytest_ragev.gate.baseline.check_compatible` finds them): they are left
    out of the comparison and reported. Raises :class:`BaselineError` when the runs
    share no unchanged question. ``table`` (:func:`paired_table` of the same runs,
    built with ``changed`` as its ``skip``) saves pairing the runs again.
    """
    rules = rules or GateRules()
    before_qids = {s.qid for s in baseline_run.samples}
    after_qids = {s.qid for s in current_run.samples}
    edited = set(changed) & before_qids & after_qids
    common = sorted((before_qids & after_qids) - edited)
    if not common:
        raise BaselineError(
            f"ragev: the baseline and the current run share no question "
            f"(baseline has {len(before_qids)}, current {len(after_qids)}); "
            "re-baseline on this dataset with --ragev-update-baseline"
        )
    names = list(metrics) if metrics is not None else metric_order(current_run, baseline_run)
    if table is None or table.names != names:
        table = PairedTable(baseline_run, current_run, names, skip=edited)
    pairs = {name: table.pair(name) for name in names}
    # The family: metrics with data whose verdict can depend on the test.
    family = [
        name for name in names
        if pairs[name][0].size and rules.rule_for(name).enabled
        and rules.rule_for(name).mode != "tolerance"
    ]
    # [gate] slices: the family's metrics are tested over each slice too, as one family.
    # (A metric gated by tolerance alone is judged on each slice's change, untested.)
    groups = slice_groups(current_run, table.qids, rules)
    columns = len(family) * (1 + len(groups))
    corrected = rules.correction in ("holm", "maxt") and columns > 1
    # What each p-value is compared with: alpha, or down to alpha/m under Holm; the
    # resampling of each metric stops once its p-values are clearly on one side.
    holm_family = columns if corrected and rules.correction == "holm" else 1
    bands = {
        name: decision_band(rules.rule_for(name).significance,
                            holm_family if name in family else 1)
        for name in names
    }
    stats = paired_stats(
        pairs,
        alphas={name: rules.rule_for(name).significance for name in names},
        resamples=rules.resamples,
        seed=rules.seed,
        decide=bands,
    )
    directions = {name: metric_direction(name, current_run, baseline_run) for name in names}
    worse: dict[str, float] = {}
    better: dict[str, float] = {}
    tests: GroupTests | None = None
    if groups and family:
        import numpy as np

        tests = group_tests(
            table.differences(family), [mask for _, mask in groups],
            np.array([-1.0 if directions[n] == "higher" else 1.0 for n in family]), rules,
            [rules.rule_for(n).significance for n in family],
            overall_raw={n: (stats[n].p_worse(directions[n]), stats[n].p_better(directions[n]))
                         for n in family}, names=family)
        if corrected:
            worse = {name: float(tests.worse[0, k]) for k, name in enumerate(family)}
            better = {name: float(tests.better[0, k]) for k, name in enumerate(family)}
    elif corrected and rules.correction == "holm":
        worse = holm({n: stats[n].p_worse(directions[n]) for n in family})
        better = holm({n: stats[n].p_better(directions[n]) for n in family})
    elif corrected:
        import numpy as np

        diffs = table.differences(family)
        worse_sign = np.array([-1.0 if directions[n] == "higher" else 1.0 for n in family])
        alphas = [rules.rule_for(n).significance for n in family]
        band = (min(alphas), max(alphas))
        for signs, out in ((worse_sign, worse), (-worse_sign, better)):
            adjusted = maxt_columns(diffs * signs, resamples=rules.resamples, seed=rules.seed,
                                    decide=band)
            out.update({name: float(adjusted[column]) for column, name in enumerate(family)})
    items = [
        judge(
            name,
            stats.get(name),
            directions[name],
            rules.rule_for(name),
            variant=current_run.variant,
            p_worse=worse.get(name),
            p_better=better.get(name),
            family=columns if name in worse else 1,
            correction=rules.correction if name in worse else "none",
            slices=len(groups) if name in worse else 0,
        )
        for name in names
    ]
    keys = [key for key, _ in groups]
    return Comparison(
        metrics=items,
        common_qids=common,
        added=sorted(after_qids - before_qids),
        removed=sorted(before_qids - after_qids),
        variant=current_run.variant,
        changed=sorted(edited),
        slices=[
            _slice_comparison(key, keys, row, mask, table=table, names=names, family=family,
                              directions=directions, rules=rules, tests=tests,
                              variant=current_run.variant, corrected=corrected)
            for row, (key, mask) in enumerate(groups, start=1)
        ],
    )


def _slice_comparison(
    key: str, keys: Sequence[str], row: int, mask: npt.NDArray[np.bool_], *,
    table: PairedTable, names: Sequence[str], family: Sequence[str],
    directions: dict[str, Direction], rules: GateRules, tests: GroupTests | None,
    variant: str | None, corrected: bool,
) -> SliceComparison:
    """One slice's metrics judged with their rules, their p-values the family's (row
    ``row`` of ``tests``); the interval of a regressed one is bootstrapped, as the
    run's own are (only regressions print one)."""
    label = slice_label(key, keys)
    metrics: list[MetricComparison] = []
    redo: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], PairedStats,
                          dict[str, object]]] = {}
    for name in names:
        column = table.names.index(name)
        rows = mask & table.paired[:, column]
        before, after = table.before[rows, column], table.after[rows, column]
        rule = rules.rule_for(name)
        direction = directions[name]
        if not before.size:
            metrics.append(judge(name, None, direction, rule, variant=variant))
            continue
        k = family.index(name) if name in family and tests is not None else None
        t = tests if k is not None else None
        raw_worse = 1.0 if t is None or k is None else float(t.raw_worse[row, k])
        raw_better = 1.0 if t is None or k is None else float(t.raw_better[row, k])
        higher = direction == "higher"
        delta = float(after.mean() - before.mean())
        provisional = PairedStats(
            n=int(before.size), baseline_mean=float(before.mean()),
            current_mean=float(after.mean()), delta=delta, ci_low=delta, ci_high=delta,
            ci_level=1.0 - 2.0 * rule.significance,
            p_lower=raw_worse if higher else raw_better,
            p_higher=raw_better if higher else raw_worse,
            changed=int((after != before).sum()),
        )
        if not (after != before).any():
            provisional = replace(provisional, ci_low=0.0, ci_high=0.0, delta=0.0)
        options = dict(
            variant=variant,
            p_worse=None if t is None or k is None or not corrected else float(t.worse[row, k]),
            p_better=None if t is None or k is None or not corrected
            else float(t.better[row, k]),
            family=t.columns if t is not None and corrected else 1,
            correction=rules.correction if k is not None and corrected else "none",
            slices=t.worse.shape[0] - 1 if t is not None and corrected else 0,
        )
        item = judge(name, provisional, direction, rule, **options)  # type: ignore[arg-type]
        if item.status == "regressed":
            # Its printed interval is the bootstrap's, as for the run's own metrics:
            # drawn below for every regressed metric of the slice at once.
            redo[name] = (before, after, provisional, options)
        metrics.append(item)
    # A large slice's interval is the expansion's, as a large run's is (paired_stats).
    expanded = {name: expansion_interval(before, after, rules.rule_for(name).significance)
                for name, (before, after, _, _) in redo.items()
                if int((after != before).sum()) >= EXPANSION_FROM}
    if redo:
        drawn = {name: replace(provisional, ci_low=low, ci_high=high)
                 for name, (low, high) in expanded.items()
                 for provisional in (redo[name][2],)}
        drawn |= paired_stats(
            {name: (before, after) for name, (before, after, _, _) in redo.items()
             if name not in expanded},
            alphas={name: rules.rule_for(name).significance for name in redo},
            resamples=rules.resamples, seed=rules.seed,
            # Sized as the run's own: the resampling stops once the verdict is clear and
            # a large slice's interval comes from the expansion (see paired_stats).
            decide={name: decision_band(rules.rule_for(name).significance, 1)
                    for name in redo})
        for index, item in enumerate(metrics):
            if item.metric in redo and item.metric in drawn:
                _, _, provisional, options = redo[item.metric]
                interval = drawn[item.metric]
                metrics[index] = judge(
                    item.metric, replace(provisional, ci_low=interval.ci_low,
                                         ci_high=interval.ci_high),
                    directions[item.metric], rules.rule_for(item.metric),
                    **options)  # type: ignore[arg-type]
    for index, item in enumerate(metrics):
        if item.reason is not None:
            item = replace(item, reason=item.reason.replace("ragev: ", f"ragev: {label}: ", 1))
        if item.metric not in family:
            item = replace(item, p=None, p_raw=None)
        metrics[index] = item
    return SliceComparison(key=key, label=label, n=int(mask.sum()), metrics=metrics)


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
    slices: int = 0,
) -> MetricComparison:
    """Apply ``rule`` to the paired statistics of one metric.

    ``p_worse``/``p_better`` replace the one-sided p-values of ``stats`` when a
    multiple-comparison correction adjusted them over ``family`` tests (the metrics, or
    with ``slices`` slices the metrics over the run and over each slice).
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
            f"ragev: {fmt.label(metric, variant)} {fmt.num(stats.current_mean)} {sign} baseline "
            f"{fmt.num(stats.baseline_mean)} (Δ {fmt.num(stats.delta, signed=True)}, "
            f"{fmt.level(stats.ci_level)} CI [{fmt.num(stats.ci_low)}, {fmt.num(stats.ci_high)}], "
            f"{fmt.p_text(p)}{correction_text(correction, family, slices)}, n={stats.n})"
        )
    return MetricComparison(
        metric=metric, direction=direction, baseline_mean=stats.baseline_mean,
        current_mean=stats.current_mean, delta=stats.delta, ci_low=stats.ci_low,
        ci_high=stats.ci_high, ci_level=stats.ci_level, p=p, n=stats.n, status=status,
        reason=reason, rule=rule, p_raw=raw, family=family, correction=correction,
        slices=slices,
    )


def questions_for_drop(n: int, drop: float) -> int:
    """The fewest questions that can carry a drop of ``drop`` in a mean over ``n``.

    Metrics lie in [0, 1], so one question can move a mean by at most ``1/n``: a drop of
    ``drop`` needs at least ``ceil(n * drop)`` questions (at least one, at most ``n``).
    """
    # n * drop is computed in floating point: 20 * 0.05 must give 1, not 2.
    return min(n, max(1, math.ceil(n * drop - 1e-9)))


def power_lines(
    comparisons: Sequence[Comparison], rules: GateRules, *, answers: int = 1
) -> list[str]:
    """Warnings, said once, when the paired test cannot flag a drop of the size that matters.

    The size is ``[gate] min_detectable_drop`` (or a metric's tolerance when larger:
    smaller drops never fail it). Such a drop may be carried by as few as
    :func:`questions_for_drop` questions losing their whole score (a retrieval metric
    whose relevant passage stopped being found); the sign-flip test's p-value for it
    cannot go below :func:`~pytest_ragev.gate.stats.smallest_p` of that many questions,
    times the family size under Holm's correction (max-T never adjusts p below the raw
    value). When that floor is not below the metric's ``significance``, a mode
    ``"significant"`` gate cannot fail on that drop however clear it is. Only metrics
    whose verdict needs the test (enabled, mode ``significant``) are considered.
    ``answers`` is how many answers each question's values are the mean of
    (``--ragev-repeat``): more answers shrink the noise, not this bound, which is said.
    """
    if rules.min_detectable_drop <= 0:
        return []
    gated: set[str] = set()
    # (drop, alpha, holm family) -> (largest blind n, the metrics it concerns)
    blind: dict[tuple[float, float, int], tuple[int, list[str]]] = {}
    for comparison in comparisons:
        for item in comparison.metrics:
            rule = item.rule
            if not rule.enabled or rule.mode != "significant" or item.baseline_mean is None:
                continue
            gated.add(item.metric)
            drop = max(rules.min_detectable_drop, rule.tolerance(item.baseline_mean))
            if drop > 1.0:
                continue  # a tolerance beyond the metric's range: nothing can fail it
            factor = item.family if item.correction == "holm" else 1
            k = questions_for_drop(item.n, drop)
            if min(1.0, factor * smallest_p(k, rules.resamples)) < rule.significance:
                continue
            key = (round(drop, 6), rule.significance, factor)
            n, names = blind.get(key, (0, []))
            if item.metric not in names:
                names.append(item.metric)
            blind[key] = (max(n, item.n), names)
    lines = []
    for (drop, alpha, factor), (n, names) in blind.items():
        k = questions_for_drop(n, drop)
        floor = min(1.0, factor * smallest_p(k, rules.resamples))
        holm_text = f" (Holm, {factor} metrics)" if factor > 1 else ""
        which = "" if set(names) == gated else f" for {', '.join(names)}"
        carried = (f"{k} questions losing their whole score" if k > 1
                   else "1 question losing its whole score")
        each = f" (R={answers} answers each)" if answers > 1 else ""
        lines.append(
            f"ragev: warning: n={n}{each} cannot detect a {drop:g} drop at alpha {alpha:g}"
            f"{holm_text}{which} (such a drop can be {carried}, whose paired p-value cannot "
            f"go below {floor:.2g}); consider mode = \"tolerance\" for a deterministic or "
            "cached pipeline, or more questions"
        )
    return lines


def correction_text(correction: str, family: int, slices: int = 0) -> str:
    """`` (max-T, 12 metrics)``, `` (max-T, 132 tests: 12 metrics x 10 slices and the
    run)``; nothing without a correction."""
    if family <= 1 or correction == "none":
        return ""
    name = CORRECTION_NAMES.get(correction, correction)
    if slices:
        metrics = family // (slices + 1)
        return f" ({name}, {family} tests: {metrics} metrics x {slices} slices and the run)"
    return f" ({name}, {family} metrics)"
