"""Scoring a run's records: every metric that applies to each question, once.

:func:`score_records` is the one way records are scored; :class:`RecordScorer` scores
them while the run goes and hands the end of the run what it scored;
:class:`TextScoreMemo` reads the text metrics of pairs an earlier run scored;
:class:`RunningMeans` keeps the progress report's means; :func:`build_run` makes one
configuration's :class:`~pytest_ragev.core.results.RunResult`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.record import QuestionKey, Record
from pytest_ragev.core.results import MetricSummary, RunResult
from pytest_ragev.core.segment import jieba_unchanged
from pytest_ragev.core.types import (
    GENERATION_METRICS,
    METRIC_NAMES,
    RETRIEVAL_METRICS,
    SIMILARITY,
    CustomMetric,
    MetricCase,
    MetricInput,
    MetricValue,
    QAPair,
)
from pytest_ragev.dataset import Dataset
from pytest_ragev.evaluation.plan import RunPlan, Tokenizer
from pytest_ragev.evaluation.quality import SimilarityScorer
from pytest_ragev.evaluation.slices import dataset_slices
from pytest_ragev.metrics import TokenizerChoice, aggregate, score
from pytest_ragev.metrics.memo import pair_key, scores_context


def score_records(
    records: Sequence[Record],
    *,
    profile: str,
    custom: Sequence[CustomMetric] = (),
    tokenizer: Tokenizer | None = None,
    cases: Mapping[int, QAPair] | None = None,
    corpus: Mapping[int, str] | None = None,
    scored: frozenset[QuestionKey] = frozenset(),
    memo: TextScoreMemo | None = None,
    judged: Sequence[str] = (),
    similarity: SimilarityScorer | None = None,
    slices: Mapping[int, tuple[str, ...]] | None = None,
) -> list[Record]:
    """The records with their metrics: only those that apply to each question.

    ``cases`` and ``corpus`` (the dataset's) give custom metrics the question as the
    pipeline got it and the texts of retrieved passage ids; without them a custom metric
    sees the record's own view of the question. A custom metric whose value the record
    already carries (a verdict computed while the question was answered) is not called
    again. The records of the questions in ``scored`` already carry their metrics (with
    the same settings) and are kept as they are. ``memo`` holds the text metrics of pairs
    scored before (by this or an earlier run) and keeps those scored now, where it serves
    ``profile`` and ``tokenizer``. ``judged`` names the judged metrics the run measures
    (their values are the records' verdicts; a verdict that failed gives no value: the
    question is listed as an error for it); ``similarity`` scores ``similarity`` when the
    run measures it. ``slices`` (qid -> slice keys) sets each record's slices.

    A question answered R times (``Record.repeats``) has each answer scored; its
    ``scores`` are each metric's R values and its ``metrics`` their means (a metric
    some answer lacks, such as a judged metric whose verdict failed, is left out).
    """
    if scored:
        todo = [r for r in records if r.key not in scored]
        done = score_records(todo, profile=profile, custom=custom, tokenizer=tokenizer,
                             cases=cases, corpus=corpus, memo=memo, judged=judged,
                             similarity=similarity, slices=slices)
        fresh = {id(source): record for source, record in zip(todo, done, strict=True)}
        return [fresh.get(id(r), r) for r in records]
    if any(r.repeats for r in records):
        # Every answer is scored in one batch (the text metrics' memo and the similarity
        # model see them all at once), then each question's answers are folded.
        flat = [answer for r in records
                for answer in ((replace(r, repeats=()), *r.repeats) if r.repeats else (r,))]
        done = score_records(flat, profile=profile, custom=custom, tokenizer=tokenizer,
                             cases=cases, corpus=corpus, memo=memo, judged=judged,
                             similarity=similarity, slices=slices)
        folded: list[Record] = []
        at = 0
        for record in records:
            folded.append(fold_answers(done[at:at + record.answers]))
            at += record.answers
        return folded
    ok = [r for r in records if not r.error]
    inputs = [r.metric_input() for r in ok]
    grades = [dict(r.grades) or None for r in ok]
    if not inputs:
        rows: list[dict[str, float]] = []
    elif memo is not None and memo.serves(profile, tokenizer):
        rows = memo.score(inputs, grades, [r.has_answer for r in ok])
    else:
        rows = score(inputs, profile=profile, grades=grades, tokenizer=tokenizer)
    similar: dict[int, float] = {}
    if similarity is not None:
        answered = [r for r in ok if r.has_answer]
        similar = dict(zip((id(r) for r in answered), similarity.score(
            [(r.generated_text, r.generated_gt) for r in answered]), strict=True))
    with_metrics: dict[int, Record] = {}
    for record, metric_input, row in zip(ok, inputs, rows, strict=True):
        has_qrels = bool(record.retrieval_gt)
        kept = {
            name: float(row[name])
            for name in METRIC_NAMES
            if (name in RETRIEVAL_METRICS and has_qrels)
            or (name in GENERATION_METRICS and record.has_answer)
        }
        if id(record) in similar:
            kept[SIMILARITY] = similar[id(record)]
        for name in judged:
            verdict = record.verdict(name)
            if verdict is not None and verdict.score is not None:
                kept[name] = verdict.score
        metric_case: MetricCase | None = None
        for metric in custom:
            verdict = record.verdict(metric.name)
            if verdict is not None and verdict.score is not None:
                kept[metric.name] = verdict.score  # computed while it was answered
                continue
            applies = (
                metric.kind == "all"
                or (metric.kind == "retrieval" and has_qrels)
                or (metric.kind == "generation" and record.has_answer)
            )
            if applies:
                if metric_case is None:
                    metric_case = metric_case_of(record, metric_input, cases, corpus)
                kept[metric.name] = custom_value(metric, metric_case, record.qid)
        with_metrics[id(record)] = record.scored(
            kept, None if slices is None else slices.get(record.qid, ()))
    # Not with_metrics.get(id(r), r.scored({})): that would copy every record a second time.
    return [with_metrics[id(r)] if id(r) in with_metrics
            else r.scored({}, None if slices is None else slices.get(r.qid, ()))
            for r in records]


def fold_answers(answers: Sequence[Record]) -> Record:
    """One question's scored answers (the first, then its repeats) as its record: the
    first answer's fields, each metric's values in ``scores`` and their mean in
    ``metrics``; the repeats keep their answers, their values being in ``scores``."""
    first = answers[0]
    if len(answers) == 1:
        return first
    rest = answers[1:]
    scores = {name: (value, *(answer.metrics[name] for answer in rest))
              for name, value in first.metrics.items()
              if all(name in answer.metrics for answer in rest)}
    # Equal values keep their value exactly (a deterministic pipeline answers alike).
    means = {name: values[0] if values.count(values[0]) == len(values)
             else math.fsum(values) / len(values) for name, values in scores.items()}
    return replace(first, metrics=means, scores=scores,
                   repeats=tuple(answer.scored({}) for answer in rest))


def metric_case_of(
    record: Record, metric_input: MetricInput, cases: Mapping[int, QAPair] | None,
    corpus: Mapping[int, str] | None,
) -> MetricCase:
    """What a custom metric is given of ``record``'s question."""
    case = cases.get(record.qid) if cases is not None else None
    if case is None:
        pids = tuple(sorted(record.relevant))
        case = QAPair(qid=record.qid, question=record.question, pids=pids, passages=(),
                      aid=None, answer=record.generated_gt if record.has_answer else None,
                      grades=tuple(record.grades.get(pid, 1.0) for pid in pids))
    # A bare passage id stands for its passage's corpus text ("" when the corpus lacks it).
    texts = tuple(
        item if isinstance(item, str) else (corpus or {}).get(item, "")
        for item in record.retrieved
    )
    return MetricCase(
        retrieval_gt=metric_input.retrieval_gt,
        retrieval_ids=metric_input.retrieval_ids,
        generated_text=metric_input.generated_text,
        generated_gt=metric_input.generated_gt,
        case=case,
        retrieved_texts=texts,
        meta=dict(record.meta),
        variant=record.variant,
    )


