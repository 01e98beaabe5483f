"""What is computed of a question while it is answered: its judged metrics and its
custom metrics, in the run's pool of calls.

A judge call (or a custom metric that asks a model) costs as much as the pipeline's own
call. Run at the end, one after the other, they took most of a run's time; run here,
they go in the same threads as the answers (``--ragev-concurrency``), and their values
travel on the record as :class:`~pytest_ragev.core.types.Verdict` values, which scoring
reads instead of computing them again.

A custom metric that raises, or returns what it may not, and a judge that cannot judge
at all (its key refused, its requests rejected) stop the run at the first question they
fail on: :class:`AssessmentFailed`, one line naming the metric and the cause. A judge
whose service does not answer gives that question an error for the metric instead
(listed like a pipeline's error; the run goes on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.record import Record
from pytest_ragev.core.types import CustomMetric, MetricValue, QAPair, Verdict
from pytest_ragev.evaluation.judge import Judge, JudgedTexts, JudgeFailed, passages_of
from pytest_ragev.evaluation.scoring import checked_value, metric_case_of


class AssessmentFailed(RagevError):
    """A custom metric or the judge cannot score: the run stops (exit status 4)."""


class Assessor:
    """Computes a record's judged and custom metrics (thread-safe: the pool calls it).

    ``judge`` judges the metrics named in ``judged``; ``custom`` are the hooks' custom
    metrics; ``cases`` and ``corpus`` are the dataset's questions and passages (what a
    custom metric is shown, and the texts of retrieved passage ids).
    """

    def __init__(self, *, judge: Judge | None, judged: Sequence[str],
                 custom: Sequence[CustomMetric], cases: Mapping[int, QAPair],
                 corpus: Mapping[int, str]) -> None:
        self.judge = judge
        self.judged = tuple(judged) if judge is not None else ()
        self.custom = tuple(custom)
        self._cases = cases
        self._corpus = corpus

    @property
    def active(self) -> bool:
        """Whether there is anything to compute."""
        return bool(self.judged or self.custom)

    def assess(self, record: Record) -> Record:
        """``record`` with its verdicts (a question that raised has none)."""
        if record.error is not None or not self.active:
            return record
        verdicts = [*self._judged(record), *self._customs(record)]
        return replace(record, verdicts=tuple(verdicts)) if verdicts else record

    def _judged(self, record: Record) -> list[Verdict]:
        if self.judge is None or not self.judged:
            return []
        case = self._cases.get(record.qid)
        texts = JudgedTexts(
            question=case.question if case is not None else record.question,
            answer=record.generated_text,
            reference=record.generated_gt if record.has_answer else "",
            passages=passages_of(record.retrieved, self._corpus),
        )
        verdicts = []
        for metric in self.judged:
            if metric == "correctness" and not record.has_answer:
                continue  # no reference to judge against
            try:
                verdicts.append(self.judge.verdict(metric, texts))
            except JudgeFailed as error:
                raise AssessmentFailed(f"{error} (at q{record.qid}; the run stopped there)"
                                       ) from None
        return verdicts

    def _customs(self, record: Record) -> list[Verdict]:
        if not self.custom:
            return []
        has_qrels = bool(record.retrieval_gt)
        case = None
        verdicts = []
        for metric in self.custom:
            applies = (metric.kind == "all"
                       or (metric.kind == "retrieval" and has_qrels)
                       or (metric.kind == "generation" and record.has_answer))
            if not applies:
                continue
            if case is None:
                case = metric_case_of(record, record.metric_input(), self._cases, self._corpus)
            try:
                produced = metric.function(case)
            except Exception as error:
                raise AssessmentFailed(
                    f"custom metric {metric.name!r} raised {type(error).__name__}: {error} "
                    f"on q{record.qid}; fix the metric (the run stopped at the first question "
                    "it failed on)"
                ) from None
            try:
                value = checked_value(metric, produced, record.qid)
            except RagevError as error:
                raise AssessmentFailed(str(error)) from None
            extra = produced if isinstance(produced, MetricValue) else None
            verdicts.append(Verdict(
                metric=metric.name, score=value,
                reason=(extra.reason or "") if extra is not None else "",
                prompt_tokens=extra.prompt_tokens if extra is not None else 0,
                completion_tokens=extra.completion_tokens if extra is not None else 0,
            ))
        return verdicts
