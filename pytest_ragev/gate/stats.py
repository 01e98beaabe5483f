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
* The work is sized to what the verdict needs. A metric whose paired differences are
  all zero is decided without resampling (p = 1, interval [0, 0]); when the ``k``
  changed questions have no more than ``resamples`` sign assignments (``2**k``), all
  of them are enumerated and the p-value is exact; questions whose
  difference is zero take no part in the resampling (a sign flip does not move them,
  and a bootstrap draws them only as zeros) when they are at least half of them, so a
  rerun in which a few questions changed costs what those questions cost. Given the
  thresholds a p-value will be compared with (``decide``), resampling stops once the
  p-value lies clearly on one side of all of them, looked at after 1,000, 2,000,
  4,000 ... resamples (a Wilson bound at z = 5: a stop the full resampling would
  contradict is rarer than one in a million per look), and the bootstrap draws as
  many resamples as keep the Monte-Carlo error of each interval bound under a quarter
  of its printed digit.

numpy is imported inside the functions that need it, so importing this module stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING

from pytest_ragev.core.results import Direction
from pytest_ragev.gate.blas import one_blas_thread

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


#: Sign flips (and bootstrap draws) when ``[gate] resamples`` does not say.
DEFAULT_RESAMPLES = 10_000
# Resamples are drawn in blocks of this many rows: bounds memory (block x n floats) and
# keeps the random stream identical whatever the number of metrics compared together.
_BLOCK = 2_000
#: The most resamples x questions one block of flips holds (about 32 MB of floats).
BLOCK_CELLS = 4_000_000
#: Resamples drawn before a p-value is first looked at; each later look doubles them.
FIRST_LOOK = 1_000
#: The z of the Wilson bound an early stop is taken on.
_SURE = 5.0
#: The resolution intervals are printed at (``fmt.num``: three decimals).
_PRINTED = 1e-3
#: The fewest bootstrap resamples an interval is drawn from.
_MIN_BOOTSTRAP = 1_000
#: Beyond resamples x changed questions this large the interval is expanded, not drawn.
_BOOT_CELLS = 20_000_000

#: The thresholds a metric's p-values will be compared with: ``(lowest, highest)``.
Band = tuple[float, float]


