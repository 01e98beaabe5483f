"""Input checks of :func:`pytest_ragev.metrics.score`.

The common case (plain lists of plain ints, plain strings) is recognised with a few
C-level passes over the whole batch; only when one of them fails does the per-sample
walk run, to name the first offending sample, field and value in one line. Integer
types other than ``int`` (numpy integers, ``IntEnum``, anything with ``__index__``) are
accepted and converted; ``bool`` is not an id.
"""

from __future__ import annotations

import math
import numbers
import operator
from array import array
from collections import deque
from collections.abc import Mapping, Sequence
from functools import reduce
from itertools import chain
from operator import iadd
from typing import Any

import numpy as np

from pytest_ragev.core.types import MetricInput
from pytest_ragev.metrics.retrieval import FlatIds

__all__ = [
    "check_grades",
    "check_samples",
    "flat_ids",
    "gt_lists",
    "id_lists",
    "plain_flat_ids",
    "texts",
]

_ID_CONTAINERS = (list, tuple)
_SET_CONTAINERS = (list, tuple, set, frozenset)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_samples(inputs: Any) -> list[MetricInput]:
    """``inputs`` as a list of :class:`MetricInput`, or ``TypeError`` naming the first bad one."""
    if isinstance(inputs, MetricInput | str | bytes | Mapping):
        raise TypeError(
            f"score() expects an iterable of MetricInput, got {type(inputs).__name__}; "
            "wrap a single sample in a list"
        )
    samples = list(inputs)
    if not set(map(type, samples)) <= {MetricInput}:
        for index, sample in enumerate(samples):
            if not isinstance(sample, MetricInput):
                raise TypeError(
                    f"inputs[{index}]: expected a MetricInput, got {type(sample).__name__} "
                    f"{_show(sample)}"
                )
    return samples


def plain_flat_ids(
    lists: Sequence[Any], containers: frozenset[type] = frozenset({list, tuple})
) -> FlatIds | None:
    """``lists`` as :class:`FlatIds` when every list is a plain container of integers.

    ``None`` means "look closer" (another container or element type, or an id beyond
    int64): the caller then runs the per-sample checks. ``array('q')`` converts
    a million Python ints about 1.5x faster than ``np.array`` and accepts exactly
    what :func:`_as_id` accepts (integers through ``__index__``) except ``bool``,
    which hides in it as 0 and 1: those cells are looked at one by one.
    """
    flat: list[Any] | None = None
    buffer = array("q")
    try:
        # All lists, the common case, is tried first: array.fromlist takes nothing
        # else, so the attempt doubles as the container check. One pass over the
        # ints: with ids scattered over the heap, each pass costs a cache miss per
        # id; flattening first would cost two.
        deque(map(buffer.fromlist, lists), maxlen=0)  # the loop in C
    except TypeError:  # another container, or an element that is not an int
        if not set(map(type, lists)) <= containers:
            return None
        buffer = array("q")
        try:
            flat = reduce(iadd, lists, [])  # sets have no index: keep the flat list
            buffer.fromlist(flat)
        except (TypeError, OverflowError):
            return None
    except OverflowError:  # an id beyond int64
        return None
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    values = np.frombuffer(buffer, dtype=np.int64)
    result = FlatIds(values, lengths)
    zeros_and_ones = np.flatnonzero((values & ~1) == 0)
    if len(zeros_and_ones) == 0:
        return result
    if flat is None:
        rows = np.searchsorted(result.offsets, zeros_and_ones, side="right") - 1
        cells = zip(rows.tolist(), (zeros_and_ones - result.offsets[rows]).tolist(), strict=True)
        if any(type(lists[row][column]) is bool for row, column in cells):
            return None
    elif any(type(flat[index]) is bool for index in zeros_and_ones.tolist()):
        return None
    return result


def flat_ids(lists: Sequence[Sequence[int]]) -> FlatIds | None:
    """Checked id lists as :class:`FlatIds`; ``None`` when an id does not fit in int64."""
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    try:
        values = np.array(list(chain.from_iterable(lists)), dtype=np.int64)
    except (OverflowError, ValueError, TypeError):
        return None
    if values.ndim != 1:
        return None
    return FlatIds(values, lengths)


def _as_id(value: Any, where: str) -> int:
    """``value`` as an int: any integer (``int``, numpy integers, anything with
    ``__index__``) except ``bool`` and ``numpy.bool_``."""
    if not isinstance(value, bool | np.bool_):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(
        f"{where}: expected an int passage id, got {type(value).__name__} {_show(value)}"
    )


