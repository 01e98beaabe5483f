"""The slice gate's family resampled at once: the step-down max-T over every metric of
the whole run and of each slice, both directions, from one set of sign flips, each
column stopping as soon as its verdict is clear (:func:`grouped_maxt`).

numpy is imported inside the functions that need it, so importing this module stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_ragev.gate.blas import one_blas_thread
from pytest_ragev.gate.stats import (
    BLOCK_CELLS,
    DEFAULT_RESAMPLES,
    FIRST_LOOK,
    Band,
    all_signs,
    wilson,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


#: Above this many distinct memberships per question (cells), or above ``_MAX_CELLS``
#: of them, the flipped sums of each group are one product each instead of being added
#: up from the cells' products (each cell is a product, and a call, per block).
_MAX_CELLS_SHARE = 8
_MAX_CELLS = 512


@dataclass(frozen=True)
class GroupedPValues:
    """The p-values of :func:`grouped_maxt`, groups x metrics each (1.0 for a column
    without a difference): ``worse``/``better`` adjusted over every column (step-down
    max-T; with ``step_down=False`` each column's own), ``raw_worse``/``raw_better``
    each column's own; ``drawn_worse``/``drawn_better`` the sign flips each column was
    counted over (a column decided early stops counting; 0: not resampled)."""

    worse: npt.NDArray[np.float64]
    better: npt.NDArray[np.float64]
    raw_worse: npt.NDArray[np.float64]
    raw_better: npt.NDArray[np.float64]
    drawn_worse: npt.NDArray[np.int64]
    drawn_better: npt.NDArray[np.int64]


class _Direction:
    """One direction's running counts in :func:`grouped_maxt`: its columns by rank
    (most extreme first), the flips whose suffix maximum reached each (``reached``) and
    whose own statistic did (``own``), and when each column stopped (0: open)."""

    def __init__(self, observed: npt.NDArray[np.float64], step_down: bool) -> None:
        import numpy as np

        self.order: npt.NDArray[np.int64] = np.argsort(-observed, kind="stable")
        self.observed = observed[self.order]
        self.step_down = step_down
        size = observed.size
        self.reached = np.zeros(size)
        self.own = np.zeros(size)
        self.stopped = np.zeros(size, dtype=np.int64)

    def first_open(self) -> int | None:
        """The rank of the most extreme column still counting, if any."""
        import numpy as np

        open_ranks = np.flatnonzero(self.stopped == 0)
        return int(open_ranks[0]) if open_ranks.size else None

    def needed(self) -> npt.NDArray[np.int64]:
        """The live columns the open ones read: with the step-down, every column from
        the first open rank on (its suffix maxima); else the open columns alone."""
        import numpy as np

        first = self.first_open()
        if first is None:
            return np.empty(0, dtype=np.int64)
        if self.step_down:
            return self.order[first:]
        still: npt.NDArray[np.int64] = self.order[self.stopped == 0]
        return still

    def count(self, flipped: npt.NDArray[np.float64], slack: float) -> None:
        """Add a block of flipped statistics (resamples x live columns, this direction's
        sign) to the open columns' counts."""
        import numpy as np

        first = self.first_open()
        if first is None:
            return
        tail = flipped[:, self.order[first:]]
        bar = self.observed[first:] - slack
        open_ = self.stopped[first:] == 0
        own = (tail >= bar).sum(axis=0)
        self.own[first:] += np.where(open_, own, 0)
        if self.step_down:
            running = np.maximum.accumulate(tail[:, ::-1], axis=1)[:, ::-1]
            self.reached[first:] += np.where(open_, (running >= bar).sum(axis=0), 0)
        else:
            self.reached[first:] += np.where(open_, own, 0)

    def look(self, drawn: int, band: Band) -> None:
        """Stop every column whose verdict is clear at ``drawn`` flips (see
        :func:`grouped_maxt`)."""
        import numpy as np

        counted = np.where(self.stopped == 0, drawn, self.stopped)
        bounds = [wilson(float(c), int(d)) for c, d in zip(self.reached, counted, strict=True)]
        lows = np.array([low for low, _ in bounds])
        highs = np.array([high for _, high in bounds])
        if self.step_down:
            lows, highs = np.maximum.accumulate(lows), np.maximum.accumulate(highs)
        clear = (highs < band[0]) | (lows > band[1])
        self.stopped[(self.stopped == 0) & clear] = drawn

    def p_values(self, drawn: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64],
                                            npt.NDArray[np.int64]]:
        """Adjusted and own p-values and the flips counted, in the columns' own order."""
        import numpy as np

        counted = np.where(self.stopped == 0, drawn, self.stopped)
        step = (1.0 + self.reached) / (counted + 1.0)
        if self.step_down:
            step = np.maximum.accumulate(step)
        own = (1.0 + self.own) / (counted + 1.0)
        adjusted, raw, flips = (np.empty_like(step), np.empty_like(own),
                                np.empty_like(counted))
        adjusted[self.order], raw[self.order], flips[self.order] = step, own, counted
        return adjusted, raw, flips