@dataclass(frozen=True)
class PairedStats:
    """A paired comparison of one metric over ``n`` shared questions.

    ``delta = current_mean - baseline_mean`` (raw, not direction-adjusted);
    ``ci_low``/``ci_high`` bound ``delta`` at ``ci_level``; ``p_lower`` is the one-sided
    p-value for "the current run is lower", ``p_higher`` for "higher". ``changed``
    counts the questions whose difference is not zero, ``resamples`` the sign flips
    the p-values were estimated from (``0``: decided without resampling).
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
    changed: int = 0
    resamples: int = 0

    def p_worse(self, direction: Direction) -> float:
        """The one-sided p-value of a change in the worse direction."""
        return self.p_lower if direction == "higher" else self.p_higher

    def p_better(self, direction: Direction) -> float:
        """The one-sided p-value of a change in the better direction."""
        return self.p_higher if direction == "higher" else self.p_lower


def decision_band(alpha: float, family: int = 1, *, two_sided: bool = False) -> Band:
    """The thresholds a metric's one-sided p-values meet: ``alpha`` itself, and with
    Holm's correction over ``family`` metrics down to ``alpha / family``; a two-sided
    marker compares each one-sided p with ``alpha / 2``."""
    high = alpha / 2 if two_sided else alpha
    return (high / max(family, 1), high)


@one_blas_thread
def paired_stats(
    pairs: Mapping[str, tuple[Sequence[float] | npt.NDArray[np.float64],
                              Sequence[float] | npt.NDArray[np.float64]]],
    *,
    alphas: Mapping[str, float] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    decide: Mapping[str, Band] | None = None,
) -> dict[str, PairedStats]:
    """Paired permutation p-values and bootstrap intervals for several metrics at once.

    ``pairs`` maps a metric name to its (baseline, current) per-question values, aligned
    by question. Metrics with the same number of questions and of changed questions
    share one matrix product, so 12 metrics x 400 questions x 10,000 resamples take a
    fraction of a second. ``alphas`` sets each metric's significance (default 0.05;
    interval at 1 - 2*alpha). ``decide`` gives, per metric, the range of thresholds its
    p-values will be compared with (:func:`decision_band`): its resampling then stops
    as soon as the verdict is clear and its bootstrap is sized to the printed
    precision; metrics without a band get ``resamples`` of each.
    """
    import numpy as np

    groups: dict[tuple[int, int], list[str]] = {}
    changed: dict[str, npt.NDArray[np.float64]] = {}
    info: dict[str, tuple[int, float, float, float, float]] = {}
    results: dict[str, PairedStats] = {}
    for name, (before, after) in pairs.items():
        old = np.asarray(before, dtype=np.float64)
        new = np.asarray(after, dtype=np.float64)
        if old.shape != new.shape or old.ndim != 1:
            raise ValueError(f"{name}: baseline and current values must be aligned 1-d sequences")
        if old.size == 0:
            continue
        diff = new - old
        n = int(old.size)
        alpha = (alphas or {}).get(name, 0.05)
        # Zero differences never move under a sign flip: only the others are resampled.
        moved = diff[diff != 0]
        info[name] = (n, float(old.mean()), float(new.mean()), float(diff.mean()), alpha)
        if moved.size == 0:
            # Identical paired scores: every flip and every bootstrap mean is 0.
            results[name] = PairedStats(
                n=n, baseline_mean=info[name][1], current_mean=info[name][2], delta=0.0,
                ci_low=0.0, ci_high=0.0, ci_level=1.0 - 2.0 * alpha, p_lower=1.0,
                p_higher=1.0,
            )
            continue
        # Compacted when at most half the questions changed; otherwise every question
        # takes part (zeros add nothing) and metrics of the same size share one draw.
        compact = 2 * moved.size <= n
        changed[name] = moved if compact else diff
        groups.setdefault((n, int(moved.size) if compact else n), []).append(name)

    for (n, k), names in groups.items():
        matrix = np.stack([changed[name] for name in names], axis=1)  # k x metrics
        bands = [None if decide is None else decide.get(name) for name in names]
        boots_wanted = [
            resamples if band is None else _bootstrap_size(matrix[:, c], n, info[name][4],
                                                           resamples)
            for c, (name, band) in enumerate(zip(names, bands, strict=True))
        ]
        # Past a few tens of millions of cells the drawn bootstrap costs seconds while
        # its distribution is, by then, its two-term expansion to well within the
        # printed digit: the expansion is used instead.
        expanded = [band is not None and wanted * k > _BOOT_CELLS
                    for band, wanted in zip(bands, boots_wanted, strict=True)]
        counts = _resample(matrix, n=n, resamples=resamples, seed=seed, bands=bands,
                           boots_wanted=[0 if e else b
                                         for e, b in zip(expanded, boots_wanted, strict=True)])
        for column, name in enumerate(names):
            below, above, drawn, boots = counts[column]
            _, before_mean, after_mean, delta, alpha = info[name]
            if expanded[column]:
                low, high = _expansion(matrix[:, column], n, alpha)
            else:
                low, high = np.quantile(boots, [alpha, 1.0 - alpha])
            results[name] = PairedStats(
                n=n,
                baseline_mean=before_mean,
                current_mean=after_mean,
                delta=delta,
                ci_low=float(low),
                ci_high=float(high),
                ci_level=1.0 - 2.0 * alpha,
                p_lower=(1.0 + below) / (drawn + 1.0),
                p_higher=(1.0 + above) / (drawn + 1.0),
                changed=int(np.count_nonzero(matrix[:, column])),
                resamples=drawn,
            )
    return {name: results[name] for name in pairs if name in results}


def _block(k: int) -> int:
    # Blocks shrink for large matrices so one block stays around 4 million cells; the
    # block size depends on the data's size only, so the random streams stay reproducible.
    return max(1, min(_BLOCK, BLOCK_CELLS // max(k, 1)))


def _bootstrap_size(moved: npt.NDArray[np.float64], n: int, alpha: float, resamples: int) -> int:
    """Bootstrap resamples that keep each interval bound's Monte-Carlo error under a
    quarter of the printed digit, between ``_MIN_BOOTSTRAP`` and ``resamples``.

    The bootstrap mean is close to normal with the standard error ``se`` of the mean
    difference; the alpha-quantile of B draws then has a standard deviation of about
    ``sqrt(alpha (1 - alpha)) / phi(z_alpha) * se / sqrt(B)``. The count is rounded up
    to whole blocks, so a metric's draws never depend on another metric's count.
    """
    total = float(moved.sum())
    spread = float((moved * moved).sum()) / n - (total / n) ** 2
    se = math.sqrt(max(spread, 0.0) / n)
    normal = NormalDist()
    factor = math.sqrt(alpha * (1 - alpha)) / normal.pdf(normal.inv_cdf(1 - alpha))
    wanted = math.ceil((factor * se / (_PRINTED / 4)) ** 2)
    block = _block(int(moved.size))
    wanted = math.ceil(max(wanted, _MIN_BOOTSTRAP) / block) * block
    return min(resamples, wanted)


#: From this many changed questions on, a slice's interval is the expansion's
#: (:func:`expansion_interval`): closer to the bootstrap's own distribution than its
#: draws, at no cost.
EXPANSION_FROM = 1000


def expansion_interval(
    before: npt.NDArray[np.float64], after: npt.NDArray[np.float64], alpha: float
) -> tuple[float, float]:
    """The bootstrap interval of the mean paired difference at ``1 - 2 alpha``, by its
    Cornish–Fisher expansion (see :func:`_expansion`), for many changed questions."""
    diff = after - before
    return _expansion(diff[diff != 0], int(diff.size), alpha)


def _expansion(moved: npt.NDArray[np.float64], n: int, alpha: float) -> tuple[float, float]:
    """The ``alpha`` and ``1 - alpha`` quantiles of the bootstrap distribution of the
    mean of ``n`` differences (``moved`` holds the non-zero ones), by its Cornish–Fisher
    expansion: the normal quantile corrected for the skewness of the mean.

    The bootstrap mean of ``n`` draws has the sample's mean, standard deviation
    ``sd / sqrt(n)`` and skewness ``g / sqrt(n)``; its quantile is then
    ``mean + se * (z + g / (6 sqrt(n)) * (z**2 - 1))`` up to terms of order ``1 / n``.
    With thousands of changed questions that is closer to the bootstrap distribution
    than ten thousand draws are (benchmarks/bench_gate.py --only sizing).
    """
    s1 = float(moved.sum())
    s2 = float((moved * moved).sum())
    s3 = float((moved * moved * moved).sum())
    mean = s1 / n
    variance = max(s2 / n - mean * mean, 0.0)
    if variance == 0.0:
        return mean, mean
    third = s3 / n - 3.0 * mean * s2 / n + 2.0 * mean**3
    skew = third / variance**1.5
    se = math.sqrt(variance / n)
    normal = NormalDist()
    bounds = []
    for level in (alpha, 1.0 - alpha):
        z = normal.inv_cdf(level)
        bounds.append(mean + se * (z + skew / (6.0 * math.sqrt(n)) * (z * z - 1.0)))
    return bounds[0], bounds[1]


def wilson(count: float, drawn: int) -> tuple[float, float]:
    """A Wilson interval at z = ``_SURE`` for a tail probability seen ``count`` times in
    ``drawn`` resamples."""
    z2 = _SURE * _SURE
    centre = (count + z2 / 2) / (drawn + z2)
    half = _SURE * math.sqrt(count * (drawn - count) / drawn + z2 / 4) / (drawn + z2)
    return centre - half, centre + half


def _clear(count: float, drawn: int, band: Band) -> bool:
    """Whether a tail probability is clearly below every threshold of ``band`` or
    clearly above all of them."""
    low, high = wilson(count, drawn)
    return high < band[0] or low > band[1]


def _resample(
    matrix: npt.NDArray[np.float64],
    *,
    n: int,
    resamples: int,
    seed: int,
    bands: Sequence[Band | None],
    boots_wanted: Sequence[int],
) -> list[tuple[float, float, int, npt.NDArray[np.float64]]]:
    """Sign-flip tail counts and bootstrap means for each column of ``matrix``.

    ``matrix`` holds each metric's ``k`` non-zero differences (of ``n``), in question
    order. Returns, per column, the counts of flipped sums at or below and at or above
    the observed one, the flips they were counted over and the bootstrap means.
    """
    import numpy as np

    k, width = matrix.shape
    totals = matrix.sum(axis=0)
    # Permuted sums equal to the observed one (ties) must count as "at least as
    # extreme"; float sums in another order differ in the last bits.
    slack = 1e-9 * np.maximum(float(n), np.abs(matrix).sum(axis=0))
    at_or_below = np.zeros(width)
    at_or_above = np.zeros(width)
    stopped = [0] * width  # the flips a column's p-values were counted over (0: open)
    boot_total = max(boots_wanted)
    boots = np.empty((boot_total, width))
    # Two streams: the p-values (the verdict) never depend on how the bootstrap draws.
    sign_rng = np.random.default_rng([seed, n, 0])
    boot_rng = np.random.default_rng([seed, n, 1])
    block = _block(k)
    look = FIRST_LOOK
    drawn = 0
    if 2**k <= resamples:
        # Few changed questions: every one of the 2**k sign assignments, in fewer steps
        # than the resamples, and the p-value is exact. The identity assignment is the
        # observed one the "+1" of the Monte-Carlo formula counts, so the counts are
        # taken over the other 2**k - 1 and the usual formula gives the exact p.
        flipped = 2.0 * (all_signs(k) @ matrix) - totals
        at_or_below = (flipped <= totals + slack).sum(axis=0).astype(np.float64) - 1.0
        at_or_above = (flipped >= totals - slack).sum(axis=0).astype(np.float64) - 1.0
        stopped = [2**k - 1] * width
    while drawn < resamples and (not all(stopped) or drawn < boot_total):
        size = min(block, resamples - drawn)
        if not all(stopped):
            # One random bit per question and resample (unpacked bytes: ten times faster
            # than drawing integers); flipping signs maps a sum s to 2 * bits @ d - s.
            raw = np.frombuffer(sign_rng.bytes((size * k + 7) // 8), dtype=np.uint8)
            bits = np.unpackbits(raw, count=size * k).reshape(size, k).astype(np.float64)
            flipped = 2.0 * (bits @ matrix) - totals
            open_columns = np.array([s == 0 for s in stopped])
            at_or_below += np.where(open_columns, (flipped <= totals + slack).sum(axis=0), 0)
            at_or_above += np.where(open_columns, (flipped >= totals - slack).sum(axis=0), 0)
        if drawn < boot_total:
            boots[drawn:drawn + size] = _bootstrap_block(boot_rng, matrix, n, size) / n
        drawn += size
        if drawn >= look and not all(stopped):
            look *= 2
            for column, band in enumerate(bands):
                if stopped[column] or band is None:
                    continue
                if (_clear(at_or_below[column], drawn, band)
                        and _clear(at_or_above[column], drawn, band)):
                    stopped[column] = drawn
    return [
        (float(at_or_below[c]), float(at_or_above[c]), stopped[c] or drawn,
         boots[:boots_wanted[c], c])
        for c in range(width)
    ]


def all_signs(k: int) -> npt.NDArray[np.float64]:
    """Every assignment of ``k`` signs as 0/1 rows (``2**k`` x ``k``)."""
    import numpy as np

    rows = np.arange(2**k, dtype=np.int64)[:, None] >> np.arange(k, dtype=np.int64)
    result: npt.NDArray[np.float64] = (rows & 1).astype(np.float64)
    return result


def _bootstrap_block(
    rng: np.random.Generator, matrix: npt.NDArray[np.float64], n: int, size: int
) -> npt.NDArray[np.float64]:
    """``size`` bootstrap sums of the columns of ``matrix`` (the ``k`` non-zero
    differences of ``n``).

    A bootstrap resample draws ``n`` questions with replacement; the zero ones add
    nothing, so only how often each non-zero one is drawn matters: ``T`` of the ``n``
    draws land among the ``k`` (binomial), spread uniformly over them. With ``k == n``
    this is the plain draw of ``n`` questions. Counts as a matrix, so the sums are one
    matrix product instead of a gather per metric.
    """
    import numpy as np

    k = matrix.shape[0]
    landed = np.full(size, n, dtype=np.int64) if k == n else rng.binomial(n, k / n, size=size)
    # int32 draws are about three times cheaper than int64 ones; k fits easily.
    picks = rng.integers(0, k, size=int(landed.sum()), dtype=np.int32).astype(np.int64)
    picks += np.repeat(np.arange(size, dtype=np.int64) * k, landed)
    counts = np.bincount(picks, minlength=size * k).reshape(size, k)
    result: npt.NDArray[np.float64] = counts.astype(np.float64) @ matrix
    return result


def smallest_p(k: int, resamples: int = DEFAULT_RESAMPLES) -> float:
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
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    decide: Band | None = None,
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
    A metric whose differences are all zero gets 1.0. ``decide`` (the lowest and
    highest significance the adjusted p-values meet) stops the resampling once every
    adjusted p lies clearly on one side of them.
    """
    import numpy as np

    names = [n for n in diffs if any(v != 0 for v in diffs[n].values())]
    if not names:
        return {n: 1.0 for n in diffs}
    qids = sorted({q for n in names for q in diffs[n]})
    row = {q: i for i, q in enumerate(qids)}
    matrix = np.zeros((len(qids), len(names)))
    for column, name in enumerate(names):
        for qid, value in diffs[name].items():
            matrix[row[qid], column] = signs[name] * value
    adjusted = maxt_columns(matrix, resamples=resamples, seed=seed, decide=decide)
    out = {n: 1.0 for n in diffs}
    out.update({name: float(adjusted[column]) for column, name in enumerate(names)})
    return out


