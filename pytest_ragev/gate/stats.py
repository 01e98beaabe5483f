"""The gate's statistics: paired sign-flip tests, bootstrap intervals, p-value corrections.

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

numpy is imported inside the functions that need it, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_ragev.core.results import Direction

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


_DEFAULT_RESAMPLES = 10_000
# Resamples are drawn in blocks of this many rows: bounds memory (block x n floats) and
# keeps the random stream identical whatever the number of metrics compared together.
_BLOCK = 2_000
_BLOCK_CELLS = 4_000_000




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


def smallest_p(k: int, resamples: int = _DEFAULT_RESAMPLES) -> float:
    """The smallest one-sided p-value the sign-flip test can return when ``k`` of the
    paired differences are not zero.

    Zero differences do not move under a sign flip, so only the ``k`` others count: of
    their ``2**k`` equally likely sign assignments, the observed one is at least as
    extreme as itself, so the exact p-value is at least ``2**-k`` (reached when all
    ``k`` point the same way). The Monte-Carlo p-value counts the observed assignment
    too, so it never goes below ``1 / (resamples + 1)`` either. No simulation needed.
    """
    return max(2.0 ** -max(k, 0), 1.0 / (resamples + 1.0))


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
