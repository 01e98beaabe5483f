"""The slice gate's family resampled at once (``gate.family.grouped_maxt``): both
directions from one set of flips, each column stopping once its verdict is clear, and
the verdicts of the full resampling kept (issue #31)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_ragev.gate.family import GroupedPValues, grouped_maxt
from pytest_ragev.gate.stats import FIRST_LOOK, maxt_columns

ALPHA = 0.05


def _family(seed: int, *, n: int = 900, metrics: int = 3,
            drop: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Signed differences (positive: worse) of ``n`` questions, and the groups: the run,
    three languages and four tags (a question has one or two). The questions of the tag
    ``drop`` is given to are worse by ``drop`` on every metric, which puts that tag's,
    its overlapping slices' and the run's columns at every distance from alpha."""
    rng = np.random.default_rng(seed)
    qid = np.arange(n)
    langs = [qid % 3 == k for k in range(3)]
    tags = [(qid % 4 == k) | ((qid % 5 == 0) & ((qid // 4) % 4 == k)) for k in range(4)]
    groups = np.vstack([np.ones(n, dtype=bool), *langs, *tags])
    matrix = rng.normal(0.0, 0.2, size=(n, metrics))
    matrix[tags[1]] += drop
    matrix[rng.random(n) < 0.2] = 0.0  # questions answered alike
    return matrix, groups


def _cases() -> list[tuple[int, float, int]]:
    """Seeded families: 900 questions (their flips summed per cell) and 150 (too many
    cells for so few questions: per group)."""
    return [*((seed, drop, 900) for seed in range(6) for drop in (0.0, 0.02, 0.04, 0.07)),
            *((seed, drop, 150) for seed in range(3) for drop in (0.05, 0.1))]


@pytest.mark.parametrize("step_down", [True, False])
def test_decisions_equal_the_full_resampling_on_seeded_cases(step_down: bool) -> None:
    stopped_early = kept_open = 0
    for seed, drop, n in _cases():
        matrix, groups = _family(seed, n=n, drop=drop)
        full = grouped_maxt(matrix, groups, resamples=6000, seed=seed, step_down=step_down)
        early = grouped_maxt(matrix, groups, resamples=6000, seed=seed, step_down=step_down,
                             decide=(ALPHA, ALPHA))
        for name in ("worse", "better"):
            exact, sized = getattr(full, name), getattr(early, name)
            flips = getattr(early, f"drawn_{name}")
            assert np.array_equal(exact < ALPHA, sized < ALPHA), (seed, drop, name)
            # A column open to the end was counted as the full resampling counts it:
            # its p-value is the same, or both are below alpha (a rank above it that
            # stopped early holds the maximum).
            still = flips == 6000
            same = (exact[still] == sized[still]) | ((exact[still] < ALPHA)
                                                     & (sized[still] < ALPHA))
            assert same.all(), (seed, drop, name)
            assert np.array_equal(getattr(full, f"raw_{name}")[still],
                                  getattr(early, f"raw_{name}")[still])
            # A column stopped early stopped at a look: 1,000, 2,000 or 4,000 flips.
            assert set(flips[~still].tolist()) <= {FIRST_LOOK, 2 * FIRST_LOOK, 4 * FIRST_LOOK}
            stopped_early += int((~still).sum())
            kept_open += int(still.sum())
        assert (full.drawn_worse == 6000).all()
    # The cases exercise both: columns decided early and columns near alpha.
    assert stopped_early > 0 and kept_open > 0


def test_both_directions_come_from_the_same_flips() -> None:
    """The "better" direction of a matrix is the "worse" direction of its negation."""
    matrix, groups = _family(3, drop=0.03)
    once = grouped_maxt(matrix, groups, resamples=3000, seed=7)
    flipped = grouped_maxt(-matrix, groups, resamples=3000, seed=7)
    assert np.array_equal(once.better, flipped.worse)
    assert np.array_equal(once.raw_worse, flipped.raw_better)


def test_the_same_seed_gives_the_same_p_values_and_another_seed_others() -> None:
    matrix, groups = _family(1, drop=0.03)
    first = grouped_maxt(matrix, groups, resamples=3000, seed=2, decide=(ALPHA, ALPHA))
    again = grouped_maxt(matrix, groups, resamples=3000, seed=2, decide=(ALPHA, ALPHA))
    other = grouped_maxt(matrix, groups, resamples=3000, seed=3, decide=(ALPHA, ALPHA))
    for name in ("worse", "better", "raw_worse", "raw_better", "drawn_worse"):
        assert np.array_equal(getattr(first, name), getattr(again, name))
    assert not np.array_equal(first.raw_worse, other.raw_worse)


def test_an_unchanged_family_stops_at_the_first_look() -> None:
    """Nothing near alpha: every column of both directions decided after 1,000 flips."""
    matrix, groups = _family(0)
    # Every question better on every metric: no column is near alpha in either direction.
    result = grouped_maxt(-np.abs(matrix), groups, resamples=10_000, seed=0,
                          decide=(ALPHA, ALPHA))
    assert (result.drawn_worse == FIRST_LOOK).all()
    assert (result.drawn_better == FIRST_LOOK).all()
    assert (result.worse > ALPHA).all() and (result.better < ALPHA).all()


def test_the_step_down_adjusted_p_values_are_monotone_and_above_the_raw_ones() -> None:
    matrix, groups = _family(4, drop=0.04)
    result = grouped_maxt(matrix, groups, resamples=4000, seed=1, decide=(ALPHA, ALPHA))
    assert isinstance(result, GroupedPValues)
    for adjusted, raw in ((result.worse, result.raw_worse),
                          (result.better, result.raw_better)):
        assert np.all(raw <= adjusted + 1e-12)
    # Ranked by the observed statistic, the adjusted p-values never decrease.
    stats = np.stack([(matrix[g].sum(axis=0) / np.sqrt((matrix[g] ** 2).sum(axis=0)))
                      for g in groups])
    ranked = result.worse.ravel()[np.argsort(-stats.ravel(), kind="stable")]
    assert np.all(np.diff(ranked) >= 0)


def test_few_questions_are_enumerated_exactly() -> None:
    matrix = np.array([[0.3], [0.2], [0.25], [-0.05], [0.1]])
    result = grouped_maxt(matrix, np.ones((1, 5), dtype=bool), resamples=8000, seed=0)
    assert result.worse[0, 0] == pytest.approx(2 / 32)
    assert result.better[0, 0] == pytest.approx(31 / 32)


def test_the_grouped_max_t_of_the_whole_run_alone_is_the_metrics_max_t() -> None:
    rng = np.random.default_rng(4)
    matrix = rng.normal(0.05, 1.0, size=(80, 4))
    result = grouped_maxt(matrix, np.ones((1, 80), dtype=bool), resamples=4000, seed=1)
    alone = maxt_columns(matrix, resamples=4000, seed=1)
    # Other random streams: the same p-values up to resampling error.
    assert result.worse[0] == pytest.approx(alone, abs=0.03)
    assert np.all(result.raw_worse[0] <= result.worse[0] + 1e-12)