@one_blas_thread
def maxt_columns(
    matrix: npt.NDArray[np.float64], *, resamples: int, seed: int, decide: Band | None = None
) -> npt.NDArray[np.float64]:
    """:func:`step_down_maxt` on a questions x metrics matrix of signed differences
    (a positive value is the direction tested); columns of zeros get 1.0.

    Questions whose differences are all zero take no part (a sign flip does not move
    them); the generator is seeded from ``(seed, questions that take part)``.
    """
    import numpy as np

    width = matrix.shape[1]
    adjusted = np.ones(width)
    live = np.flatnonzero(np.any(matrix != 0, axis=0))
    if live.size == 0:
        return adjusted
    data = matrix[:, live]
    data = data[np.any(data != 0, axis=1)]
    scale = np.sqrt((data**2).sum(axis=0))
    data = data / scale  # flipped sums are now on one scale
    totals = data.sum(axis=0)
    order = np.argsort(-totals, kind="stable")  # most extreme first
    observed = totals[order]
    slack = 1e-9 * max(1.0, float(np.abs(data).sum(axis=0).max()))
    n = data.shape[0]
    rng = np.random.default_rng([seed, n, 2])
    block = _block(n)
    reached = np.zeros(live.size)
    look = FIRST_LOOK
    drawn = 0
    if 2**n <= resamples:
        # Every sign assignment (see _resample): the exact adjusted p-values.
        flipped = (2.0 * (all_signs(n) @ data) - totals)[:, order]
        running = np.maximum.accumulate(flipped[:, ::-1], axis=1)[:, ::-1]
        exact = (running >= observed - slack).sum(axis=0) / float(2**n)
        adjusted[live[order]] = np.maximum.accumulate(exact)
        return adjusted
    while drawn < resamples:
        size = min(block, resamples - drawn)
        raw = np.frombuffer(rng.bytes((size * n + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(raw, count=size * n).reshape(size, n).astype(np.float64)
        flipped = (2.0 * (bits @ data) - totals)[:, order]
        # running[:, k]: the maximum over the metrics from the k-th most extreme on.
        running = np.maximum.accumulate(flipped[:, ::-1], axis=1)[:, ::-1]
        reached += (running >= observed - slack).sum(axis=0)
        drawn += size
        if decide is not None and drawn >= look and drawn < resamples:
            look *= 2
            bounds = [wilson(float(count), drawn) for count in reached]
            lows = np.maximum.accumulate([low for low, _ in bounds])
            highs = np.maximum.accumulate([high for _, high in bounds])
            if all(h < decide[0] or lo > decide[1] for lo, h in zip(lows, highs, strict=True)):
                break
    p = np.maximum.accumulate((1.0 + reached) / (drawn + 1.0))
    adjusted[live[order]] = p
    return adjusted
