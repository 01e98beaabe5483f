"""The end of a run as one pure step: the session's records in, the decision out.

:class:`RunPlan` is everything the settings decide, resolved once when a run is
activated (the selected variants, the profile, the paths, the ``[thresholds]`` checks
and the ``[gate]`` rules). At session end the plugin shell gathers an
:class:`EvalInputs` (the plan, the dataset, the records, what happened during the run)
and :func:`evaluate` returns an :class:`Outcome`: the scored runs, the threshold and
gate results, the failure lines and notes. Only the gate touches a file (the baseline);
the shell writes the reports and sets the exit status.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pytest_ragev.config import RagevConfig, RunOptions, select_variants, variant_settings
from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.record import QuestionKey, Record
from pytest_ragev.core.redact import redact
from pytest_ragev.core.results import Direction, MetricSummary, RunResult
from pytest_ragev.core.segment import jieba_unchanged
from pytest_ragev.core.types import (
    GENERATION_METRICS,
    METRIC_NAMES,
    RETRIEVAL_METRICS,
    CustomMetric,
    MetricCase,
    MetricInput,
    PipelineSettings,
    QAPair,
)
from pytest_ragev.core.version import __version__
from pytest_ragev.dataset import Dataset, corpus_fingerprint
from pytest_ragev.gate.rules import GateRules
from pytest_ragev.gate.thresholds import (
    MaxValue,
    MinValue,
    ThresholdResult,
    check_question,
    check_thresholds,
    thresholds_from_table,
)
from pytest_ragev.gate.workflow import GateInputs, GateOutcome, run_gate
from pytest_ragev.metrics import (
    TokenizerChoice,
    aggregate,
    audit_tokens,
    custom_tokenizer,
    earlier_tokenizers,
    resolve_tokenizer,
    score,
)
from pytest_ragev.metrics.memo import pair_key, scores_context

#: A tokenizer for the generation metrics: text -> sentences of tokens.
Tokenizer = Callable[[str], list[list[str]]]

#: Told the name of each end-of-run phase as it starts (``"scoring 100000 answers"``,
#: ``"gate"``, ``"baseline write"``), so the shell can print a progress line for it.
Phase = Callable[[str], None]


def _no_phase(name: str) -> None:
    """The default :data:`Phase`: say nothing."""


#: Calls in flight by default for pipelines that wait on a service (chat, http, factory).
IO_BOUND_CONCURRENCY = 8

#: What the default number of calls in flight depends on: a pipeline that waits on a
#: service (``"service"``), the built-in one offline (``"builtin"``), or the project's own
#: code (``"project"``: conftest hooks).
PipelineKind = Literal["service", "builtin", "project"]


def default_concurrency(kind: PipelineKind = "project") -> int:
    """Calls in flight when nothing sets it.

    A pipeline that waits on a service gets :data:`IO_BOUND_CONCURRENCY` whatever the
    CPU count: its threads sleep on sockets, and a 2-core CI runner would otherwise ask
    one question at a time. The built-in pipeline offline gets 1: its keyword search
    holds the GIL and its vector scan already runs on every core, so more threads only
    contend (two threads ran it at 0.76-0.99x of one, keyword and hybrid alike, see
    docs/plugin.md). The project's own code gets one thread fewer than the CPUs, at
    least one: it may compute outside the GIL (numpy, a model).
    """
    if kind == "service":
        return IO_BOUND_CONCURRENCY
    if kind == "builtin":
        return 1
    return max((os.cpu_count() or 1) - 1, 1)


@dataclass(frozen=True)
class RunPlan:
    """The run's settings, resolved once: CLI > ini > config file > default.

    Build it with :meth:`build`, which validates everything that can be validated
    before a question runs and raises a one-line :class:`ConfigError` otherwise.
    """

    config: RagevConfig
    options: RunOptions
    variants: tuple[str | None, ...]
    custom_metrics: tuple[CustomMetric, ...] = ()
    rules: GateRules = field(default_factory=GateRules)
    thresholds: tuple[MinValue | MaxValue, ...] = ()
    item_thresholds: tuple[MinValue | MaxValue, ...] = ()
    tokenizer: TokenizerChoice = field(default_factory=lambda: resolve_tokenizer(
        "default", source="ragev.toml"))

    @classmethod
    def build(
        cls, config: RagevConfig, options: RunOptions,
        custom_metrics: Sequence[CustomMetric] = (),
        hooked_tokenizer: Tokenizer | None = None,
    ) -> RunPlan:
        """The plan of ``config`` run with ``options`` and the hooks' custom metrics.

        ``hooked_tokenizer`` is what a ``pytest_ragev_tokenizer`` hook returned: it wins
        over ``[metrics] tokenizer``.
        """
        custom = tuple(custom_metrics)
        if hooked_tokenizer is not None:
            tokenizer = custom_tokenizer(hooked_tokenizer, spec="pytest_ragev_tokenizer hook")
        else:
            tokenizer = resolve_tokenizer(config.tokenizer, source=config.source,
                                          base_dir=config.source.parent)
        names = [*METRIC_NAMES, *(m.name for m in custom)]
        rules = GateRules.from_config(config, metric_names=names)
        if options.no_baseline and options.update_baseline:
            raise ConfigError(
                "--ragev-no-baseline and --ragev-update-baseline contradict each other: "
                "drop --ragev-no-baseline to write the baseline"
            )
        directions: dict[str, Direction] = {name: "higher" for name in METRIC_NAMES}
        directions.update({m.name: m.direction for m in custom})
        thresholds = thresholds_from_table(
            config.thresholds, source=str(config.source), directions=directions
        )
        item_thresholds = thresholds_from_table(
            config.item_thresholds, source=str(config.source), directions=directions,
            where="[item_thresholds]",
        )
        for metric in custom:
            value = config.thresholds.get(metric.name)
            if value is not None and metric.out_of_bounds(value):
                raise ConfigError(
                    f"{config.source}: [thresholds] {metric.name} = {value:g} lies outside the "
                    f"values custom metric {metric.name!r} can take ({metric.range_text}); "
                    "use a number in that range or widen CustomMetric(bounds=...)"
                )
        return cls(
            config=config, options=options, variants=select_variants(config, options.variants),
            custom_metrics=custom, rules=rules, thresholds=tuple(thresholds),
            item_thresholds=tuple(item_thresholds), tokenizer=tokenizer,
        )

    @property
    def profile(self) -> str:
        """The metric profile: ``--ragev-profile``, else ``[metrics] profile``."""
        return self.options.profile or self.config.profile

    @property
    def concurrency(self) -> int:
        """Pipeline calls in flight at once (``1`` is strictly serial), for the project's
        own pipeline code; see :meth:`concurrency_for`."""
        return self.concurrency_for("project")

    def concurrency_for(self, kind: PipelineKind) -> int:
        """Calls in flight: ``--ragev-concurrency``, else ``[run] concurrency``, else
        :func:`default_concurrency` for the kind of pipeline."""
        value = self.options.concurrency or self.config.concurrency
        return value if value is not None else default_concurrency(kind)

    @property
    def report_json(self) -> Path | None:
        return self.options.report_json or self.config.report_json

    @property
    def report_markdown(self) -> Path | None:
        return self.options.report_markdown or self.config.report_markdown

    @property
    def report_html(self) -> Path | None:
        return self.options.report_html or self.config.report_html

    @property
    def baseline_path(self) -> Path | None:
        """The baseline to gate against; ``None`` without one or with ``--ragev-no-baseline``."""
        if self.options.no_baseline:
            return None
        return self.options.baseline or self.config.baseline_path

    @property
    def configured(self) -> tuple[str | None, ...]:
        """Every configuration of the config file: the base one, then the variants."""
        return (None, *(v.name for v in self.config.variants))

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The twelve metrics, then the custom ones, in report order."""
        return (*METRIC_NAMES, *(m.name for m in self.custom_metrics))

    def settings(self, variant: str | None) -> PipelineSettings:
        """The pipeline settings of the base configuration (``None``) or of a variant."""
        return variant_settings(self.config, variant)


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


