"""``score`` and ``aggregate``: the metric engine's entry points."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from pytest_ragev.core.gcpause import paused_gc
from pytest_ragev.core.results import Direction, MetricSummary
from pytest_ragev.core.types import GENERATION_METRICS, METRIC_NAMES, RETRIEVAL_METRICS, MetricInput
from pytest_ragev.metrics import _validate, generation, retrieval
from pytest_ragev.metrics.retrieval import FloatArray
from pytest_ragev.metrics.text import Tokenizer, segmenter

__all__ = ["PROFILES", "aggregate", "score", "score_columns"]

#: The metric definitions :func:`score` knows, the default first.
PROFILES: tuple[str, ...] = ("weknora", "standard")

# Result lists longer than this, or ground-truth sets this large, take the per-sample
# path: the padded comparison cube of the numpy path grows with their product.
_BATCH_MAX_WIDTH = 512


def _resolve_names(metrics: Iterable[str] | None) -> tuple[str, ...]:
    if metrics is None:
        return METRIC_NAMES
    if isinstance(metrics, str):
        raise TypeError(
            f"metrics: expected a collection of metric names, got the string {metrics!r}; "
            f"write metrics=[{metrics!r}] or metrics=RETRIEVAL_METRICS"
        )
    wanted = list(metrics)
    for name in wanted:
        if name not in METRIC_NAMES:
            raise ValueError(
                f"metrics: unknown metric {name!r}; choose from {', '.join(METRIC_NAMES)}"
            )
    return tuple(name for name in METRIC_NAMES if name in wanted)


def score(
    inputs: Iterable[MetricInput],
    *,
    profile: str = "weknora",
    metrics: Iterable[str] | None = None,
    grades: Sequence[Mapping[int, float] | None] | None = None,
    tokenizer: Tokenizer | None = None,
) -> list[dict[str, float]]:
    """Score every input; one ``{metric: value}`` dict per input, in input order.

    ``profile`` picks the definitions: ``"weknora"`` (default; WeKnora's metrics with
    its v0.9.0 fixes) or ``"standard"`` (``trec_eval``, Google ``rouge-score`` and
    NLTK BLEU on the same tokens); see ``docs/metrics.md``.

    ``metrics`` limits the result to some names of :data:`METRIC_NAMES` (e.g.
    ``RETRIEVAL_METRICS``); a half none of whose metrics is asked for is neither
    computed nor validated, so ``metrics=RETRIEVAL_METRICS`` never tokenizes.

    ``grades`` gives, per input, relevance grades ``{pid: grade}`` of ground-truth
    passages (missing pids grade 1, ``None`` for all 1). Only ``"standard"`` reads
    them (graded nDCG with linear gain; grade 0 makes a passage non-relevant);
    ``"weknora"`` is binary by definition and ignores them.

    ``tokenizer`` replaces the built-in tokenizer (``text -> sentences of tokens``)
    for the generation metrics: e.g. ``resolve_tokenizer("ja", source=...).tokenizer``,
    or your own. It must be a pure function of the text: its results are memoised
    across calls for as long as the tokenizer object lives (for a bound method, its
    instance), so each distinct text is tokenized once.

    Wrong types raise ``TypeError`` and wrong values ``ValueError``, naming the input
    index and field. Every value is a float in [0, 1].
    """
    names, columns = _score_columns(inputs, profile, metrics, grades, tokenizer)
    if not names:
        return [{} for _ in range(columns)]
    # One dict per input: on 100,000 inputs the collections these allocations trigger
    # scan every live object, a twentieth of the call when the caller holds much.
    with paused_gc():
        return _rows(names, columns)


def _rows(names: tuple[str, ...], columns: list[Any]) -> list[dict[str, float]]:
    """One ``{metric: value}`` dict per input from one column per metric."""
    lists = [column if isinstance(column, list) else column.tolist() for column in columns]
    # Columns that are one shared list (only ever the zeros of the generation half of
    # retrieval-only inputs, see _generation_columns) go into the rows as constants.
    first = {id(column): column for column in reversed(lists)}
    if len(first) < len(lists):
        zeros = next(c for c in lists if sum(c is other for other in lists) > 1)
        constant = tuple(name for name, column in zip(names, lists, strict=True) if column is zeros)
        varying = [column for column in lists if column is not zeros]
        if not varying:
            template = dict.fromkeys(names, 0.0)
            return [template.copy() for _ in zeros]
        return _row_builder_with_zeros(names, constant)(*varying)
    return _row_builder(names)(*lists)


def score_columns(
    inputs: Iterable[MetricInput],
    *,
    profile: str = "weknora",
    metrics: Iterable[str] | None = None,
    grades: Sequence[Mapping[int, float] | None] | None = None,
    tokenizer: Tokenizer | None = None,
) -> dict[str, FloatArray]:
    """:func:`score` in columns: ``{metric: float64 array with one value per input}``.

    Same arguments, checks and values as :func:`score` (``score_columns(x)[m][i] ==
    score(x)[i][m]``), keys in :data:`METRIC_NAMES` order. For large batches that
    go on to numpy anyway: building one dict per input is a good part of
    :func:`score`'s time on the retrieval metrics.
    """
    names, columns = _score_columns(inputs, profile, metrics, grades, tokenizer)
    if not names:
        return {}
    return {
        name: column if isinstance(column, np.ndarray) else np.array(column, dtype=np.float64)
        for name, column in zip(names, columns, strict=True)
    }


def _score_columns(
    inputs: Iterable[MetricInput],
    profile: str,
    metrics: Iterable[str] | None,
    grades: Sequence[Mapping[int, float] | None] | None,
    tokenizer: Tokenizer | None,
) -> Any:
    """(names, one column per name) or, when no name is asked for, ((), sample count)."""
    if profile not in PROFILES:
        raise ValueError(f"profile: unknown profile {profile!r}; choose 'weknora' or 'standard'")
    names = _resolve_names(metrics)
    samples = _validate.check_samples(inputs)
    columns: dict[str, FloatArray | list[float]] = {}
    if any(name in RETRIEVAL_METRICS for name in names):
        columns.update(
            zip(RETRIEVAL_METRICS, _retrieval_columns(samples, profile, grades), strict=True)
        )
    if any(name in GENERATION_METRICS for name in names):
        columns.update(
            zip(GENERATION_METRICS, _generation_columns(samples, profile, tokenizer), strict=True)
        )
    if not names:
        return (), len(samples)
    return names, [columns[name] for name in names]


@lru_cache(maxsize=64)
def _row_builder(names: tuple[str, ...]) -> Callable[..., list[dict[str, float]]]:
    """A function turning one list per metric into one dict per sample, for ``names``.

    Built from source like ``collections.namedtuple`` once did: a dict display with
    constant keys is about twice as fast as ``dict(zip(names, values))``, and with
    100,000 samples building the rows is a good part of the retrieval half's time.
    ``names`` are validated metric names, i.e. plain identifiers.
    """
    assert all(name.isidentifier() for name in names)
    arguments = ", ".join(f"c_{name}" for name in names)
    pairs = ", ".join(f"{name!r}: v_{name}" for name in names)
    values = ", ".join(f"v_{name}" for name in names)
    source = f"lambda {arguments}: [{{{pairs}}} for {values}, in zip({arguments})]"
    builder: Callable[..., list[dict[str, float]]] = eval(source)
    return builder


@lru_cache(maxsize=64)
def _row_builder_with_zeros(
    names: tuple[str, ...], zero: tuple[str, ...]
) -> Callable[..., list[dict[str, float]]]:
    """:func:`_row_builder` for rows whose ``zero`` metrics are all 0.0: each row is a
    copy of a template (a C-level copy of a dict of ``names``, in order) with the other
    metrics stored into it, about 20% less time than a display of every value."""
    assert all(name.isidentifier() for name in names)
    template = dict.fromkeys(names, 0.0)
    varying = [name for name in names if name not in zero]
    arguments = ", ".join(f"c_{name}" for name in varying)
    values = ", ".join(f"v_{name}" for name in varying)
    stores = "".join(f"        row[{name!r}] = v_{name}\n" for name in varying)
    assert varying, "every column constant: the caller copies the template itself"
    source = (
        f"def build({arguments}):\n"
        "    rows = []\n"
        "    append = rows.append\n"
        "    copy = template.copy\n"
        f"    for {values}, in zip({arguments}):\n"
        "        row = copy()\n"
        f"{stores}"
        "        append(row)\n"
        "    return rows\n"
    )
    namespace: dict[str, Any] = {"template": template}
    exec(source, namespace)
    builder: Callable[..., list[dict[str, float]]] = namespace["build"]
    return builder


_SET_CONTAINERS = frozenset({list, tuple, set, frozenset})
_RETRIEVAL_IDS = attrgetter("retrieval_ids")
_RETRIEVAL_GT = attrgetter("retrieval_gt")


def _retrieval_columns(
    samples: Sequence[MetricInput],
    profile: str,
    grades: Sequence[Mapping[int, float] | None] | None,
) -> list[FloatArray]:
    count = len(samples)
    if count == 0:
        return [np.zeros(0) for _ in RETRIEVAL_METRICS]
    ids: Sequence[Sequence[int]] = list(map(_RETRIEVAL_IDS, samples))
    flat_ids = _validate.plain_flat_ids(ids)
    if flat_ids is None:
        ids = _validate.id_lists(samples)  # raises on bad input, converts int-likes
        flat_ids = _validate.flat_ids(ids)

    # The numpy path takes samples with at most one GT set (the plugin's shape).
    gts: Sequence[Sequence[Sequence[int]]] = list(map(_RETRIEVAL_GT, samples))
    flat_gt = None
    if set(map(type, gts)) <= {list, tuple}:
        set_counts = np.fromiter(map(len, gts), dtype=np.int64, count=count)
        if bool((set_counts == 1).all()):
            firsts: Sequence[Sequence[int]] = list(map(itemgetter(0), gts))
            flat_gt = _validate.plain_flat_ids(firsts, _SET_CONTAINERS)
    if flat_gt is None:
        gts = _validate.gt_lists(samples)
        set_counts = np.fromiter(map(len, gts), dtype=np.int64, count=count)
        firsts = [gt[0] if len(gt) == 1 else () for gt in gts]
        flat_gt = _validate.flat_ids(firsts)
    checked_grades = None
    if grades is not None:
        checked_grades = _validate.check_grades(grades, gts)
        if profile != "standard":
            checked_grades = None  # binary by definition

    in_batch = set_counts <= 1
    if flat_ids is None or flat_gt is None:
        in_batch[:] = False  # an id beyond 64 bits: exact Python integers for all
    else:
        in_batch &= (flat_ids.lengths <= _BATCH_MAX_WIDTH) & (flat_gt.lengths <= _BATCH_MAX_WIDTH)
    if bool(in_batch.all()):
        assert flat_ids is not None and flat_gt is not None
        return retrieval.score_batch(flat_ids, flat_gt, profile=profile, grades=checked_grades)

    columns = [np.zeros(count) for _ in RETRIEVAL_METRICS]
    batch = np.flatnonzero(in_batch)
    if len(batch):
        subset_ids = _validate.flat_ids([ids[i] for i in batch.tolist()])
        subset_gt = _validate.flat_ids([firsts[i] for i in batch.tolist()])
        assert subset_ids is not None and subset_gt is not None
        subset_grades = (
            None if checked_grades is None else [checked_grades[i] for i in batch.tolist()]
        )
        arrays = retrieval.score_batch(subset_ids, subset_gt, profile=profile, grades=subset_grades)
        for column, array in zip(columns, arrays, strict=True):
            column[batch] = array
    for index in np.flatnonzero(~in_batch).tolist():
        one = retrieval.score_one(
            retrieval.dedupe(ids[index]),
            gts[index],
            profile=profile,
            grades=checked_grades[index] if checked_grades is not None else None,
        )
        for column, value in zip(columns, one, strict=True):
            column[index] = value
    return columns


def _generation_columns(
    samples: Sequence[MetricInput], profile: str, tokenizer: Tokenizer | None
) -> list[list[float]]:
    hypotheses = _validate.texts(samples, "generated_text")
    references = _validate.texts(samples, "generated_gt")
    segment = segmenter(tokenizer)
    rows = generation.score_texts(hypotheses, references, segment, profile)
    if not rows:
        return [[] for _ in GENERATION_METRICS]
    if rows.count(generation.EMPTY_SCORES) == len(rows):
        # Retrieval-only inputs: one shared column of zeros instead of transposing
        # a hundred thousand rows (the columns are only read; score() sees it shared).
        zeros = [0.0] * len(rows)
        return [zeros for _ in GENERATION_METRICS]
    # One C-level pass per metric: 3-4x faster than transposing with zip(*rows).
    return [list(map(itemgetter(position), rows)) for position in range(len(GENERATION_METRICS))]


def aggregate(
    rows: Iterable[Mapping[str, float]],
    names: Iterable[str] | None = None,
    *,
    directions: Mapping[str, Direction] | None = None,
) -> dict[str, MetricSummary]:
    """The run's figure per metric: the plain mean over the rows that have it.

    A row lacking a metric (no qrels, no reference answer, a failed pipeline) does not
    count for that metric; ``n`` says how many did, and ``mean`` is ``None`` when none
    did. By default the result holds the twelve built-in metrics in report order, then
    any other metric found in the rows, in first-seen order; ``names`` fixes the list
    and order instead. ``directions`` marks metrics where lower is better (the
    built-ins are all ``"higher"``).
    """
    materialised = list(rows)
    if names is None:
        ordered = list(METRIC_NAMES)
        seen = set(ordered)
        for row in materialised:
            for key in row:
                if key not in seen:
                    seen.add(key)
                    ordered.append(key)
    else:
        if isinstance(names, str):
            raise TypeError(
                f"names: expected a collection of metric names, got the string {names!r}"
            )
        ordered = list(dict.fromkeys(names))
    directions = dict(directions or {})
    for name, direction in directions.items():
        if direction not in ("higher", "lower"):
            raise ValueError(
                f"directions[{name!r}]: expected 'higher' or 'lower', got {direction!r}"
            )

    values: dict[str, list[float]] = {name: [] for name in ordered}
    for index, row in enumerate(materialised):
        if not isinstance(row, Mapping):
            raise TypeError(
                f"rows[{index}]: expected a mapping of metric values, got {type(row).__name__}"
            )
        for name, value in row.items():
            bucket = values.get(name)
            if bucket is None:
                continue
            # A plain float (what every metric gives) skips the ABC check, which costs
            # more than the rest of the loop at 100,000 rows x 12 metrics.
            if type(value) is float:
                number = value
            elif isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(
                    f"rows[{index}][{name!r}]: expected a number, got "
                    f"{type(value).__name__} {value!r}"
                )
            else:
                number = float(value)
            if not math.isfinite(number):
                raise ValueError(
                    f"rows[{index}][{name!r}]: expected a finite number, got {number!r}"
                )
            bucket.append(number)
    return {
        name: MetricSummary(
            name=name,
            mean=math.fsum(bucket) / len(bucket) if bucket else None,
            n=len(bucket),
            direction=directions.get(name, "higher"),
        )
        for name, bucket in values.items()
    }
