"""``score`` and ``aggregate``: the metric engine's entry points."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_ragev._types import GENERATION_METRICS, METRIC_NAMES, RETRIEVAL_METRICS, MetricInput
from pytest_ragev.metrics import _validate, generation, retrieval
from pytest_ragev.metrics.text import Sentences, Tokenizer, tokenize_tuples
from pytest_ragev.results import Direction, MetricSummary

__all__ = ["PROFILES", "aggregate", "score"]

#: The metric definitions :func:`score` knows, the default first.
PROFILES: tuple[str, ...] = ("weknora", "standard")

# Result lists longer than this, or ground-truth sets this large, take the per-sample
# path: the padded comparison cube of the numpy path grows with their product.
_BATCH_MAX_WIDTH = 512
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


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

    ``tokenizer`` replaces the spec tokenizer (``text -> sentences of tokens``) for
    the generation metrics; each distinct text is tokenized once per call.

    Wrong types raise ``TypeError`` and wrong values ``ValueError``, naming the input
    index and field. Every value is a float in [0, 1].
    """
    if profile not in PROFILES:
        raise ValueError(f"profile: unknown profile {profile!r}; choose 'weknora' or 'standard'")
    names = _resolve_names(metrics)
    samples = _validate.check_samples(inputs)
    columns: dict[str, list[float]] = {}
    if any(name in RETRIEVAL_METRICS for name in names):
        columns.update(
            zip(RETRIEVAL_METRICS, _retrieval_columns(samples, profile, grades), strict=True)
        )
    if any(name in GENERATION_METRICS for name in names):
        columns.update(
            zip(GENERATION_METRICS, _generation_columns(samples, profile, tokenizer), strict=True)
        )
    if not names:
        return [{} for _ in samples]
    selected = [columns[name] for name in names]
    return [dict(zip(names, values, strict=True)) for values in zip(*selected, strict=True)]


def _retrieval_columns(
    samples: Sequence[MetricInput],
    profile: str,
    grades: Sequence[Mapping[int, float] | None] | None,
) -> list[list[float]]:
    ids = _validate.id_lists(samples)
    gts = _validate.gt_lists(samples)
    checked_grades = _validate.check_grades(grades, gts) if grades is not None else None
    if profile != "standard":
        checked_grades = None

    batch: list[int] = []
    single: list[int] = []
    for index, (sample_ids, sample_gt) in enumerate(zip(ids, gts, strict=True)):
        if (
            len(sample_gt) <= 1
            and len(sample_ids) <= _BATCH_MAX_WIDTH
            and (not sample_gt or len(sample_gt[0]) <= _BATCH_MAX_WIDTH)
        ):
            batch.append(index)
        else:
            single.append(index)
    if batch and not _fits_int64(ids, gts, batch):
        single, batch = sorted(single + batch), []

    columns = [[0.0] * len(samples) for _ in RETRIEVAL_METRICS]
    if batch:
        everything = len(batch) == len(samples)
        batch_ids = ids if everything else [ids[i] for i in batch]
        batch_gt = [gts[i][0] if gts[i] else () for i in batch]
        batch_grades = None
        if checked_grades is not None:
            batch_grades = checked_grades if everything else [checked_grades[i] for i in batch]
        values = retrieval.score_batch(batch_ids, batch_gt, profile=profile, grades=batch_grades)
        for column, array in zip(columns, values, strict=True):
            if everything:
                column[:] = array.tolist()
            else:
                for index, value in zip(batch, array.tolist(), strict=True):
                    column[index] = value
    for index in single:
        one = retrieval.score_one(
            retrieval.dedupe(ids[index]),
            gts[index],
            profile=profile,
            grades=checked_grades[index] if checked_grades is not None else None,
        )
        for column, value in zip(columns, one, strict=True):
            column[index] = value
    return columns


def _fits_int64(
    ids: Sequence[Sequence[int]], gts: Sequence[Sequence[Sequence[int]]], rows: list[int]
) -> bool:
    low = high = 0
    for index in rows:
        for values in (ids[index], *gts[index]):
            if values:
                low = min(low, min(values))
                high = max(high, max(values))
    return low >= _INT64_MIN and high <= _INT64_MAX


def _generation_columns(
    samples: Sequence[MetricInput], profile: str, tokenizer: Tokenizer | None
) -> list[list[float]]:
    hypotheses = _validate.texts(samples, "generated_text")
    references = _validate.texts(samples, "generated_gt")
    segment = tokenize_tuples if tokenizer is None else _checked_tokenizer(tokenizer)
    pair_scores = generation.score_weknora if profile == "weknora" else generation.score_standard
    rows = [
        pair_scores(segment(hypothesis), segment(reference))
        for hypothesis, reference in zip(hypotheses, references, strict=True)
    ]
    if not rows:
        return [[] for _ in GENERATION_METRICS]
    return [list(column) for column in zip(*rows, strict=True)]


def _checked_tokenizer(tokenizer: Tokenizer) -> Callable[[str], Sentences]:
    """Wrap a custom tokenizer: memoise per call, check and freeze what it returns."""
    if not callable(tokenizer):
        raise TypeError(
            f"tokenizer: expected a callable text -> list of sentences of tokens, got "
            f"{type(tokenizer).__name__}"
        )
    memo: dict[str, Sentences] = {}

    def segment(text: str) -> Sentences:
        cached = memo.get(text)
        if cached is not None:
            return cached
        result: Any = tokenizer(text)
        if not isinstance(result, list | tuple) or not all(
            isinstance(sentence, list | tuple) and all(type(t) is str for t in sentence)
            for sentence in result
        ):
            raise TypeError(
                f"tokenizer: must return a list of sentences, each a list of str tokens; "
                f"for {text[:40]!r} it returned {type(result).__name__} {result!r:.60}"
            )
        frozen = tuple(tuple(sentence) for sentence in result if sentence)
        memo[text] = frozen
        return frozen

    return segment


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
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(
                    f"rows[{index}][{name!r}]: expected a number, got "
                    f"{type(value).__name__} {value!r}"
                )
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