def custom_value(metric: CustomMetric, metric_case: MetricCase, qid: int) -> float:
    """The value ``metric`` gives the question; see :func:`checked_value`."""
    return checked_value(metric, metric.function(metric_case), qid)


def checked_value(metric: CustomMetric, produced: object, qid: int) -> float:
    """What ``metric`` returned for question ``qid`` as its value (a
    :class:`MetricValue`'s value); a one-line :class:`ConfigError` when it is not a
    finite number within the metric's bounds."""
    value = produced.value if isinstance(produced, MetricValue) else produced
    wanted = f"return a finite number in {metric.range_text}"
    if metric.bounds != (0.0, 1.0):
        wanted += " (CustomMetric bounds)"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"custom metric {metric.name!r} returned {value!r} for q{qid}; {wanted}")
    number = float(value)
    if not math.isfinite(number) or metric.out_of_bounds(number):
        raise ConfigError(f"custom metric {metric.name!r} returned {number!r} for q{qid}; "
                          f"{wanted}")
    return number


class RecordScorer:
    """Scores records as :func:`build_run` does, and remembers what it scored.

    The shell scores records while the run goes (for the progress report's running
    means, a ``-v`` line, JUnit properties, per-question floors); :meth:`carried` then
    hands the end of the run those records with their metrics, so no record is scored
    twice. A record is known by identity: the very record object that was scored, or
    the scored copy :meth:`score` returned (any other record of the same question, say
    an error record that took its place, is scored afresh). ``remember=False`` (an xdist
    worker, whose records are scored again where they are gathered) keeps nothing.
    """

    def __init__(self, plan: RunPlan, dataset: Dataset, *, remember: bool = True,
                 memo: TextScoreMemo | None = None,
                 similarity: SimilarityScorer | None = None) -> None:
        self._plan = plan
        self._dataset = dataset
        self._text_memo = memo
        self._similarity = similarity
        self._cases = _custom_cases(plan, dataset)  # once: a -v run scores item by item
        self._remember = remember
        # question -> (the record that was scored, the scored copy)
        self._memo: dict[QuestionKey, tuple[Record, Record]] = {}

    def score(self, records: Sequence[Record]) -> list[Record]:
        """``records`` with their metrics (each record scored at most once).

        Raises :class:`ConfigError` when a custom metric misbehaves; nothing of that
        batch is remembered then.
        """
        out: list[Record | None] = [self._known(r) for r in records]
        todo = [r for r, known in zip(records, out, strict=True) if known is None]
        if todo:
            fresh = iter(_score_for_run(todo, self._plan, self._dataset, self._cases,
                                        memo=self._text_memo, similarity=self._similarity))
            for position, known in enumerate(out):
                if known is None:
                    source = records[position]
                    scored = next(fresh)
                    if self._remember:
                        self._memo[source.key] = (source, scored)
                    out[position] = scored
        return [r for r in out if r is not None]

    def carried(self, records: Sequence[Record]) -> tuple[list[Record], frozenset[QuestionKey]]:
        """``records`` with the metrics already computed for them, and the questions
        whose records those are (what :attr:`EvalInputs.scored` takes)."""
        out: list[Record] = []
        keys: set[QuestionKey] = set()
        for record in records:
            known = self._known(record)
            if known is None:
                out.append(record)
            else:
                out.append(known)
                keys.add(record.key)
        return out, frozenset(keys)

    def _known(self, record: Record) -> Record | None:
        memo = self._memo.get(record.key)
        if memo is None or (memo[0] is not record and memo[1] is not record):
            return None
        return memo[1]