@one_blas_thread
def grouped_maxt(
    matrix: npt.NDArray[np.float64],
    groups: npt.NDArray[np.bool_],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    decide: Band | None = None,
    step_down: bool = True,
) -> GroupedPValues:
    """Step-down max-T over every (group, metric) column at once, both directions, and
    each column's own one-sided p-values, from the same sign flips.

    ``matrix`` holds the questions x metrics signed differences (a positive value is the
    "worse" direction, 0 where a question has no pair); ``groups`` (groups x questions)
    says which questions each group holds: the whole run, and each slice. A column is
    one metric over one group's questions, its statistic the group's sum of differences
    standardised by ``sqrt(sum d^2)``, as :func:`maxt_columns` does for the whole run.
    One random sign per *question*, shared by every column and by both directions (a
    flip's "better" statistic is its "worse" one negated), keeps every dependence
    between the columns (a question in two slices moves both, the slices move the
    whole), so the adjusted p-values control the chance of any false rejection among
    all the columns at alpha (subset pivotality, as for the metrics alone).
    ``step_down=False`` skips the adjustment (``worse``/``better`` are then each
    column's own p-values, for Holm's correction or none).

    Cost: the flipped sums of every group come from one product per *cell* (the
    questions that share one membership: a language and a tag), which partition the
    questions, so ten slices cost about what the whole run alone costs; each cell draws
    its signs from its own stream (``(seed, questions, 3, cell)``) in blocks of up to
    1,000 flips, so a block is a few large products, not one small product per cell.

    **Early stopping, column by column.** With ``decide`` (the lowest and highest
    threshold the p-values meet), after 1,000, 2,000, 4,000 ... flips each column whose
    verdict is clear stops counting: with the step-down, column ``j`` (ranks by observed
    statistic, most extreme first) is clear when the Wilson bounds (z = 5) of the
    p-values of ranks ``1..j``, maximised over those ranks as the step-down maximises
    the p-values, lie all below ``decide[0]`` (rejected) or have one above ``decide[1]``
    (kept); without it, when its own bound does. The flips go on while any column is
    open, and each flip computes only the columns the open ones read: with the
    step-down, the columns from the first open rank on (the maximum at rank ``j`` is
    over ranks ``j..m``, so a rank above every open one is never read; a decided rank
    below is still computed, not counted), else the open columns; the products are
    taken over only the cells and metrics those columns hold, and the cells' own
    streams make the signs of a flip the same whichever cells are computed.

    What that guarantees, for a given ``seed``:

    * a column open to the end is counted over exactly the flips, and the same suffix
      maxima, as the full resampling (``decide=None``): its own count and its step-down
      count are the full resampling's (a sum taken over fewer metrics may differ in its
      last bits, which the comparison's tie slack absorbs);
    * its adjusted p-value is the maximum of those p-values over ranks ``1..j``; a rank
      above it that stopped early is rejected (an open column has only rejected ranks
      above it: a kept rank keeps every rank below it) and keeps its p-value at its stop,
      which is below ``decide[0]``; so the adjusted p-value equals the full
      resampling's, or both are below ``decide[0]``;
    * a column stopped early has the verdict of the full resampling except when its
      Wilson bound at z = 5 was wrong, the event the whole-family stop (and
      :func:`paired_stats`) already accepts: rarer than one in a million per look.

    So the verdicts are the full resampling's up to that event, and every adjusted
    p-value of a column open to the end is exact or, where a rank above it stopped, on
    the same side of every threshold. Returns :class:`GroupedPValues`.
    """
    import numpy as np

    n_groups, width = groups.shape[0], matrix.shape[1]
    ones = np.ones((n_groups, width))
    none = np.zeros((n_groups, width), dtype=np.int64)
    result = GroupedPValues(ones, ones.copy(), ones.copy(), ones.copy(), none, none.copy())
    member = groups.any(axis=0) & np.any(matrix != 0, axis=1)
    if not member.any():
        return result
    data = matrix[member]
    masks = groups[:, member]
    # Questions grouped by their membership: each cell's rows are contiguous.
    packed = np.packbits(masks.T, axis=1)
    _, cell_of = np.unique(packed, axis=0, return_inverse=True)
    cell_of = cell_of.reshape(-1)
    order = np.argsort(cell_of, kind="stable")
    data, masks, cell_of = data[order], masks[:, order], cell_of[order]
    n = data.shape[0]
    starts = np.flatnonzero(np.r_[True, cell_of[1:] != cell_of[:-1]])
    bounds = np.r_[starts, n]
    in_group = masks[:, starts].astype(np.float64)  # groups x cells
    cell_sums = np.add.reduceat(data, starts, axis=0)  # cells x metrics
    totals = in_group @ cell_sums  # groups x metrics
    scale = np.sqrt(in_group @ np.add.reduceat(data * data, starts, axis=0))
    live = scale > 0
    if not live.any():
        return result
    safe = np.where(live, scale, 1.0)
    live_groups, live_metrics = np.nonzero(live)
    observed = (totals / safe)[live]
    slack = 1e-9 * max(1.0, float(np.abs(data).sum()))
    worse, better = _Direction(observed, step_down), _Direction(-observed, step_down)
    by_cells = len(starts) <= _MAX_CELLS and len(starts) * _MAX_CELLS_SHARE <= n

    def flipped_block(size: int, draws: list[np.random.Generator],
                      needed: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        # The "worse" statistics of the live columns (resamples x live columns); only
        # the ``needed`` ones are computed (the others are left at 0, never read).
        need_groups = np.unique(live_groups[needed])
        need_metrics = np.unique(live_metrics[needed])
        sums = np.zeros((size, n_groups, need_metrics.size))
        if by_cells:
            need_cells: list[bool] = (in_group[need_groups].sum(axis=0) > 0).tolist()
            every = need_metrics.size == width
            cells = np.zeros((size, len(starts), need_metrics.size))
            for cell, draw in enumerate(draws):
                a, b = bounds[cell], bounds[cell + 1]
                raw_bytes = np.frombuffer(draw.bytes((size * (b - a) + 7) // 8), dtype=np.uint8)
                if not need_cells[cell]:
                    # Drawn all the same: a cell's signs never depend on when it was read.
                    continue
                bits = np.unpackbits(raw_bytes, count=size * (b - a)).reshape(size, b - a)
                block = data[a:b] if every else data[a:b][:, need_metrics]
                cells[:, cell] = bits.astype(np.float64) @ block
            sums[:, need_groups] = np.einsum("gc,scm->sgm", in_group[need_groups], cells)
        else:
            (draw,) = draws
            raw_bytes = np.frombuffer(draw.bytes((size * n + 7) // 8), dtype=np.uint8)
            bits = np.unpackbits(raw_bytes, count=size * n).reshape(size, n).astype(np.float64)
            for g in need_groups:
                sums[:, g] = bits @ (data[:, need_metrics] * masks[g][:, None])
        position = np.searchsorted(need_metrics, live_metrics[needed])
        out = np.zeros((size, observed.size))
        out[:, needed] = ((2.0 * sums[:, live_groups[needed], position]
                           - totals[live_groups[needed], live_metrics[needed]])
                          / safe[live_groups[needed], live_metrics[needed]])
        return out

    drawn = 0
    if 2**n <= resamples:
        # Every sign assignment: exact p-values (see _resample), one enumeration for
        # both directions. Its signs are one matrix over every question.
        signs = all_signs(n)
        sums = np.stack([signs @ (data * masks[g][:, None]) for g in range(n_groups)], axis=1)
        flipped = ((2.0 * sums - totals) / safe)[:, live]
        for direction, sign in ((worse, 1.0), (better, -1.0)):
            direction.count(sign * flipped, slack)
            # The observed assignment is one of the 2**n: counted over the others, the
            # usual (1 + count) / (flips + 1) is the exact share.
            direction.reached -= 1.0
            direction.own -= 1.0
        drawn = 2**n - 1
    else:
        if by_cells:
            largest = int(np.diff(bounds).max())
            draws = [np.random.default_rng([seed, n, 3, cell]) for cell in range(len(starts))]
        else:
            largest = n
            draws = [np.random.default_rng([seed, n, 3])]
        # A block's largest array (one cell's signs, the cells' or the groups' sums)
        # stays within BLOCK_CELLS; blocks divide the first look, so every look falls
        # on a block's end.
        widest = max(largest, (len(starts) if by_cells else 0) * width, n_groups * width, 1)
        fits = max(1, min(FIRST_LOOK, BLOCK_CELLS // widest))
        size_of_block = max(d for d in range(1, fits + 1) if FIRST_LOOK % d == 0)
        look = FIRST_LOOK
        while drawn < resamples:
            needed = np.union1d(worse.needed(), better.needed())
            if needed.size == 0:
                break
            size = min(size_of_block, resamples - drawn)
            flipped = flipped_block(size, draws, needed)
            worse.count(flipped, slack)
            better.count(-flipped, slack)
            drawn += size
            if decide is not None and drawn >= look and drawn < resamples:
                look *= 2
                worse.look(drawn, decide)
                better.look(drawn, decide)
    arrays = []
    for direction in (worse, better):
        adjusted, raw, flips = direction.p_values(drawn)
        full_adjusted, full_raw = ones.copy(), ones.copy()
        full_flips = np.zeros((n_groups, width), dtype=np.int64)
        full_adjusted[live], full_raw[live], full_flips[live] = adjusted, raw, flips
        arrays.append((full_adjusted, full_raw, full_flips))
    (w_adj, w_raw, w_flips), (b_adj, b_raw, b_flips) = arrays
    return GroupedPValues(worse=w_adj, better=b_adj, raw_worse=w_raw, raw_better=b_raw,
                          drawn_worse=w_flips, drawn_better=b_flips)