@dataclass(frozen=True)
class EvalInputs:
    """Everything :func:`evaluate` reads.

    ``params`` holds each configuration's resolved, redacted settings snapshot (see
    :func:`run_params`). The text metrics' tokenizer is the plan's. ``scored`` names the
    questions whose records already carry the metrics this plan gives them (scored while
    the run went, by a :class:`RecordScorer` of the same plan and dataset): they are not
    scored again.
    """

    plan: RunPlan
    dataset: Dataset
    records: Sequence[Record]
    facts: RunFacts
    params: Mapping[str | None, Mapping[str, Any]]
    scored: frozenset[QuestionKey] = frozenset()
    #: The text metrics of earlier runs, where the shell keeps them (``None``: none).
    memo: TextScoreMemo | None = None


@dataclass(frozen=True)
class QuestionError:
    """A question whose pipeline raised (or whose item failed): the Errors section's row."""

    qid: int
    question: str
    error: str
    variant: str | None = None

    @property
    def kind(self) -> str:
        """The error's type: the exception class of ``"TimeoutError: ..."``."""
        return error_kind(self.error)

    @property
    def label(self) -> str:
        """``q7``, or ``q7 [k10]`` for a variant's question."""
        return f"q{self.qid}" if self.variant is None else f"q{self.qid} [{self.variant}]"


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