class TextScoreStore(Protocol):
    """Where :class:`TextScoreMemo` keeps the text metrics (the answer cache's database)."""

    def get_text_scores(self, keys: Sequence[bytes]) -> Mapping[bytes, Sequence[float]]:
        """The stored six values of those ``keys`` that have them."""

    def put_text_scores(self, entries: Sequence[tuple[bytes, Sequence[float]]]) -> None:
        """Store ``(key, six values)`` entries."""


class TextScoreMemo:
    """The text metrics of pairs scored before, by this run or an earlier one.

    The six text metrics of an (answer, reference) pair depend on nothing but the two
    texts, the profile, the tokenizer and the code (:mod:`pytest_ragev.metrics.memo`
    makes a key of all of these), so a rerun whose answers come back the same (from the
    answer cache, or from a pipeline that answers the same) reads them instead of
    tokenizing both texts again. Never used with a custom tokenizer (its code is the
    project's, and may change without anything a key could see), nor while the jieba
    dictionary that segments Chinese is changed in this process (a word added through
    ``jieba_tokenizer().add_word``, a dictionary loaded): such batches are scored as
    usual and not kept. Pairs that cost nothing to score (an empty answer, an answer
    equal to its reference) and questions without a reference answer are not kept.

    ``store`` is told which keys to look up and what to keep; a store that fails (a
    full disk) costs only the saving. ``reused`` and ``kept`` count the pairs read from
    it and written to it.
    """

    def __init__(self, store: TextScoreStore, *, profile: str, tokenizer: TokenizerChoice) -> None:
        self._store = store
        self._profile = profile
        self._tokenizer = tokenizer
        self._context = (None if tokenizer.name == "custom"
                         else scores_context(profile, tokenizer.identity))
        self.reused = 0
        self.kept = 0

    def serves(self, profile: str, tokenizer: Tokenizer | None) -> bool:
        """Whether this memo holds scores of ``profile`` with ``tokenizer``."""
        return (self._context is not None and profile == self._profile
                and tokenizer is self._tokenizer.tokenizer)

    def score(self, inputs: Sequence[MetricInput], grades: Sequence[Mapping[int, float] | None],
              answered: Sequence[bool]) -> list[dict[str, float]]:
        """:func:`~pytest_ragev.metrics.score` of ``inputs`` (all twelve metrics), with the
        text metrics of the pairs known to the store read from it, and those of the
        others (where ``answered``: the question has a reference answer) stored."""
        keys = self._keys(inputs, answered)
        wanted = [key for key in keys if key is not None]
        known = self._store.get_text_scores(wanted) if wanted else {}
        fresh = [n for n, key in enumerate(keys) if key is None or key not in known]
        tokenizer = self._tokenizer.tokenizer
        if not known:
            rows = score(inputs, profile=self._profile, grades=grades, tokenizer=tokenizer)
        else:
            rows = score(inputs, profile=self._profile, grades=grades, metrics=RETRIEVAL_METRICS)
            for n, text_row in zip(fresh, score([inputs[n] for n in fresh], profile=self._profile,
                                                metrics=GENERATION_METRICS, tokenizer=tokenizer),
                                   strict=True):
                rows[n].update(text_row)
            for row, key in zip(rows, keys, strict=True):
                values = known.get(key) if key is not None else None
                if values is not None:
                    row.update(zip(GENERATION_METRICS, values, strict=True))
            self.reused += len(inputs) - len(fresh)
        entries = [(key, [rows[n][name] for name in GENERATION_METRICS])
                   for n in fresh if (key := keys[n]) is not None]
        if entries:
            self._store.put_text_scores(entries)
            self.kept += len(entries)
        return rows

    def _keys(self, inputs: Sequence[MetricInput], answered: Sequence[bool]) -> list[bytes | None]:
        context = self._context
        if context is None or not jieba_unchanged():
            return [None] * len(inputs)
        keys: list[bytes | None] = []
        for item, wanted in zip(inputs, answered, strict=True):
            hypothesis, reference = item.generated_text, item.generated_gt
            keep = wanted and hypothesis and reference and hypothesis != reference
            keys.append(pair_key(context, hypothesis, reference) if keep else None)
        return keys


