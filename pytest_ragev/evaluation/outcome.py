"""What a run decided, as one value every report renders: :class:`Outcome`.

With the pieces it is made of: :class:`RunFacts` (what the shell saw during the run),
:class:`QuestionError` (a question that raised), :class:`ChunkShare` (retrieved texts
that matched no passage) and :class:`LowestQuestions` (the weakest questions).
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_ragev.config import Pricing
from pytest_ragev.core.fmt import percent
from pytest_ragev.core.paths import relative_text
from pytest_ragev.core.record import Record
from pytest_ragev.core.results import RunResult
from pytest_ragev.core.shard import ShardSpec
from pytest_ragev.evaluation.repeats import RepeatSummary
from pytest_ragev.evaluation.slices import RunSlices
from pytest_ragev.gate.compare import Comparison
from pytest_ragev.gate.thresholds import ThresholdResult
from pytest_ragev.gate.workflow import GateOutcome


@dataclass(frozen=True)
class RunFacts:
    """What happened during the run, as the shell saw it.

    ``interrupted`` says how a run that did not finish was stopped (``"interrupted by
    SIGTERM"``, ``"stopped early (...)"``, ``"interrupted"``); ``None`` when it finished.
    """

    task_id: str = ""
    start_time: str = ""
    total: int = 0
    finished: int = 0
    interrupted: str | None = None
    duplicates: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    #: pytest's rootdir: paths in the reports are shown relative to it when they lie under it.
    rootdir: str = ""
    #: Lines the shell found worth a warning before any question ran (unread knobs).
    warnings: tuple[str, ...] = ()
    #: Seconds from the start of the run to the end of its answering (``None``: not
    #: known, e.g. a saved report read back).
    duration_s: float | None = None
    #: Lines the shell found worth saying that are not warnings (how many calls ran at
    #: once, when it chose that itself).
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuestionError:
    """A question whose pipeline raised (or whose item failed), or whose judged metric
    could not be judged (``metric`` names it): the Errors section's row."""

    qid: int
    question: str
    error: str
    variant: str | None = None
    metric: str | None = None

    @property
    def kind(self) -> str:
        """The error's type: the exception class of ``"TimeoutError: ..."``."""
        return error_kind(self.error)

    @property
    def label(self) -> str:
        """``q7``, ``q7 [k10]`` for a variant's question, ``q7 correctness`` for a judged
        metric that failed."""
        label = f"q{self.qid}" if self.variant is None else f"q{self.qid} [{self.variant}]"
        return label if self.metric is None else f"{label} {self.metric}"


def question_errors(runs: Sequence[RunResult]) -> tuple[QuestionError, ...]:
    """Every error of ``runs``: the questions that raised, then, question by question,
    the judged metrics that could not be judged."""
    errors: list[QuestionError] = []
    for run in runs:
        for sample in run.samples:
            if sample.error is not None:
                errors.append(QuestionError(qid=sample.qid, question=sample.question,
                                            error=sample.error, variant=sample.variant))
                continue
            if not sample.verdicts and not sample.repeats:
                continue  # nothing judged: most questions of most runs
            # Any answer's (with --ragev-repeat): a metric some answer could not be judged
            # on has no value for the question. Once per metric.
            failed = {verdict.metric: verdict.error for answer in sample.every_answer
                      for verdict in reversed(answer.verdicts) if verdict.error is not None}
            errors += [QuestionError(qid=sample.qid, question=sample.question, error=error,
                                     variant=sample.variant, metric=metric)
                       for metric, error in failed.items()]
    return tuple(errors)


# "TimeoutError: ...", "requests.exceptions.ConnectionError: ...", "KnowledgeBaseFailed: ...".
_KIND = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
_CRASH = re.compile(r"^worker '[^']*' crashed")


def error_kind(line: str) -> str:
    """The type of an error line: its exception class (without the module), ``worker
    crashed`` for a dead xdist worker, ``other`` for a line that names no class."""
    if _CRASH.match(line):
        return "worker crashed"
    match = _KIND.match(line.strip())
    return match.group(1).rsplit(".", 1)[-1] if match else "other"


def count_kinds(errors: Sequence[QuestionError]) -> list[tuple[str, int]]:
    """``[("TimeoutError", 3), ("RuntimeError", 1)]``: most frequent first, then by name."""
    counts = Counter(error.kind for error in errors)
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))