def percent(share: float | None) -> str:
    """``52%``, ``<1%``, ``>99%``: a share as every report writes it."""
    if share is None:
        return "n/a"
    if 0 < share < 0.005:
        return "<1%"
    if 0.995 < share < 1:
        return ">99%"
    return f"{share:.0%}"


def chunk_share(samples: Sequence[Record]) -> ChunkShare:
    """The attribution counts of ``samples`` added up."""
    first = next((s.unattributed_example for s in samples if s.unattributed_example), None)
    return ChunkShare(
        chunks=sum(s.chunks for s in samples),
        unattributed=sum(s.unattributed for s in samples),
        first=first,
    )


#: ``Answer.meta`` keys the summary reads: seconds one pipeline call took, and the
#: tokens of its prompt and completion (``total_tokens`` when only that is given). The
#: same keys under ``meta["usage"]`` (an OpenAI response's ``usage``) count too.
LATENCY_KEY = "latency_s"
TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(frozen=True)
class Usage:
    """Latency and token figures of a run, from the answers' ``meta`` (see
    :data:`LATENCY_KEY`, :data:`TOKEN_KEYS`); every ``*_n`` says how many answers
    reported the figure (``0``: the pipeline does not report it)."""

    latency_n: int = 0
    latency_p50: float | None = None
    latency_p95: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    tokens_n: int = 0

    @property
    def reported(self) -> bool:
        """Whether any answer reported a latency or token count."""
        return bool(self.latency_n or self.tokens_n)

    def text(self) -> str:
        """``latency p50 0.84 s, p95 2.10 s (20 answers); tokens 12345 prompt + 2100
        completion = 14445 (20 answers)``, the parts the pipeline reported."""
        parts = []
        if self.latency_n:
            parts.append(
                f"latency p50 {self.latency_p50:.2f} s, p95 {self.latency_p95:.2f} s "
                f"({self.latency_n} answers)"
            )
        if self.tokens_n:
            split = (f"{self.prompt_tokens} prompt + {self.completion_tokens} completion = "
                     if self.prompt_tokens or self.completion_tokens else "")
            parts.append(f"tokens {split}{self.total_tokens} ({self.tokens_n} answers)")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The figures as the JSON report writes them."""
        return {
            "latency_s": {"p50": self.latency_p50, "p95": self.latency_p95, "n": self.latency_n},
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens,
                       "total": self.total_tokens, "n": self.tokens_n},
        }


def _meta_number(meta: Mapping[str, Any], key: str) -> float | None:
    value = meta.get(key)
    if value is None and isinstance(meta.get("usage"), Mapping):
        value = meta["usage"].get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile with linear interpolation between the closest ranks (numpy's
    default), of a non-empty sequence."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def usage(samples: Sequence[Record]) -> Usage:
    """The latency percentiles and token totals the answers of ``samples`` reported.

    A cached answer keeps the meta of the call that produced it, so its latency is that
    call's. Questions that raised have no answer and count for nothing.
    """
    latencies: list[float] = []
    prompt = completion = total = counted = 0
    for sample in samples:
        if sample.error is not None or not sample.meta:
            continue  # an empty meta (the built-in pipeline's) reports nothing: no lookups
        latency = _meta_number(sample.meta, LATENCY_KEY)
        if latency is not None:
            latencies.append(latency)
        p, c, t = (_meta_number(sample.meta, key) for key in TOKEN_KEYS)
        if p is None and c is None and t is None:
            continue
        counted += 1
        prompt += int(p or 0)
        completion += int(c or 0)
        total += int(t) if t is not None else int((p or 0) + (c or 0))
    return Usage(
        latency_n=len(latencies),
        latency_p50=quantile(latencies, 0.5) if latencies else None,
        latency_p95=quantile(latencies, 0.95) if latencies else None,
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=total,
        tokens_n=counted,
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
    weak = sorted((s for s in scored if s.metrics[metric] < PERFECT),
                  key=lambda s: (s.metrics[metric], s.qid))
    return LowestQuestions(metric=metric, samples=tuple(weak[:max(limit, 0)]), n=len(scored),
                           variant=run.variant)


@dataclass(frozen=True)
class Outcome:
    """What the run decided: the runs, every check, the lines to print and report.

    ``error_list`` names every question that raised (``errors`` counts them);
    ``lowest`` holds the base run's lowest-scoring questions by :data:`LOWEST_BY`, and
    ``passages`` the corpus texts of the passages those and the regressed questions
    name, so a report can show them. ``baseline_shown`` and ``report_html`` are the
    baseline and HTML report paths as reports write them (relative to the rootdir or
    the config folder when they lie under it: ``path_roots``; :meth:`relative` does the
    same to a line).
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
    path_roots: tuple[Path, ...] = ()
    #: qid -> content hash of each question (``dataset.question_hash``), which the JSON
    #: report records per sample so that saved files pair questions after a dataset
    #: edit; empty when no baseline and no JSON report needed them.
    question_hashes: Mapping[int, str] = field(default_factory=dict)

    def relative(self, line: str) -> str:
        """``line`` with the absolute paths under the rootdir or the config folder made
        relative, as every report, the terminal and the JUnit verdict write it."""
        return relative_text(line, self.path_roots)

    @property
    def failed(self) -> bool:
        """A failed check, a question that raised, or a run that did not finish."""
        return bool(self.failures) or self.errors > 0 or self.interrupted is not None

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
    def chunks(self) -> ChunkShare:
        """The attribution counts of every run together."""
        return chunk_share([s for run in self.runs for s in run.samples])


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