def _custom_cases(plan: RunPlan, dataset: Dataset) -> dict[int, QAPair] | None:
    """The questions by qid, for the custom metrics (``None`` when there are none)."""
    return {pair.qid: pair for pair in dataset.pairs} if plan.custom_metrics else None


def _score_for_run(
    records: Sequence[Record], plan: RunPlan, dataset: Dataset,
    cases: Mapping[int, QAPair] | None, scored: frozenset[QuestionKey] = frozenset(),
    memo: TextScoreMemo | None = None, similarity: SimilarityScorer | None = None,
) -> list[Record]:
    """:func:`score_records` with the plan's metrics and the dataset's questions and
    passages: the one way a run's records are scored, during the run and at its end.
    ``similarity`` scores ``similarity`` (the plan measures it only with one)."""
    # The questions' slices only when a record is scored here: a merged run's records,
    # as their shards scored them, carry theirs (and telling the languages of 100,000
    # questions apart takes a second of an end that scores nothing).
    fresh = any(record.key not in scored for record in records)
    return score_records(
        records, profile=plan.profile, custom=plan.custom_metrics,
        tokenizer=plan.tokenizer.tokenizer, cases=cases, corpus=dataset.corpus, scored=scored,
        memo=memo, judged=plan.judged, similarity=similarity if plan.similarity else None,
        slices=dataset_slices(dataset) if fresh else None,
    )


