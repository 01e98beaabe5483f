"""The slices the gate tests (``[gate] slices``), and their joint p-values.

A slice is the questions of one language (``lang:zh``) or one tag (``tag:billing``):
each record carries its slice keys (``Record.slices``). With ``[gate] slices = ["lang",
"tag"]`` the paired differences of every slice of those kinds are tested beside the
run's own: :func:`slice_groups` picks the slices worth a test (at least ``[gate]
min_slice`` compared questions, and not every one of them), and :func:`group_tests`
tests the metrics over the whole run and over each slice as one family of max-T
columns (:func:`~pytest_ragev.gate.family.grouped_maxt`), so the chance that an
unchanged pipeline fails on *any* metric of the run or of a slice stays at most alpha,
however many slices there are. :func:`~pytest_ragev.gate.compare.compare` judges each
column with the metric's rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_ragev.core.results import RunResult
from pytest_ragev.gate.family import grouped_maxt
from pytest_ragev.gate.rules import GateRules
from pytest_ragev.gate.stats import holm

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def slice_label(key: str, keys: Sequence[str] = ()) -> str:
    """How a failure line names a slice: ``zh``, ``billing``; the whole key when another
    slice of ``keys`` has the same name (a tag ``zh`` beside the language ``zh``)."""
    name = key.split(":", 1)[-1]
    clash = sum(1 for other in keys if other.split(":", 1)[-1] == name)
    return key if clash > 1 else name


def slice_groups(
    run: RunResult, qids: npt.NDArray[np.int64], rules: GateRules
) -> list[tuple[str, npt.NDArray[np.bool_]]]:
    """The slices of ``run`` the gate tests, each with its mask over ``qids`` (the
    compared questions, in the paired table's order): the kinds ``[gate] slices`` names,
    with at least ``[gate] min_slice`` compared questions, and fewer than all of them (a
    slice of every question would test the run again), largest first."""
    import numpy as np

    if not rules.slices:
        return []
    position = dict(zip(qids.tolist(), range(len(qids)), strict=True))
    # Questions gathered by their slice keys first: a run has few distinct memberships,
    # so each key is looked at once per membership, not once per question.
    by_keys: dict[tuple[str, ...], list[int]] = {}
    for sample in run.samples:
        row = position.get(sample.qid)
        if row is not None:
            by_keys.setdefault(tuple(sample.slices), []).append(row)
    members: dict[str, list[int]] = {}
    for keys, rows_of in by_keys.items():
        for key in keys:
            if key.split(":", 1)[0] in rules.slices:
                members.setdefault(key, []).extend(rows_of)
    total = len(qids)
    groups = []
    for key in sorted(members, key=lambda key: (key.split(":", 1)[0] != "lang",
                                                -len(members[key]), key)):
        rows = members[key]
        if rules.min_slice <= len(rows) < total:
            mask = np.zeros(total, dtype=bool)
            mask[rows] = True
            groups.append((key, mask))
    return groups


@dataclass(frozen=True)
class GroupTests:
    """The p-values of the metrics tested over the whole run (row 0) and each slice.

    Arrays are groups x family metrics, one-sided: ``worse``/``better`` adjusted for
    every column of the family (step-down max-T, Holm, or none), ``raw_worse`` and
    ``raw_better`` each column's own.
    """

    worse: npt.NDArray[np.float64]
    better: npt.NDArray[np.float64]
    raw_worse: npt.NDArray[np.float64]
    raw_better: npt.NDArray[np.float64]

    @property
    def columns(self) -> int:
        """The tests of the family: the metrics times the groups."""
        return int(self.worse.size)


def group_tests(
    differences: npt.NDArray[np.float64],
    masks: Sequence[npt.NDArray[np.bool_]],
    worse_signs: npt.NDArray[np.float64],
    rules: GateRules,
    alphas: Sequence[float],
    overall_raw: Mapping[str, tuple[float, float]] | None = None,
    names: Sequence[str] = (),
) -> GroupTests:
    """Test the family's metrics over the whole run and over each slice of ``masks``.

    ``differences`` holds the compared questions x family metrics (current minus
    baseline, 0 where not paired); ``worse_signs`` is -1 for a higher-is-better metric,
    +1 for a lower-is-better one. With ``correction = "maxt"`` every column is adjusted
    by the joint step-down max-T; ``"holm"`` adjusts the raw p-values of every column
    (the whole run's from ``overall_raw``: metric -> (worse, better), when given);
    ``"none"`` leaves each column its own.
    """
    import numpy as np

    groups = np.vstack([np.ones(differences.shape[0], dtype=bool), *masks])
    # What decides a column, and so when its resampling may stop: its max-T adjusted
    # p-value against alpha; under Holm its own p-value against alpha / columns ..
    # alpha; without a correction its own p-value against alpha.
    columns = groups.shape[0] * differences.shape[1]
    low, high = min(alphas), max(alphas)
    step_down = rules.correction == "maxt"
    band = (low / columns, high) if rules.correction == "holm" else (low, high)
    found = grouped_maxt(differences * worse_signs, groups, resamples=rules.resamples,
                         seed=rules.seed, decide=band, step_down=step_down)
    worse, better = found.worse, found.better
    raw_worse, raw_better = found.raw_worse.copy(), found.raw_better.copy()
    if overall_raw:
        for column, name in enumerate(names):
            if name in overall_raw:
                raw_worse[0, column], raw_better[0, column] = overall_raw[name]
    if rules.correction == "holm":
        worse = _holm(raw_worse)
        better = _holm(raw_better)
    elif rules.correction == "none":
        worse, better = raw_worse.copy(), raw_better.copy()
    return GroupTests(worse=worse, better=better, raw_worse=raw_worse, raw_better=raw_better)


def _holm(raw: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """:func:`~pytest_ragev.gate.stats.holm` over every cell of a groups x metrics array."""
    import numpy as np

    cells = {f"{g}:{k}": float(raw[g, k]) for g in range(raw.shape[0])
             for k in range(raw.shape[1])}
    adjusted = holm(cells)
    out = np.empty_like(raw)
    for name, value in adjusted.items():
        g, k = (int(part) for part in name.split(":"))
        out[g, k] = value
    return out