# ---------------------------------------------------------------------- scoring
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
) -> list[Record]:
    """The records with their metrics: only those that apply to each question.

    ``cases`` and ``corpus`` (the dataset's) give custom metrics the question as the
    pipeline got it and the texts of retrieved passage ids; without them a custom metric
    sees the record's own view of the question. The records of the questions in
    ``scored`` already carry their metrics (with the same settings) and are kept as they
    are. ``memo`` holds the text metrics of pairs scored before (by this or an earlier
    run) and keeps those scored now, where it serves ``profile`` and ``tokenizer``.
    """
    if scored:
        todo = [r for r in records if r.key not in scored]
        done = score_records(todo, profile=profile, custom=custom, tokenizer=tokenizer,
                             cases=cases, corpus=corpus, memo=memo)
        fresh = {id(source): record for source, record in zip(todo, done, strict=True)}
        return [fresh.get(id(r), r) for r in records]
    ok = [r for r in records if not r.error]
    inputs = [r.metric_input() for r in ok]
    grades = [dict(r.grades) or None for r in ok]
    if not inputs:
        rows: list[dict[str, float]] = []
    elif memo is not None and memo.serves(profile, tokenizer):
        rows = memo.score(inputs, grades, [r.has_answer for r in ok])
    else:
        rows = score(inputs, profile=profile, grades=grades, tokenizer=tokenizer)
    with_metrics: dict[int, Record] = {}
    for record, metric_input, row in zip(ok, inputs, rows, strict=True):
        has_qrels = bool(record.retrieval_gt)
        kept = {
            name: float(row[name])
            for name in METRIC_NAMES
            if (name in RETRIEVAL_METRICS and has_qrels)
            or (name in GENERATION_METRICS and record.has_answer)
        }
        metric_case: MetricCase | None = None
        for metric in custom:
            applies = (
                metric.kind == "all"
                or (metric.kind == "retrieval" and has_qrels)
                or (metric.kind == "generation" and record.has_answer)
            )
            if applies:
                if metric_case is None:
                    metric_case = _metric_case(record, metric_input, cases, corpus)
                kept[metric.name] = _custom_value(metric, metric_case, record.qid)
        with_metrics[id(record)] = record.scored(kept)
    # Not with_metrics.get(id(r), r.scored({})): that would copy every record a second time.
    return [with_metrics[id(r)] if id(r) in with_metrics else r.scored({}) for r in records]