@dataclass(frozen=True)
class ChunkShare:
    """Retrieved chunk texts of a run and how many matched no corpus passage.

    ``chunks`` counts the retrieved items attributed by their text (chunk texts, chunk
    objects without a passage id): a pipeline that returns ids has none. ``first`` is
    the first unattributed chunk, in qid order.
    """

    chunks: int = 0
    unattributed: int = 0
    first: str | None = None

    @property
    def share(self) -> float | None:
        """``unattributed / chunks``; ``None`` when no chunk was attributed by text."""
        return self.unattributed / self.chunks if self.chunks else None

    @property
    def text(self) -> str:
        """``46/89 retrieved chunks (52%) matched no corpus passage``."""
        return (f"{self.unattributed}/{self.chunks} retrieved chunks ({percent(self.share)}) "
                "matched no corpus passage")

    def warning(self) -> str | None:
        """The summary's warning when some chunk matched no passage, else ``None``."""
        if not self.unattributed:
            return None
        first = f' (first: "{self.first}")' if self.first else ""
        return f"{self.text}{first}; return passage ids or Chunk(text, passage_id)"


def chunk_share(samples: Sequence[Record]) -> ChunkShare:
    """The attribution counts of ``samples`` added up."""
    first = next((s.unattributed_example for s in samples if s.unattributed_example), None)
    return ChunkShare(
        chunks=sum(s.chunks for s in samples),
        unattributed=sum(s.unattributed for s in samples),
        first=first,
    )


#: Below this a value is not perfect: the weknora profile's ROUGE-L F adds an epsilon that
#: leaves an exact match at 0.999999995.
PERFECT = 1.0 - 1e-6

#: The metrics whose lowest-scoring questions every report lists without a baseline.
LOWEST_BY = ("recall", "rougel")


@dataclass(frozen=True)
class LowestQuestions:
    """The lowest-scoring questions of one run on one metric, lowest first (ties by qid).

    Questions at the metric's best value (1 for the twelve) are left out: they are not
    weak. ``n`` is how many questions the metric applies to.
    """

    metric: str
    samples: tuple[Record, ...]
    n: int
    variant: str | None = None


def lowest_questions(run: RunResult, metric: str, limit: int) -> LowestQuestions:
    """The ``limit`` questions of ``run`` that score lowest on ``metric``."""
    scored = [s for s in run.samples if metric in s.metrics]
    # nsmallest is sorted(...)[:limit], without sorting 100,000 questions for a dozen.
    weak = heapq.nsmallest(max(limit, 0), (s for s in scored if s.metrics[metric] < PERFECT),
                           key=lambda s: (s.metrics[metric], s.qid))
    return LowestQuestions(metric=metric, samples=tuple(weak), n=len(scored),
                           variant=run.variant)


@dataclass(frozen=True)
class ShardPart:
    """What a sharded run (``--ragev-shard K/N``) answered: its share of the questions.

    ``questions`` are the qids the shard owns (in qid order) out of the
    ``dataset_questions`` its dataset has, assigned as ``assignment`` says (``hash``, or
    ``costs <digest>`` from a balance report); ``configurations`` the configurations it
    ran (``None``: the base one), ``plugin_version`` the pytest-ragev that ran it and
    ``config`` its config file (as reports show paths). ``custom_metrics`` describes the
    custom metrics the run measured (name, direction, kind, bounds), which the merge
    needs to judge the merged run as the project's hooks would. Its partial report is
    merged with the other shards' by ``ragev report merge``, which gates once.
    """

    spec: ShardSpec
    questions: tuple[int, ...]
    dataset_questions: int
    assignment: str = "hash"
    configurations: tuple[str | None, ...] = (None,)
    plugin_version: str = ""
    config: str = ""
    custom_metrics: tuple[Mapping[str, object], ...] = ()

    @property
    def line(self) -> str:
        """The one line a sharded run prints: what it answered, and that it was not gated."""
        return (f"ragev: {self.spec.words}: {len(self.questions)} of {self.dataset_questions} "
                "questions answered, written as a partial report; not gated: merge every "
                "shard's report with `ragev report merge` and gate the merged run")