def id_lists(samples: Sequence[MetricInput]) -> list[list[int]]:
    """Every sample's ``retrieval_ids`` (as given when already plain; repeats kept)."""
    lists = [sample.retrieval_ids for sample in samples]
    if set(map(type, lists)) <= {list} and set(map(type, chain.from_iterable(lists))) <= {int}:
        return lists
    checked: list[list[int]] = []
    for index, ids in enumerate(lists):
        where = f"inputs[{index}].retrieval_ids"
        if not isinstance(ids, _ID_CONTAINERS):
            raise TypeError(
                f"{where}: expected a list of int passage ids (best first), got "
                f"{type(ids).__name__} {_show(ids)}"
            )
        checked.append([_as_id(value, f"{where}[{rank}]") for rank, value in enumerate(ids)])
    return checked


def gt_lists(samples: Sequence[MetricInput]) -> list[list[list[int]]]:
    """Every sample's ``retrieval_gt`` (a list of passage-id sets)."""
    lists = [sample.retrieval_gt for sample in samples]
    if set(map(type, lists)) <= {list}:
        groups = list(chain.from_iterable(lists))
        if set(map(type, groups)) <= {list} and set(map(type, chain.from_iterable(groups))) <= {
            int
        }:
            return lists
    checked: list[list[list[int]]] = []
    for index, gt in enumerate(lists):
        where = f"inputs[{index}].retrieval_gt"
        if not isinstance(gt, _ID_CONTAINERS):
            raise TypeError(
                f"{where}: expected a list of passage-id sets such as [[1, 2]], got "
                f"{type(gt).__name__} {_show(gt)}"
            )
        sample_sets: list[list[int]] = []
        for position, group in enumerate(gt):
            if not isinstance(group, _SET_CONTAINERS):
                raise TypeError(
                    f"{where}[{position}]: expected a list of int passage ids, got "
                    f"{type(group).__name__} {_show(group)} (one set of ids is written [[1, 2]])"
                )
            sample_sets.append([_as_id(v, f"{where}[{position}]") for v in group])
        checked.append(sample_sets)
    return checked


def texts(samples: Sequence[MetricInput], field: str) -> list[str]:
    """Every sample's ``generated_text`` or ``generated_gt``."""
    values = list(map(operator.attrgetter(field), samples))
    if set(map(type, values)) <= {str}:
        return values
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(
                f"inputs[{index}].{field}: expected str, got {type(value).__name__} "
                f"{_show(value)} (use '' when there is no text)"
            )
    return values


def check_grades(
    grades: Any, gts: Sequence[Sequence[Sequence[int]]]
) -> list[dict[int, float] | None]:
    """``grades`` as one ``{pid: grade}`` (or ``None``) per sample, every pid a GT passage."""
    if isinstance(grades, Mapping | str | bytes) or not isinstance(grades, Sequence):
        raise TypeError(
            f"grades: expected a list with one {{pid: grade}} mapping (or None) per input, "
            f"got {type(grades).__name__}"
        )
    if len(grades) != len(gts):
        raise ValueError(
            f"grades: has {len(grades)} entries but there are {len(gts)} inputs; "
            "give one mapping (or None) per input"
        )
    checked: list[dict[int, float] | None] = []
    for index, mapping in enumerate(grades):
        if mapping is None:
            checked.append(None)
            continue
        if not isinstance(mapping, Mapping):
            raise TypeError(
                f"grades[{index}]: expected a {{pid: grade}} mapping or None, got "
                f"{type(mapping).__name__} {_show(mapping)}"
            )
        known = set(chain.from_iterable(gts[index]))
        sample: dict[int, float] = {}
        for pid, grade in mapping.items():
            key = _as_id(pid, f"grades[{index}] key")
            if key not in known:
                raise ValueError(
                    f"grades[{index}]: passage {key} is not in inputs[{index}].retrieval_gt; "
                    "grade only ground-truth passages"
                )
            if isinstance(grade, bool) or not isinstance(grade, numbers.Real):
                raise TypeError(
                    f"grades[{index}][{key}]: expected a number, got "
                    f"{type(grade).__name__} {_show(grade)}"
                )
            value = float(grade)
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"grades[{index}][{key}]: grade must be a finite number >= 0, got {value!r}"
                )
            sample[key] = value
        checked.append(sample)
    return checked