def _metric_case(
    record: Record, metric_input: MetricInput, cases: Mapping[int, QAPair] | None,
    corpus: Mapping[int, str] | None,
) -> MetricCase:
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


def _custom_value(metric: CustomMetric, metric_case: MetricCase, qid: int) -> float:
    value = metric.function(metric_case)
    wanted = f"return a finite number in {metric.range_text}"
    if metric.bounds != (0.0, 1.0):
        wanted += " (CustomMetric bounds)"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"custom metric {metric.name!r} returned {value!r} for q{qid}; {wanted}")
    value = float(value)
    if not math.isfinite(value) or metric.out_of_bounds(value):
        raise ConfigError(f"custom metric {metric.name!r} returned {value!r} for q{qid}; {wanted}")
    return value


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
                 memo: TextScoreMemo | None = None) -> None:
        self._plan = plan
        self._dataset = dataset
        self._text_memo = memo
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
                                        memo=self._text_memo))
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
    memo: TextScoreMemo | None = None,
) -> list[Record]:
    """:func:`score_records` with the plan's metrics and the dataset's questions and
    passages: the one way a run's records are scored, during the run and at its end."""
    return score_records(
        records, profile=plan.profile, custom=plan.custom_metrics,
        tokenizer=plan.tokenizer.tokenizer, cases=cases, corpus=dataset.corpus, scored=scored,
        memo=memo,
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
) -> RunResult:
    """The :class:`RunResult` of one configuration from its records (in qid order); the
    records of the questions in ``scored`` already carry their metrics."""
    samples = _score_for_run(sorted(records, key=lambda r: r.qid), plan, dataset,
                             _custom_cases(plan, dataset), scored, memo)
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
    )


@dataclass(frozen=True)
class AnsweredBy:
    """Which code answered a configuration's questions, as the summary prints it.

    ``label`` is ``"conftest hooks (conftest.py)"`` when a ``pytest_ragev_answer`` hook
    of the project answered, else the configured pipeline (``"builtin"``, ``"http"``,
    ``"pkg.module:make"``); ``hooks`` says whether a hook answered.
    """

    label: str
    hooks: bool = False


def run_params(
    plan: RunPlan, dataset: Dataset, pipeline_snapshot: Mapping[str, Any],
    variant: str | None, answered_by: AnsweredBy | None = None,
) -> dict[str, Any]:
    """The resolved, redacted settings snapshot recorded as the report's ``params``.

    ``pipeline_snapshot`` is the pipeline's own view of its knobs (defaults filled in);
    ``answered_by`` names the code that answered (``params.pipeline.answered_by``), beside
    the ``name`` as configured: when a conftest hook answered although ``name`` selects
    one of the plugin's pipelines (``"builtin"`` by default), ``name`` still says what the
    config file asks for and ``answered_by`` who answered.
    """
    config = plan.config
    name = plan.settings(variant).name
    identity: dict[str, Any] = {}
    if answered_by is not None:
        identity["answered_by"] = answered_by.label
    params: dict[str, Any] = redact(
        {
            "dataset": {
                "id": dataset.dataset_id,
                "path": _portable_path(config.dataset_path, config.source.parent),
                "fingerprint": dataset.fingerprint,
                "limit": plan.options.limit,
            },
            "pipeline": {"name": name, **pipeline_snapshot, **identity},
            "metrics": {"profile": plan.profile, "tokenizer": plan.tokenizer.identity},
            "thresholds": dict(config.thresholds),
        }
    )
    return params