class RunningMeans:
    """The base configuration's means over the questions answered so far.

    The progress report shows them while a run goes. :meth:`add` counts records already
    scored (by a :class:`RecordScorer`, which the end of the run reuses), so keeping the
    means up to date costs no scoring of its own, whatever the number of progress writes.
    """

    def __init__(self, plan: RunPlan) -> None:
        self._plan = plan
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def add(self, scored: Sequence[Record]) -> None:
        """Count the metrics of ``scored`` records (the base configuration's only; errors
        have no metrics)."""
        for record in scored:
            if record.variant is not None or record.error:
                continue
            for name, value in record.metrics.items():
                self._sums[name] = self._sums.get(name, 0.0) + value
                self._counts[name] = self._counts.get(name, 0) + 1

    def summary(self) -> dict[str, MetricSummary]:
        """The means so far, in report order (metrics with no value yet left out)."""
        directions = {m.name: m.direction for m in self._plan.custom_metrics}
        return {
            name: MetricSummary(name=name, mean=self._sums[name] / self._counts[name],
                                n=self._counts[name], direction=directions.get(name, "higher"))
            for name in self._plan.metric_names if self._counts.get(name)
        }


def build_run(
    records: Sequence[Record],
    *,
    plan: RunPlan,
    dataset: Dataset,
    variant: str | None,
    params: Mapping[str, Any],
    scored: frozenset[QuestionKey] = frozenset(),
    memo: TextScoreMemo | None = None,
    similarity: SimilarityScorer | None = None,
) -> RunResult:
    """The :class:`RunResult` of one configuration from its records (in qid order); the
    records of the questions in ``scored`` already carry their metrics."""
    samples = _score_for_run(sorted(records, key=lambda r: r.qid), plan, dataset,
                             _custom_cases(plan, dataset), scored, memo, similarity)
    summary = aggregate(
        [s.metrics for s in samples if s.error is None],
        names=list(plan.metric_names),
        directions={m.name: m.direction for m in plan.custom_metrics},
    )
    return RunResult(
        dataset_id=dataset.dataset_id,
        fingerprint=dataset.fingerprint,
        dataset_stats=dataset.stats.to_json(),
        profile=plan.profile,
        params=dict(params),
        params_hash=sha256_json(params),
        samples=samples,
        summary=summary,
        variant=variant,
        tokenizer=plan.tokenizer.identity,
        scorers=dict(plan.scorers),
    )

