"""Saved files read back: a JSON report (``--ragev-report``) or a baseline file.

The JSON report carries, per run, the settings snapshot (``params``), the means, counts
and custom-metric directions (``metric``) and one record per question (``samples``):
everything a paired comparison needs. :func:`runs_from_report` turns the base run and
every variant of one report into runs that :func:`pytest_ragev.gate.compare` accepts;
:func:`outcome_from_report` rebuilds the whole :class:`~pytest_ragev.evaluation.Outcome`
of the run (its verdict, errors, comparison, weakest questions) so every renderer shows
it again; :func:`compare_saved` gates one saved file against another with the plugin's
own gate functions, as the plugin gates a run against its baseline.

:func:`read_saved` reads either kind of file, by its content. What a file does not hold
is filled in plainly: ``dataset_stats`` is empty, a custom metric without a recorded
direction (a report written before directions were recorded) is ``"higher"``, the
notes a run printed are not kept. Errors are one line (:class:`ReportError`) that names
the file and the key.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from pytest_ragev.config import Pricing
from pytest_ragev.core.checked import Checked, kind
from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import BaselineError, RagevError
from pytest_ragev.core.results import Direction, MetricSummary, RunResult, SampleResult
from pytest_ragev.core.types import (
    BUILTIN_METRICS,
    STATUS_FAILED,
    STATUS_PENDING,
    STATUS_RUNNING,
)
from pytest_ragev.evaluation import (
    LOWEST_BY,
    LowestQuestions,
    Outcome,
    RunFacts,
    ShardPart,
    errors_line,
    lowest_questions,
    question_errors,
)
from pytest_ragev.evaluation.repeats import repeat_summary
from pytest_ragev.evaluation.slices import SliceThreshold, slice_tables, slice_threshold_results
from pytest_ragev.gate import (
    Comparison,
    CorpusChange,
    GateOutcome,
    GateRules,
    MetricComparison,
    MetricDelta,
    MetricRule,
    QuestionDiff,
    Recorded,
    Snapshot,
    ThresholdResult,
    check_thresholds,
    compare_variants,
    judge_against,
    judged,
    thresholds_from_table,
)
from pytest_ragev.gate.compare import SliceComparison, Status
from pytest_ragev.gate.rules import MODES, Mode
from pytest_ragev.gate.slices import slice_label
from pytest_ragev.gate.snapshot import SCHEMA
from pytest_ragev.gate.workflow import not_compared_line
from pytest_ragev.report.json import REPORT_SCHEMA_VERSION
from pytest_ragev.report.partial import read_shard_block


class ReportError(RagevError):
    """A saved file cannot be read, is not a report or baseline, or cannot be compared."""


_BLOCKS = ("retrieval_metrics", "generation_metrics", "quality_metrics", "custom_metrics")
_STATUS_WORDS = {0: "pending", 1: "running", 2: "success", 3: "failed"}
#: How ``task.err_msg`` ends when a run did not finish (``report.json.final_report``).
_UNFINISHED = " before every question was answered"
_FILES = "a JSON report (--ragev-report) or a baseline file (ragev-baseline.json)"


# ----------------------------------------------------------------------------- files
@dataclass(frozen=True)
class Saved:
    """One saved file read back: its runs and what else it records.

    ``kind`` is ``"report"`` (a JSON report: ``data`` is its ``data`` object) or
    ``"baseline"`` (a baseline or ``.obtained.json`` file: ``snapshot`` is set). ``runs``
    holds the base run first (when it ran), then the variants by name.
    """

    source: str
    kind: Literal["report", "baseline"]
    runs: tuple[RunResult, ...]
    data: Mapping[str, Any] | None = None
    snapshot: Snapshot | None = None
    #: qid -> content hash from the samples' ``hash`` keys of a JSON report.
    sample_hashes: Mapping[int, str] = field(default_factory=dict)
    #: A partial report's share (``data.shard``: a run with ``--ragev-shard``), else ``None``.
    shard: ShardPart | None = None
    #: What the shard's shell saw (its counts, warnings, interruption), with ``shard``.
    shard_facts: RunFacts | None = None

    @property
    def hashes(self) -> Mapping[int, str]:
        """qid -> content hash of each question, when the file records them (a schema 2
        baseline file, or a JSON report whose samples carry ``hash``); empty otherwise
        (older files)."""
        if self.snapshot is not None:
            return self.snapshot.hashes
        return self.sample_hashes

    @property
    def corpus_fingerprint(self) -> str | None:
        """The corpus fingerprint a baseline file records (``None`` for a report)."""
        return None if self.snapshot is None else self.snapshot.corpus_fingerprint

    def run_for(self, variant: str | None) -> RunResult | None:
        """The run of ``variant`` (``None``: the base configuration), if the file has it."""
        return next((run for run in self.runs if run.variant == variant), None)

    def recorded(self) -> Recorded:
        """The file as the recorded side of a comparison."""
        if self.snapshot is not None:
            return self.snapshot.recorded()
        return Recorded(source=self.source, runs=self.runs, hashes=self.hashes)


def load_json(path: str | Path) -> Any:
    """The parsed JSON of ``path``; :class:`ReportError` (one line) when it cannot be read."""
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{target}: no such file; pass {_FILES}") from None
    except IsADirectoryError:
        raise ReportError(f"{target} is a folder, not a file; pass {_FILES}") from None
    except UnicodeDecodeError as exc:
        raise ReportError(
            f"{target} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); pass {_FILES}"
        ) from None
    except OSError as exc:
        raise ReportError(f"{target} cannot be read ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(
            f"{target} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); "
            f"pass {_FILES}"
        ) from None
    except RecursionError:
        raise ReportError(
            f"{target} nests arrays or objects too deeply to read; it is not {_FILES}"
        ) from None


def read_saved(path: str | Path) -> Saved:
    """Read a JSON report or a baseline file, telling them apart by their content.

    A report must be a final one (``task.status`` 2 or 3 with metrics): a progress
    report of a run still going, or of one that stopped before any question was scored,
    is refused with the reason.
    """
    source = str(path)
    document = load_json(path)
    if isinstance(document, Mapping) and "schema" in document:
        try:
            snapshot = Snapshot.from_data(document, source=source)
        except BaselineError as exc:
            raise ReportError(str(exc).removeprefix("ragev: ")) from None
        return Saved(source=source, kind="baseline", runs=tuple(snapshot.runs),
                     snapshot=snapshot)
    data = report_data(document, source)
    shard = (read_shard_block(data["shard"], _read(source), _facts(data, source))
             if "shard" in data else None)
    return Saved(source=source, kind="report", runs=tuple(runs_from_report(data, source=source)),
                 data=data, sample_hashes=_sample_hashes(data, source),
                 shard=None if shard is None else shard[0],
                 shard_facts=None if shard is None else shard[1])


def _sample_hashes(data: Mapping[str, Any], source: str) -> dict[int, str]:
    """qid -> the ``hash`` the report's samples record (base run and variants; they must
    agree). Samples of a report written before hashes were recorded have none."""
    read = _read(source)
    blocks = [("data", data)]
    variants = read.mapping(data.get("variants", {}), "data.variants")
    blocks += [(f"data.variants.{name}", read.mapping(variants[name], f"data.variants.{name}"))
               for name in sorted(variants)]
    hashes: dict[int, str] = {}
    for where, block in blocks:
        for index, item in enumerate(read.listing(block.get("samples", []), f"{where}.samples")):
            if not isinstance(item, Mapping) or "hash" not in item:
                continue
            value, qid = item["hash"], item.get("qid")
            at = f"{where}.samples[{index}].hash"
            if not isinstance(value, str) or not value:
                raise ReportError(f"{source}: {at} is {json.dumps(value)[:40]}, not a content "
                                  "hash (a string such as \"9f2c4e1a0b3d5c7e\")")
            if isinstance(qid, int) and hashes.setdefault(qid, value) != value:
                raise ReportError(f"{source}: {at} is {value!r}, but another sample of qid "
                                  f"{qid} records {hashes[qid]!r}")
    return hashes


def report_data(report: Any, source: str) -> Mapping[str, Any]:
    """The ``data`` object of a final JSON report; :class:`ReportError` otherwise."""
    read = _read(source)
    top = read.mapping(report, "the top level")
    data = read.mapping(top["data"], "data") if "data" in top and "task" not in top else top
    if "task" not in data or "metric" not in data:
        raise ReportError(
            f"{source} is neither a pytest-ragev JSON report (no data.task and data.metric) "
            f"nor a baseline file (no \"schema\": {SCHEMA!r}); pass {_FILES}"
        )
    _check_schema_version(data, source)
    task = read.mapping(data["task"], "data.task")
    status = task.get("status")
    # A running report shows the running means (metric is set): the status tells.
    if data["metric"] is None or status in (STATUS_PENDING, STATUS_RUNNING):
        if status == STATUS_FAILED:
            raise ReportError(
                f"{source}: the run failed before any question was scored "
                f"({task.get('err_msg') or 'no reason recorded'}); there is nothing to show"
            )
        finished, total = task.get("finished", 0), task.get("total", 0)
        word = _STATUS_WORDS.get(status, "unknown") if isinstance(status, int) else "unknown"
        raise ReportError(
            f"{source} is a progress report (task status {status!r}, "
            f"{word}: {finished} of {total} questions "
            "finished); pass the report of a finished run"
        )
    return data


# ------------------------------------------------------------------------------ runs
def runs_from_report(
    report: Any,
    *,
    source: str = "report",
    directions: Mapping[str, Direction] | None = None,
) -> list[RunResult]:
    """The runs of one parsed JSON report: the base run first, then the variants by name.

    ``report`` is the whole document (``{"success": ..., "data": {...}}``) or its
    ``data`` object. A report whose base configuration did not run (only
    ``--ragev-variant`` runs) holds the first variant at the top; that run keeps
    ``variant=None`` here only if its samples say so. A custom metric's direction is
    the one the report records (``metric.directions``), else the one ``directions``
    names, else ``"higher"``. Raises :class:`ReportError` naming ``source`` and the key
    when the report cannot be read.
    """
    read = _read(source)
    data = read.mapping(report, "the top level")
    if "data" in data and "task" not in data:
        data = read.mapping(data["data"], "data")
    task = read.mapping(data.get("task", {}), "data.task")
    dataset_id = str(task.get("dataset_id", ""))
    wanted = dict(directions or {})
    runs = [_run(data, "data", source, dataset_id=dataset_id, variant=None, directions=wanted)]
    variants = read.mapping(data.get("variants", {}), "data.variants")
    for name in sorted(variants):
        where = f"data.variants.{name}"
        runs.append(
            _run(read.mapping(variants[name], where), where, source,
                 dataset_id=dataset_id, variant=str(name), directions=wanted)
        )
    base_samples = runs[0].samples
    if base_samples and all(s.variant is not None for s in base_samples):
        # Only variants ran: the top-level block is the first selected variant's.
        runs[0] = replace(runs[0], variant=base_samples[0].variant)
        # ... and it is also listed under data.variants: keep it once.
        runs[1:] = [run for run in runs[1:] if run.variant != runs[0].variant]
    return runs


def _run(
    block: Mapping[str, Any],
    where: str,
    source: str,
    *,
    dataset_id: str,
    variant: str | None,
    directions: Mapping[str, Direction],
) -> RunResult:
    read = _read(source)
    params = dict(read.mapping(block.get("params") or {}, f"{where}.params"))
    dataset = read.mapping(params.get("dataset", {}), f"{where}.params.dataset")
    metrics_params = read.mapping(params.get("metrics", {}), f"{where}.params.metrics")
    metric = read.mapping(block.get("metric") or {}, f"{where}.metric")
    samples_raw = read.listing(block.get("samples", []), f"{where}.samples")
    samples: list[SampleResult] = []
    for index, item in enumerate(samples_raw):
        at = f"{where}.samples[{index}]"
        try:
            sample = SampleResult.from_json(item if type(item) is dict else read.mapping(item, at))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"{source}: {at} is not a sample record ({_why(exc)})") from None
        # As a baseline's values are checked: a hand-edited 5.0 in a report used as BASE, or
        # a NaN, which would drop the question from every paired comparison. The place is
        # written only for a value that fails (a merge reads 1.2 million values).
        place = functools.partial("{0}.metrics.{2} (qid {1})".format, at, sample.qid)
        read.metric_values(sample.metrics, place)  # place(name): "...metrics.mrr (qid 4)"
        samples.append(sample)
    attribution = read.mapping(block.get("attribution") or {}, f"{where}.attribution")
    first = attribution.get("first")
    if isinstance(first, str):
        # The samples do not keep their unattributed example; the run's first one is the
        # first sample's that has any (in qid order, as the plugin picks it).
        for index, sample in enumerate(samples):
            if sample.unattributed:
                samples[index] = replace(sample, unattributed_example=first)
                break
    counts = read.mapping(metric.get("counts", {}), f"{where}.metric.counts")
    recorded = read.mapping(metric.get("directions", {}), f"{where}.metric.directions")
    for name, direction in recorded.items():
        if direction not in ("higher", "lower"):
            raise ReportError(f"{source}: {where}.metric.directions.{name} is {direction!r}, "
                              "not 'higher' or 'lower'")
    known: dict[str, Direction] = {**directions, **recorded}
    summary: dict[str, MetricSummary] = {}
    for block_name in _BLOCKS:
        means = read.mapping(metric.get(block_name, {}), f"{where}.metric.{block_name}")
        for name, mean in means.items():
            summary[str(name)] = MetricSummary(
                name=str(name),
                mean=_metric_mean(mean, f"{where}.metric.{block_name}.{name}", source,
                                  str(name)),
                n=read.count(counts.get(name, 0), f"{where}.metric.counts.{name}"),
                direction=known.get(str(name), "higher"),
            )
    ordered = {name: summary[name] for name in BUILTIN_METRICS if name in summary}
    ordered.update({name: item for name, item in summary.items() if name not in ordered})
    return RunResult(
        dataset_id=str(dataset.get("id") or dataset_id),
        fingerprint=str(dataset.get("fingerprint", "")),
        dataset_stats={},
        profile=str(metrics_params.get("profile", "weknora")),
        params=params,
        params_hash=sha256_json(params),
        samples=samples,
        summary=ordered,
        variant=variant,
        tokenizer=str(metrics_params.get("tokenizer") or ""),
        scorers={str(k): str(v) for k, v in read.mapping(
            metrics_params.get("scorers", {}), f"{where}.params.metrics.scorers").items()},
    )


# --------------------------------------------------------------------------- outcome
def outcome_from_report(
    saved: Saved, *, rules: GateRules | None = None
) -> Outcome:
    """The :class:`Outcome` a saved file records, for the renderers to show it again.

    For a JSON report: the runs, the saved verdict (its failure lines as written), the
    errors, the interruption, the comparison with the baseline the run was gated against
    (``data.baseline``), the weakest questions and the passage texts. Thresholds and
    the variants table are recomputed from the recorded runs with the plugin's own
    functions (``rules`` for the variants table's test; default :class:`GateRules`). For
    a baseline file: its runs, their thresholds and errors, nothing else.
    """
    rules = rules or GateRules()
    runs = saved.runs
    error_list = question_errors(runs)
    table = (compare_variants(runs[0], runs[1:], rules)
             if len(runs) > 1 and runs[0].variant is None else None)
    if saved.data is None:
        thresholds = _thresholds(runs, saved.source)
        return Outcome(
            runs=runs, facts=_facts_of_runs(runs), thresholds=thresholds,
            gate=GateOutcome(rules=rules, variant_table=table),
            failures=tuple(t.reason for t in thresholds if t.reason is not None),
            errors=len(error_list), error_list=error_list, question_hashes=saved.hashes,
        )
    data, source = saved.data, saved.source
    read = _read(source)
    facts = _facts(data, source)
    interrupted = _interrupted_line(facts)
    verdict = read.mapping(data.get("verdict", {}), "data.verdict")
    saved_failures = read.strings(verdict.get("failures", []), "data.verdict.failures")
    # The saved lines include the errors and interruption lines, which the Outcome adds
    # itself (verdict_failures): keep the others once.
    derived = {errors_line(error_list), interrupted}
    failures = tuple(line for line in saved_failures if line not in derived)
    gate = _saved_gate(data, runs, rules, table, source)
    warnings = tuple(read.strings(data.get("warnings", []), "data.warnings"))
    fallbacks = read.count(verdict.get("fallbacks", 0), "data.verdict.fallbacks")
    # A run that answered each question R times: its unstable questions and power, from
    # the R scores each sample keeps (as the run printed them).
    repeats = repeat_summary(runs[0] if runs else None, rules)
    return Outcome(
        runs=runs,
        facts=facts,
        # A shard's means are not the run's: nothing judged them (the merged run is).
        thresholds=() if saved.shard is not None else _thresholds(runs, source),
        gate=gate,
        failures=failures,
        notes=(*(() if saved.shard is None else (saved.shard.line,)),
               *(() if gate.corpus_change is None else (gate.corpus_change.line,)),
               *(() if repeats is None else repeats.lines())),
        repeats=repeats,
        warnings=warnings,
        errors=len(error_list),
        fallbacks=fallbacks,
        interrupted=interrupted,
        error_list=error_list,
        lowest=_lowest(data, runs, source),
        passages=_passages(data, source),
        # From the slice keys the samples carry, at the size the run reported them.
        slices=slice_tables(runs, read.count(data.get("slice_min_size", rules.min_slice),
                                             "data.slice_min_size") or 1),
        baseline_shown=None if gate.baseline_path is None else str(gate.baseline_path),
        question_hashes=saved.hashes,
        pricing=_pricing(runs),
        shard=saved.shard,
    )


def _pricing(runs: Sequence[RunResult]) -> Pricing | None:
    """The ``[pricing]`` a report recorded in its settings (``params.pricing``)."""
    recorded = runs[0].params.get("pricing") if runs else None
    return Pricing.from_json(recorded) if isinstance(recorded, Mapping) else None


def _check_schema_version(data: Mapping[str, Any], source: str) -> None:
    """Refuse a report of a schema this version cannot read, in one line."""
    version = data.get("schema_version", 1)  # reports before the key was added are 1
    if type(version) is not int or version < 1:
        raise ReportError(f"{source}: data.schema_version is {version!r}, not a version "
                          "number; pass a report pytest-ragev wrote")
    if version > REPORT_SCHEMA_VERSION:
        raise ReportError(
            f"{source} has report schema_version {version}, this pytest-ragev reads up to "
            f"{REPORT_SCHEMA_VERSION}: upgrade pytest-ragev (pip install -U pytest-ragev) "
            "to read it"
        )


def _facts(data: Mapping[str, Any], source: str) -> RunFacts:
    read = _read(source)
    _check_schema_version(data, source)
    task = read.mapping(data["task"], "data.task")
    status = task.get("status")
    err_msg = str(task.get("err_msg") or "")
    interrupted = None
    if status == STATUS_FAILED and err_msg.endswith(_UNFINISHED):
        interrupted = err_msg.removesuffix(_UNFINISHED)
    return RunFacts(
        task_id=str(task.get("id") or ""),
        start_time=str(task.get("start_time") or ""),
        total=read.count(task.get("total", 0), "data.task.total"),
        finished=read.count(task.get("finished", 0), "data.task.finished"),
        interrupted=interrupted,
    )


def _facts_of_runs(runs: Sequence[RunResult]) -> RunFacts:
    questions = sum(len(run.samples) for run in runs)
    return RunFacts(total=questions, finished=questions)


def _interrupted_line(facts: RunFacts) -> str | None:
    # The line evaluation.evaluate writes for a run that did not finish.
    if facts.interrupted is None:
        return None
    return (f"ragev: run {facts.interrupted}: {facts.finished} of {facts.total} "
            "questions answered")


def _thresholds(runs: Sequence[RunResult], source: str) -> tuple[ThresholdResult, ...]:
    """The ``[thresholds]`` and ``[thresholds.slice.<name>]`` a run recorded
    (``params.thresholds``, ``params.slice_thresholds``), checked again with the
    plugin's own functions, the slices' on the slice keys the samples carry.

    As in the plugin, they hold the base configuration; variants only when no base ran.
    """
    read = _read(source)
    gated = runs[:1] if runs and runs[0].variant is None else runs
    results: list[ThresholdResult] = []
    for run in gated:
        table = read.mapping(run.params.get("thresholds") or {}, "params.thresholds")
        per_slice = {str(name): read.mapping(limits, f"params.slice_thresholds.{name}")
                     for name, limits in read.mapping(run.params.get("slice_thresholds") or {},
                                                      "params.slice_thresholds").items()}
        named = [*BUILTIN_METRICS, *table, *(m for limits in per_slice.values() for m in limits)]
        directions = {name: "higher" for name in named}
        directions.update({name: item.direction for name, item in run.summary.items()})
        try:
            checks = thresholds_from_table(table, source=source, directions=directions)
            slices = [SliceThreshold(name, tuple(thresholds_from_table(
                limits, source=source, directions=directions,
                where=f"[thresholds.slice.{name}]"))) for name, limits in per_slice.items()]
        except RagevError as exc:
            raise ReportError(str(exc)) from None
        results += check_thresholds(run, checks)
        results += slice_threshold_results(run, slices)
    return tuple(results)


def _lowest(
    data: Mapping[str, Any], runs: Sequence[RunResult], source: str
) -> tuple[LowestQuestions, ...]:
    """The weakest questions, recomputed from the samples as long as the report listed them."""
    read = _read(source)
    saved = read.mapping(data.get("lowest") or {}, "data.lowest")
    if not runs:
        return ()
    views = []
    for metric in LOWEST_BY:
        if metric not in saved:
            continue
        listed = saved[metric]
        if not isinstance(listed, list):
            raise ReportError(f"{source}: data.lowest.{metric} is {kind(listed)}, not a list")
        views.append(lowest_questions(runs[0], metric, len(listed)))
    return tuple(views)


def _passages(data: Mapping[str, Any], source: str) -> dict[int, str]:
    read = _read(source)
    texts = read.mapping(data.get("passages") or {}, "data.passages")
    passages = {}
    for key, text in texts.items():
        try:
            pid = int(key)
        except ValueError:
            raise ReportError(f"{source}: data.passages key {key!r} is not a passage id") from None
        passages[pid] = str(text)
    return passages


def _saved_gate(
    data: Mapping[str, Any], runs: Sequence[RunResult], rules: GateRules,
    table: Any, source: str,
) -> GateOutcome:
    """The gate's findings as the report recorded them under ``data.baseline``."""
    read = _read(source)
    if "baseline" not in data:
        return GateOutcome(rules=rules, variant_table=table)
    block = read.mapping(data["baseline"], "data.baseline")
    path = block.get("path")
    comparisons = []
    listed = read.listing(block.get("comparisons", []), "data.baseline.comparisons")
    for index, raw in enumerate(listed):
        comparisons.append(_comparison(raw, f"data.baseline.comparisons[{index}]", runs, source))
    regressions = [
        _diff(raw, f"data.baseline.regressions[{index}]", source)
        for index, raw in enumerate(read.listing(block.get("regressions", []),
                                          "data.baseline.regressions"))
    ]
    change = block.get("corpus_changed")
    corpus = None
    if change is not None:
        change = read.mapping(change, "data.baseline.corpus_changed")
        corpus = CorpusChange(
            passages_before=read.optional_count(change.get("passages_before"),
                                            "data.baseline.corpus_changed.passages_before"),
            passages_after=read.optional_count(change.get("passages_after"),
                                           "data.baseline.corpus_changed.passages_after"),
        )
    reason = block.get("not_compared")
    return GateOutcome(
        rules=rules,
        baseline_path=None if path is None else Path(str(path)),
        comparisons=tuple(comparisons),
        regressions=tuple(regressions),
        variant_table=table,
        failures=() if reason is None else (not_compared_line(str(reason)),),
        not_compared=None if reason is None else str(reason),
        new_variants=tuple(read.strings(block.get("new_variants", []),
                                        "data.baseline.new_variants")),
        corpus_change=corpus,
    )


def _comparison(
    raw: Any, where: str, runs: Sequence[RunResult], source: str
) -> Comparison:
    read = _read(source)
    item = read.mapping(raw, where)
    variant = item.get("variant")
    run = next((r for r in runs if r.variant == variant), None)
    added = read.integers(item.get("added", []), f"{where}.added")
    removed = read.integers(item.get("removed", []), f"{where}.removed")
    changed = read.integers(item.get("changed", []), f"{where}.changed")
    # The compared questions are the run's less those added or edited since the baseline.
    skip = set(added) | set(changed)
    common = sorted(s.qid for s in run.samples if s.qid not in skip) if run is not None else []
    metrics = []
    for name, entry_raw in read.mapping(item.get("metrics", {}), f"{where}.metrics").items():
        at = f"{where}.metrics.{name}"
        entry = read.mapping(entry_raw, at)
        ci = read.listing(entry.get("ci", [None, None]), f"{at}.ci")
        if len(ci) != 2:
            raise ReportError(f"{source}: {at}.ci is {ci!r}, not [low, high]")
        status = _status(entry.get("status"), f"{at}.status", source)
        summary = run.summary.get(str(name)) if run is not None else None
        metrics.append(MetricComparison(
            metric=str(name),
            direction=summary.direction if summary is not None else "higher",
            baseline_mean=read.optional_number(entry.get("baseline"), f"{at}.baseline"),
            current_mean=read.optional_number(entry.get("current"), f"{at}.current"),
            delta=read.optional_number(entry.get("delta"), f"{at}.delta"),
            ci_low=read.optional_number(ci[0], f"{at}.ci[0]"),
            ci_high=read.optional_number(ci[1], f"{at}.ci[1]"),
            ci_level=read.optional_number(entry.get("ci_level", 0.9), f"{at}.ci_level") or 0.9,
            p=read.optional_number(entry.get("p"), f"{at}.p"),
            n=read.count(entry.get("n", 0), f"{at}.n"),
            status=status,
            reason=None,
            rule=MetricRule(enabled=bool(entry.get("gated", True)), mode=_mode(entry, at, source)),
            p_raw=read.optional_number(entry.get("p_raw"), f"{at}.p_raw"),
            family=read.count(entry.get("family", 1), f"{at}.family"),
            correction=str(entry.get("correction", "none")),
        ))
    return Comparison(metrics=metrics, common_qids=common, added=added, removed=removed,
                      variant=None if variant is None else str(variant), changed=changed,
                      slices=_slice_comparisons(item.get("slices") or {}, where, metrics,
                                                source))


def _slice_comparisons(
    raw: Any, where: str, metrics: Sequence[MetricComparison], source: str
) -> list[SliceComparison]:
    """A saved comparison's tested slices (``[gate] slices``) as the gate recorded them:
    each metric's change, p-values and status under its run-wide rule."""
    read = _read(source)
    tested = read.mapping(raw, f"{where}.slices")
    run_wide = {item.metric: item for item in metrics}
    found = []
    for key, raw_entry in tested.items():
        at = f"{where}.slices.{key}"
        entry = read.mapping(raw_entry, at)
        items = []
        for name, raw_value in read.mapping(entry.get("metrics", {}), f"{at}.metrics").items():
            there = f"{at}.metrics.{name}"
            value, whole = read.mapping(raw_value, there), run_wide.get(str(name))
            num = {field_: read.optional_number(value.get(field_), f"{there}.{field_}")
                   for field_ in ("baseline", "current", "delta", "p", "p_raw")}
            items.append(MetricComparison(
                str(name), whole.direction if whole else "higher", num["baseline"],
                num["current"], num["delta"], None, None, whole.ci_level if whole else 0.9,
                num["p"], read.count(value.get("n", 0), f"{there}.n"),
                _status(value.get("status"), f"{there}.status", source), None,
                whole.rule if whole else MetricRule(), p_raw=num["p_raw"]))
        found.append(SliceComparison(key=str(key), label=slice_label(str(key), list(tested)),
                                     n=read.count(entry.get("n", 0), f"{at}.n"), metrics=items))
    return found


def _status(value: Any, where: str, source: str) -> Status:
    """A saved comparison's status, checked."""
    if value not in get_args(Status):
        raise ReportError(f"{source}: {where} is {value!r}, not a comparison status")
    return value  # type: ignore[no-any-return]


def _mode(entry: Mapping[str, Any], at: str, source: str) -> Mode:
    """A saved comparison's gate mode (``significant`` in a report written before it was
    recorded)."""
    mode = entry.get("mode", "significant")
    if mode not in MODES:
        raise ReportError(f"{source}: {at}.mode is {mode!r}, not one of {', '.join(MODES)}")
    return mode  # type: ignore[no-any-return]


def _diff(raw: Any, where: str, source: str) -> QuestionDiff:
    read = _read(source)
    item = read.mapping(raw, where)
    worsening = read.optional_number(item.get("worsening"), f"{where}.worsening")
    metrics = {}
    for name, entry_raw in read.mapping(item.get("metrics", {}), f"{where}.metrics").items():
        entry = read.mapping(entry_raw, f"{where}.metrics.{name}")
        metrics[str(name)] = MetricDelta(
            before=read.optional_number(entry.get("before"), f"{where}.metrics.{name}.before"),
            after=read.optional_number(entry.get("after"), f"{where}.metrics.{name}.after"),
        )
    error_before, error_after = item.get("error_before"), item.get("error_after")
    variant = item.get("variant")
    answer_before = str(item.get("answer_before", ""))
    answer_after = str(item.get("answer_after", ""))
    return QuestionDiff(
        qid=read.count(item.get("qid"), f"{where}.qid"),
        question=str(item.get("question", "")),
        # JSON has no infinity: a question that newly raised is written as null.
        worsening=math.inf if worsening is None else worsening,
        metrics=metrics,
        retrieved_before=read.integers(item.get("retrieved_before", []),
                                       f"{where}.retrieved_before"),
        retrieved_after=read.integers(item.get("retrieved_after", []),
                                      f"{where}.retrieved_after"),
        relevant=frozenset(read.integers(item.get("relevant", []), f"{where}.relevant")),
        answer_before=answer_before,
        answer_after=answer_after,
        # Reports written before the key compared the two texts.
        answer_changed=bool(item.get("answer_changed", answer_before != answer_after)),
        error_before=None if error_before is None else str(error_before),
        error_after=None if error_after is None else str(error_after),
        variant=None if variant is None else str(variant),
    )


# --------------------------------------------------------------------------- compare
def compare_saved(
    base: Saved,
    current: Saved,
    rules: GateRules | None = None,
    *,
    hashes: Mapping[int, str] | None = None,
    corpus_fingerprint: str | None = None,
    passages_after: int | None = None,
) -> Outcome:
    """``current`` judged as the plugin judges a run against its baseline, with ``base``
    as the baseline: the outcome of the regression gate and of ``current``'s own checks.

    The comparison is the plugin's own (:func:`~pytest_ragev.gate.judge_against`, the
    one comparison path): the same pairing, refusals, warnings and failure lines, word
    for word. The verdict fails on a regressed metric, an unmet ``[thresholds]`` entry
    ``current`` recorded, a question that raised, or a run that did not finish.

    When the dataset changed, questions pair by content hash, which a baseline file and
    a JSON report (each sample's ``hash``) record, or ``hashes`` gives (those of the
    dataset ``current`` ran on); ``corpus_fingerprint`` and ``passages_after`` (that
    dataset's corpus) let the outcome say whether and how the corpus changed. Raises
    :class:`ReportError` with the gate's reason when the files cannot be compared.
    """
    rules = rules or GateRules()
    for saved in (base, current):
        if saved.shard is not None:
            # Gating one shard judges a part of the questions with the whole family of
            # tests: n/N questions' power, N verdicts. The merged run is gated once.
            raise ReportError(
                f"{saved.source} is a partial report ({saved.shard.spec.words}); merge "
                "every shard's report first (ragev report merge SHARD.json... -o RUN.json) "
                "and compare the merged report"
            )
    own = outcome_from_report(current, rules=rules)
    if not current.runs:
        raise ReportError(f"{current.source} holds no run to compare")
    current_hashes = dict(hashes) if hashes is not None else dict(current.hashes)
    judgement = judge_against(
        base.recorded(), current.runs, rules, hashes=current_hashes,
        corpus_fingerprint=(corpus_fingerprint if corpus_fingerprint is not None
                            else current.corpus_fingerprint),
        passages=passages_after,
    )
    if judgement.not_compared is not None:
        raise ReportError(judgement.not_compared.removeprefix("ragev: "))
    gate = judged(judgement, rules=rules, baseline_path=Path(base.source),
                  variant_table=own.gate.variant_table)
    return replace(
        own,
        gate=gate,
        failures=(*(t.reason for t in own.thresholds if t.reason is not None),
                  *gate.failures),
        notes=gate.notes,
        baseline_shown=base.source,
        question_hashes=current_hashes,
    )


# --------------------------------------------------------------------------- values
@functools.cache
def _read(source: str) -> Checked:
    """The checked reader of one saved report (one per file name, made once)."""
    return Checked(source, error=ReportError)


def _metric_mean(value: Any, where: str, source: str, name: str) -> float | None:
    return None if value is None else _read(source).metric_value(value, where, name)


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing key {exc.args[0]!r}"
    return str(exc)


__all__ = [
    "ReportError",
    "Saved",
    "compare_saved",
    "load_json",
    "outcome_from_report",
    "read_saved",
    "report_data",
    "runs_from_report",
]