def _portable_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` in posix form when it lies under it, else absolute.

    Keeps machine paths out of committed baselines and the settings hash the same on
    every checkout.
    """
    try:
        return path.relative_to(base).as_posix() or "."
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------- verdict
def evaluate(inputs: EvalInputs, *, phase: Phase = _no_phase) -> Outcome:
    """Score every configuration that ran, check thresholds and the baseline, decide.

    ``phase`` is told when scoring, the gate and a baseline write start.

    A baseline that cannot be used is part of the outcome (``gate.not_compared``), not
    an exception. Raises :class:`~pytest_ragev.core.errors.BaselineError` when a partial
    ``--ragev-update-baseline`` cannot read the file it must merge into, and
    :class:`ConfigError` when a custom metric misbehaves.
    """
    plan, facts = inputs.plan, inputs.facts
    by_variant: dict[str | None, list[Record]] = {}
    for record in inputs.records:
        by_variant.setdefault(record.variant, []).append(record)
    phase(f"scoring {sum(1 for r in inputs.records if r.key not in inputs.scored)} answers")
    runs = tuple(
        build_run(by_variant[variant], plan=plan, dataset=inputs.dataset, variant=variant,
                  params=inputs.params[variant], scored=inputs.scored, memo=inputs.memo)
        for variant in plan.variants if variant in by_variant
    )
    interrupted = None
    if facts.interrupted is not None:
        interrupted = (
            f"ragev: run {facts.interrupted}: {facts.finished} of {facts.total} "
            "questions answered"
        )
    error_list = tuple(
        QuestionError(qid=s.qid, question=s.question, error=s.error, variant=s.variant)
        for run in runs for s in run.samples if s.error is not None
    )
    fallbacks = sum(1 for run in runs for s in run.samples if s.meta.get("fallback"))
    # Thresholds hold the base configuration (the one you ship); variants are checked
    # only when one is selected alone.
    gated = runs[:1] if runs and runs[0].variant is None else runs
    thresholds = tuple(result for run in gated for result in check_thresholds(run, plan.thresholds))
    below = [f"q{s.qid}" + (f" [{run.variant}]" if run.variant else "")
             for run in runs for s in run.samples if check_question(s, plan.item_thresholds)]
    floors = ([f"ragev: {len(below)} question(s) below their [item_thresholds]: "
               f"{', '.join(below[:20])}" + (f", … ({len(below) - 20} more)" if len(below) > 20
                                            else "")] if below else [])
    notes = []
    if facts.duplicates:
        notes.append(
            f"ragev: {facts.duplicates} duplicate records for the same question were ignored "
            "(the first one counts)"
        )
    dataset = inputs.dataset
    phase("gate")
    gate = run_gate(runs, GateInputs(
        rules=plan.rules,
        baseline_path=plan.baseline_path,
        update=plan.options.update_baseline,
        interrupted=facts.interrupted is not None,
        configured=plan.configured,
        plugin_version=__version__,
        every_qid=tuple(pair.qid for pair in dataset.pairs),
        limit=plan.options.limit,
        source_fingerprint=dataset.source_fingerprint,
        # Only a run with a baseline needs the content hashes (computed on first use).
        hashes=dataset.question_hashes if plan.baseline_path is not None else {},
        corpus_fingerprint=(corpus_fingerprint(dataset.corpus)
                            if plan.baseline_path is not None else None),
        no_baseline=plan.options.no_baseline,
        tokenizer_upgrades=earlier_tokenizers(plan.tokenizer.identity),
        answer_chars=plan.config.baseline_answer_chars,
    ), phase=phase)
    phase("verdict")
    roots = _display_roots(facts.rootdir, plan.config.base_dir)
    lowest = tuple(
        lowest_questions(runs[0], metric, plan.rules.top_regressions)
        for metric in LOWEST_BY if runs and runs[0].summary.get(metric) is not None
        and runs[0].summary[metric].n
    )
    shared = ChunkShare() if not runs else chunk_share([s for r in runs for s in r.samples])
    attribution = shared.warning()
    # Texts the tokenizer gives no token for, that have no letter or digit (punctuation
    # alone: "?" against "?" scores 1.0) or, for a custom tokenizer, that lose letters
    # would score silently: one line, with an example.
    tokens = audit_tokens(
        [text for run in runs for s in run.samples if not s.error
         for text in (s.generated_text, s.generated_gt)],
        plan.tokenizer,
    ).warning()
    return Outcome(
        runs=runs,
        facts=facts,
        thresholds=thresholds,
        gate=gate,
        failures=(*(t.reason for t in thresholds if t.reason is not None), *floors,
                  *gate.failures),
        notes=(*notes, *gate.notes),
        warnings=(*facts.warnings, *dataset.warnings, *([attribution] if attribution else []),
                  *([tokens] if tokens else [])),
        errors=len(error_list),
        fallbacks=fallbacks,
        interrupted=interrupted,
        error_list=error_list,
        lowest=lowest,
        passages=_view_passages(dataset.corpus, lowest, gate),
        baseline_shown=(None if gate.baseline_path is None
                        else shown_path(gate.baseline_path, roots)),
        report_html=None if plan.report_html is None else shown_path(plan.report_html, roots),
        path_roots=roots,
        # Computed once, on first use: for the baseline, or for the JSON report's samples.
        question_hashes=(dataset.question_hashes if plan.baseline_path is not None
                         or plan.report_json is not None else {}),
    )


#: Characters of a passage's text the per-question views carry.
PASSAGE_CHARS = 600


def _view_passages(
    corpus: Mapping[int, str], lowest: Sequence[LowestQuestions], gate: GateOutcome
) -> dict[int, str]:
    """The corpus texts of the passages the per-question views name (only those: a
    report holds a few dozen passages, never the corpus)."""
    wanted: set[int] = set()
    for view in lowest:
        for sample in view.samples:
            wanted.update(sample.retrieval_ids)
            wanted.update(sample.relevant)
    for diff in gate.regressions:
        wanted.update(diff.retrieved_before, diff.retrieved_after, diff.relevant)
    texts = {}
    for pid in sorted(wanted):
        text = corpus.get(pid)
        if text is not None:
            flat = " ".join(text.split())
            texts[pid] = flat if len(flat) <= PASSAGE_CHARS else flat[:PASSAGE_CHARS - 1] + "…"
    # A large loaded corpus is read from a mapped file, where a lookup can leave a 2 MB
    # block of it resident: a few hundred lookups would map it all again.
    release = getattr(corpus, "release_pages", None)
    if callable(release):
        release()
    return texts


def _display_roots(rootdir: str, config_dir: Path) -> tuple[Path, ...]:
    """Where report paths are shown from: the rootdir (what the user types from), then
    the config folder; never the filesystem root."""
    roots = [Path(rootdir)] if rootdir else []
    roots.append(config_dir)
    return tuple(root for root in roots if root.is_absolute() and len(root.parts) > 1)


def shown_path(path: Path, roots: Sequence[Path]) -> str:
    """``path`` as a report writes it: relative to the first of ``roots`` it lies under
    (posix separators), else as it is."""
    for root in roots:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            continue
    return str(path)


def relative_text(line: str, roots: Sequence[Path]) -> str:
    """A gate line with its absolute paths under ``roots`` made relative: the gate
    names the files it read and wrote by the paths it opened."""
    for root in roots:
        line = line.replace(str(root) + os.sep, "")
    return line