@dataclass(frozen=True)
class Outcome:
    """What the run decided: the runs, every check, the lines to print and report.

    The one input of every report: the terminal summary, the JSON report, Markdown,
    HTML and the JUnit properties all render an ``Outcome`` (a saved report or baseline
    read back is one too: :func:`~pytest_ragev.report.reader.outcome_from_report`).
    Its lines are as every report writes them: paths under the rootdir or the config
    folder are relative (:func:`~pytest_ragev.evaluation.evaluate` makes them so).

    ``runs`` holds the base run first, then the variants (only variants when the base
    configuration did not run: see :attr:`base_ran`). ``error_list`` names every
    question that raised (``errors`` counts them); ``lowest`` holds the base run's
    lowest-scoring questions by :data:`LOWEST_BY`, and ``passages`` the corpus texts of
    the passages those and the regressed questions name, so a report can show them.
    ``baseline_shown`` and ``report_html`` are the baseline and HTML report paths as
    reports write them.
    """

    runs: tuple[RunResult, ...]
    facts: RunFacts
    thresholds: tuple[ThresholdResult, ...] = ()
    gate: GateOutcome = field(default_factory=GateOutcome)
    failures: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    errors: int = 0
    fallbacks: int = 0
    #: Set when the run stopped early: says how far it got (it fails the verdict).
    interrupted: str | None = None
    error_list: tuple[QuestionError, ...] = ()
    lowest: tuple[LowestQuestions, ...] = ()
    passages: Mapping[int, str] = field(default_factory=dict)
    baseline_shown: str | None = None
    report_html: str | None = None
    #: qid -> content hash of each question (``dataset.question_hash``), which the JSON
    #: report records per sample so that saved files pair questions after a dataset
    #: edit; empty when no baseline and no JSON report needed them.
    question_hashes: Mapping[int, str] = field(default_factory=dict)
    #: ``[pricing]``: turns the run's tokens into money in the usage lines.
    pricing: Pricing | None = None
    #: Each run's slices (languages, tags) with their means, in the runs' order.
    slices: tuple[RunSlices, ...] = ()
    #: What answering each question R > 1 times showed of the first run (``None``: once).
    repeats: RepeatSummary | None = None
    #: Set for a sharded run (``--ragev-shard``): its share; the run was not gated.
    shard: ShardPart | None = None

    @property
    def failed(self) -> bool:
        """A failed check, a question that raised, or a run that did not finish."""
        return bool(self.failures) or self.errors > 0 or self.interrupted is not None

    @property
    def passed(self) -> bool:
        """The verdict: not :attr:`failed`."""
        return not self.failed

    def verdict_failures(self) -> list[str]:
        """The failed checks, the line naming the questions that raised, then the
        interruption line."""
        line = errors_line(self.error_list)
        return [*self.failures, *([line] if line else []),
                *([self.interrupted] if self.interrupted else [])]

    @property
    def base(self) -> RunResult | None:
        """The first run: the base configuration's, or the first variant's when only
        variants ran."""
        return self.runs[0] if self.runs else None

    @property
    def base_ran(self) -> bool:
        """Whether the base configuration ran (the first run is not a variant)."""
        return bool(self.runs) and self.runs[0].variant is None

    @property
    def variants(self) -> list[RunResult]:
        """The runs after the first: the variants when :attr:`base_ran`, else all
        variants but the first."""
        return list(self.runs[1:])

    @property
    def comparison(self) -> Comparison | None:
        """The base run's comparison with its baseline run, if it was compared."""
        return next((c for c in self.gate.comparisons if c.variant is None), None)

    @property
    def variant_comparisons(self) -> list[Comparison]:
        """The variants' comparisons with their own baseline runs."""
        return [c for c in self.gate.comparisons if c.variant is not None]

    @property
    def baseline(self) -> RunResult | None:
        """The baseline's run of the base configuration, if it was compared."""
        return self.gate.baseline_runs.get(None)

    def slices_of(self, variant: str | None) -> RunSlices | None:
        """The slices of the run of ``variant`` (``None``: the base configuration)."""
        return next((item for item in self.slices if item.variant == variant), None)

    @property
    def slice_regressed(self) -> bool:
        """Whether a slice regressed against the baseline (or missed a threshold):
        the terminal then shows the slices unasked."""
        return (any(c.slice_regressions for c in self.gate.comparisons)
                or any(t.slice is not None and not t.passed for t in self.thresholds))

    @property
    def chunks(self) -> ChunkShare:
        """The attribution counts of every run together."""
        return chunk_share([s for run in self.runs for s in run.samples])

    def shown(self, roots: Sequence[Path]) -> Outcome:
        """This outcome with the absolute paths under ``roots`` in its lines made
        relative, as every report writes them (the gate names the files it read and
        wrote by the paths it opened)."""

        def lines(values: Sequence[str]) -> tuple[str, ...]:
            return tuple(relative_text(line, roots) for line in values)

        def line(value: str | None) -> str | None:
            return None if value is None else relative_text(value, roots)

        gate = replace(self.gate, failures=lines(self.gate.failures),
                       notes=lines(self.gate.notes), not_compared=line(self.gate.not_compared),
                       write_error=line(self.gate.write_error))
        return replace(self, gate=gate, failures=lines(self.failures), notes=lines(self.notes),
                       warnings=lines(self.warnings), interrupted=line(self.interrupted))


#: Questions a verdict line names before "and N more".
NAMED_ERRORS = 10


def errors_line(errors: Sequence[QuestionError]) -> str | None:
    """``ragev: 3 questions raised an error: q1, q4, q5 [k10] (TimeoutError 2, ValueError 1)``."""
    if not errors:
        return None
    names = ", ".join(e.label for e in errors[:NAMED_ERRORS])
    if len(errors) > NAMED_ERRORS:
        names += f" and {len(errors) - NAMED_ERRORS} more"
    kinds = ", ".join(f"{kind} {count}" for kind, count in count_kinds(errors))
    noun = "question raised an error" if len(errors) == 1 else "questions raised an error"
    return f"ragev: {len(errors)} {noun}: {names} ({kinds})"

