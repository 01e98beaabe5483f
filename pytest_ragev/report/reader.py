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

import json
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import BaselineError, RagevError
from pytest_ragev.core.results import (
    Direction,
    MetricSummary,
    RunResult,
    SampleResult,
    metric_value_problem,
)
from pytest_ragev.core.types import (
    METRIC_NAMES,
    STATUS_FAILED,
    STATUS_PENDING,
    STATUS_RUNNING,
)
from pytest_ragev.evaluation import (
    LOWEST_BY,
    LowestQuestions,
    Outcome,
    QuestionError,
    RunFacts,
    errors_line,
    lowest_questions,
)
from pytest_ragev.gate import (
    Comparison,
    CorpusChange,
    GateRules,
    MetricComparison,
    MetricDelta,
    MetricRule,
    QuestionDiff,
    Snapshot,
    ThresholdResult,
    check_thresholds,
    compare,
    compare_variants,
    power_lines,
    thresholds_from_table,
    top_regressions,
)
from pytest_ragev.gate.baseline import SCHEMA, retokenized, tokenizer_origin
from pytest_ragev.gate.workflow import GateOutcome, not_compared_line
from pytest_ragev.metrics import earlier_tokenizers
from pytest_ragev.report.json import REPORT_SCHEMA_VERSION


class ReportError(RagevError):
    """A saved file cannot be read, is not a report or baseline, or cannot be compared."""


_BLOCKS = ("retrieval_metrics", "generation_metrics", "custom_metrics")
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

    @property
    def hashes(self) -> Mapping[int, str]:
        """qid -> content hash of each question, when the file records them (a schema 2
        baseline file, or a JSON report whose samples carry ``hash``); empty otherwise
        (older files)."""
        if self.snapshot is not None and self.snapshot.has_hashes:
            return self.snapshot.hashes
        return self.sample_hashes

    @property
    def corpus_fingerprint(self) -> str | None:
        """The corpus fingerprint a baseline file records (``None`` for a report)."""
        return None if self.snapshot is None else self.snapshot.corpus_fingerprint

    def run_for(self, variant: str | None) -> RunResult | None:
        """The run of ``variant`` (``None``: the base configuration), if the file has it."""
        return next((run for run in self.runs if run.variant == variant), None)


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
    return Saved(source=source, kind="report", runs=tuple(runs_from_report(data, source=source)),
                 data=data, sample_hashes=_sample_hashes(data, source))


def _sample_hashes(data: Mapping[str, Any], source: str) -> dict[int, str]:
    """qid -> the ``hash`` the report's samples record (base run and variants; they must
    agree). Samples of a report written before hashes were recorded have none."""
    blocks = [("data", data)]
    variants = _mapping(data.get("variants", {}), "data.variants", source)
    blocks += [(f"data.variants.{name}", _mapping(variants[name], f"data.variants.{name}",
                                                  source)) for name in sorted(variants)]
    hashes: dict[int, str] = {}
    for where, block in blocks:
        for index, item in enumerate(_list(block.get("samples", []), f"{where}.samples",
                                           source)):
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
    top = _mapping(report, "the top level", source)
    data = _mapping(top["data"], "data", source) if "data" in top and "task" not in top else top
    if "task" not in data or "metric" not in data:
        raise ReportError(
            f"{source} is neither a pytest-ragev JSON report (no data.task and data.metric) "
            f"nor a baseline file (no \"schema\": {SCHEMA!r}); pass {_FILES}"
        )
    _check_schema_version(data, source)
    task = _mapping(data["task"], "data.task", source)
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
    data = _mapping(report, "the top level", source)
    if "data" in data and "task" not in data:
        data = _mapping(data["data"], "data", source)
    task = _mapping(data.get("task", {}), "data.task", source)
    dataset_id = str(task.get("dataset_id", ""))
    wanted = dict(directions or {})
    runs = [_run(data, "data", source, dataset_id=dataset_id, variant=None, directions=wanted)]
    variants = _mapping(data.get("variants", {}), "data.variants", source)
    for name in sorted(variants):
        where = f"data.variants.{name}"
        runs.append(
            _run(_mapping(variants[name], where, source), where, source,
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
    params = dict(_mapping(block.get("params") or {}, f"{where}.params", source))
    dataset = _mapping(params.get("dataset", {}), f"{where}.params.dataset", source)
    metrics_params = _mapping(params.get("metrics", {}), f"{where}.params.metrics", source)
    metric = _mapping(block.get("metric") or {}, f"{where}.metric", source)
    samples_raw = block.get("samples", [])
    if not isinstance(samples_raw, list):
        raise ReportError(f"{source}: {where}.samples is {_kind(samples_raw)}, not a list")
    samples: list[SampleResult] = []
    for index, item in enumerate(samples_raw):
        at = f"{where}.samples[{index}]"
        try:
            sample = SampleResult.from_json(_mapping(item, at, source))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"{source}: {at} is not a sample record ({_why(exc)})") from None
        for name, value in sample.metrics.items():
            # As a baseline's values are checked: a hand-edited 5.0 in a report used as
            # BASE, or a NaN, which would drop the question from every paired comparison.
            problem = metric_value_problem(name, value)
            if problem is not None:
                raise ReportError(f"{source}: {at}.metrics.{name} (qid {sample.qid}) {problem}")
        samples.append(sample)
    attribution = _mapping(block.get("attribution") or {}, f"{where}.attribution", source)
    first = attribution.get("first")
    if isinstance(first, str):
        # The samples do not keep their unattributed example; the run's first one is the
        # first sample's that has any (in qid order, as the plugin picks it).
        for index, sample in enumerate(samples):
            if sample.unattributed:
                samples[index] = replace(sample, unattributed_example=first)
                break
    counts = _mapping(metric.get("counts", {}), f"{where}.metric.counts", source)
    recorded = _mapping(metric.get("directions", {}), f"{where}.metric.directions", source)
    for name, direction in recorded.items():
        if direction not in ("higher", "lower"):
            raise ReportError(f"{source}: {where}.metric.directions.{name} is {direction!r}, "
                              "not 'higher' or 'lower'")
    known: dict[str, Direction] = {**directions, **recorded}
    summary: dict[str, MetricSummary] = {}
    for block_name in _BLOCKS:
        means = _mapping(metric.get(block_name, {}), f"{where}.metric.{block_name}", source)
        for name, mean in means.items():
            summary[str(name)] = MetricSummary(
                name=str(name),
                mean=_metric_mean(mean, f"{where}.metric.{block_name}.{name}", source,
                                  str(name)),
                n=_count(counts.get(name, 0), f"{where}.metric.counts.{name}", source),
                direction=known.get(str(name), "higher"),
            )
    ordered = {name: summary[name] for name in METRIC_NAMES if name in summary}
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
        # Empty in a report written before the tokenizer was recorded: WeKnora's rule,
        # RunResult.tokenizer_identity says (compare_saved checks what that means).
        tokenizer=str(metrics_params.get("tokenizer") or ""),
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
    error_list = _error_list(runs)
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
    facts = _facts(data, source)
    interrupted = _interrupted_line(facts)
    verdict = _mapping(data.get("verdict", {}), "data.verdict", source)
    saved_failures = _strings(verdict.get("failures", []), "data.verdict.failures", source)
    # The saved lines include the errors and interruption lines, which the Outcome adds
    # itself (verdict_failures): keep the others once.
    derived = {errors_line(error_list), interrupted}
    failures = tuple(line for line in saved_failures if line not in derived)
    gate = _saved_gate(data, runs, rules, table, source)
    warnings = tuple(_strings(data.get("warnings", []), "data.warnings", source))
    fallbacks = _count(verdict.get("fallbacks", 0), "data.verdict.fallbacks", source)
    return Outcome(
        runs=runs,
        facts=facts,
        thresholds=_thresholds(runs, source),
        gate=gate,
        failures=failures,
        notes=() if gate.corpus_change is None else (gate.corpus_change.line,),
        warnings=warnings,
        errors=len(error_list),
        fallbacks=fallbacks,
        interrupted=interrupted,
        error_list=error_list,
        lowest=_lowest(data, runs, source),
        passages=_passages(data, source),
        baseline_shown=None if gate.baseline_path is None else str(gate.baseline_path),
        question_hashes=saved.hashes,
    )


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
    _check_schema_version(data, source)
    task = _mapping(data["task"], "data.task", source)
    status = task.get("status")
    err_msg = str(task.get("err_msg") or "")
    interrupted = None
    if status == STATUS_FAILED and err_msg.endswith(_UNFINISHED):
        interrupted = err_msg.removesuffix(_UNFINISHED)
    return RunFacts(
        task_id=str(task.get("id") or ""),
        start_time=str(task.get("start_time") or ""),
        total=_count(task.get("total", 0), "data.task.total", source),
        finished=_count(task.get("finished", 0), "data.task.finished", source),
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


def _error_list(runs: Sequence[RunResult]) -> tuple[QuestionError, ...]:
    return tuple(
        QuestionError(qid=s.qid, question=s.question, error=s.error, variant=s.variant)
        for run in runs for s in run.samples if s.error is not None
    )


def _thresholds(runs: Sequence[RunResult], source: str) -> tuple[ThresholdResult, ...]:
    """The ``[thresholds]`` a run recorded (``params.thresholds``), checked again.

    As in the plugin, they hold the base configuration; variants only when no base ran.
    """
    gated = runs[:1] if runs and runs[0].variant is None else runs
    results: list[ThresholdResult] = []
    for run in gated:
        table = _mapping(run.params.get("thresholds") or {}, "params.thresholds", source)
        directions = {name: "higher" for name in (*METRIC_NAMES, *table)}
        directions.update({name: item.direction for name, item in run.summary.items()})
        try:
            checks = thresholds_from_table(table, source=source, directions=directions)
        except RagevError as exc:
            raise ReportError(str(exc)) from None
        results += check_thresholds(run, checks)
    return tuple(results)


def _lowest(
    data: Mapping[str, Any], runs: Sequence[RunResult], source: str
) -> tuple[LowestQuestions, ...]:
    """The weakest questions, recomputed from the samples as long as the report listed them."""
    saved = _mapping(data.get("lowest") or {}, "data.lowest", source)
    if not runs:
        return ()
    views = []
    for metric in LOWEST_BY:
        if metric not in saved:
            continue
        listed = saved[metric]
        if not isinstance(listed, list):
            raise ReportError(f"{source}: data.lowest.{metric} is {_kind(listed)}, not a list")
        views.append(lowest_questions(runs[0], metric, len(listed)))
    return tuple(views)


def _passages(data: Mapping[str, Any], source: str) -> dict[int, str]:
    texts = _mapping(data.get("passages") or {}, "data.passages", source)
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
    if "baseline" not in data:
        return GateOutcome(rules=rules, variant_table=table)
    block = _mapping(data["baseline"], "data.baseline", source)
    path = block.get("path")
    comparisons = []
    for index, raw in enumerate(_list(block.get("comparisons", []), "data.baseline.comparisons",
                                      source)):
        comparisons.append(_comparison(raw, f"data.baseline.comparisons[{index}]", runs, source))
    regressions = [
        _diff(raw, f"data.baseline.regressions[{index}]", source)
        for index, raw in enumerate(_list(block.get("regressions", []),
                                          "data.baseline.regressions", source))
    ]
    change = block.get("corpus_changed")
    corpus = None
    if change is not None:
        change = _mapping(change, "data.baseline.corpus_changed", source)
        corpus = CorpusChange(
            passages_before=_optional_count(change.get("passages_before"),
                                            "data.baseline.corpus_changed.passages_before",
                                            source),
            passages_after=_optional_count(change.get("passages_after"),
                                           "data.baseline.corpus_changed.passages_after",
                                           source),
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
        new_variants=tuple(_strings(block.get("new_variants", []), "data.baseline.new_variants",
                                    source)),
        corpus_change=corpus,
    )


def _comparison(
    raw: Any, where: str, runs: Sequence[RunResult], source: str
) -> Comparison:
    item = _mapping(raw, where, source)
    variant = item.get("variant")
    run = next((r for r in runs if r.variant == variant), None)
    added = _ints(item.get("added", []), f"{where}.added", source)
    removed = _ints(item.get("removed", []), f"{where}.removed", source)
    changed = _ints(item.get("changed", []), f"{where}.changed", source)
    # The compared questions are the run's less those added or edited since the baseline.
    skip = set(added) | set(changed)
    common = sorted(s.qid for s in run.samples if s.qid not in skip) if run is not None else []
    metrics = []
    for name, entry_raw in _mapping(item.get("metrics", {}), f"{where}.metrics", source).items():
        at = f"{where}.metrics.{name}"
        entry = _mapping(entry_raw, at, source)
        ci = _list(entry.get("ci", [None, None]), f"{at}.ci", source)
        if len(ci) != 2:
            raise ReportError(f"{source}: {at}.ci is {ci!r}, not [low, high]")
        status = entry.get("status")
        if status not in ("regressed", "improved", "unchanged", "within tolerance",
                          "not significant", "no data"):
            raise ReportError(f"{source}: {at}.status is {status!r}, not a comparison status")
        summary = run.summary.get(str(name)) if run is not None else None
        metrics.append(MetricComparison(
            metric=str(name),
            direction=summary.direction if summary is not None else "higher",
            baseline_mean=_mean(entry.get("baseline"), f"{at}.baseline", source),
            current_mean=_mean(entry.get("current"), f"{at}.current", source),
            delta=_mean(entry.get("delta"), f"{at}.delta", source),
            ci_low=_mean(ci[0], f"{at}.ci[0]", source),
            ci_high=_mean(ci[1], f"{at}.ci[1]", source),
            ci_level=_mean(entry.get("ci_level", 0.9), f"{at}.ci_level", source) or 0.9,
            p=_mean(entry.get("p"), f"{at}.p", source),
            n=_count(entry.get("n", 0), f"{at}.n", source),
            status=status,
            reason=None,
            rule=MetricRule(enabled=bool(entry.get("gated", True))),
            p_raw=_mean(entry.get("p_raw"), f"{at}.p_raw", source),
            family=_count(entry.get("family", 1), f"{at}.family", source),
            correction=str(entry.get("correction", "none")),
        ))
    return Comparison(metrics=metrics, common_qids=common, added=added, removed=removed,
                      variant=None if variant is None else str(variant), changed=changed)


def _diff(raw: Any, where: str, source: str) -> QuestionDiff:
    item = _mapping(raw, where, source)
    worsening = _mean(item.get("worsening"), f"{where}.worsening", source)
    metrics = {}
    for name, entry_raw in _mapping(item.get("metrics", {}), f"{where}.metrics", source).items():
        entry = _mapping(entry_raw, f"{where}.metrics.{name}", source)
        metrics[str(name)] = MetricDelta(
            before=_mean(entry.get("before"), f"{where}.metrics.{name}.before", source),
            after=_mean(entry.get("after"), f"{where}.metrics.{name}.after", source),
        )
    error_before, error_after = item.get("error_before"), item.get("error_after")
    variant = item.get("variant")
    answer_before = str(item.get("answer_before", ""))
    answer_after = str(item.get("answer_after", ""))
    return QuestionDiff(
        qid=_count(item.get("qid"), f"{where}.qid", source),
        question=str(item.get("question", "")),
        # JSON has no infinity: a question that newly raised is written as null.
        worsening=math.inf if worsening is None else worsening,
        metrics=metrics,
        retrieved_before=_ints(item.get("retrieved_before", []), f"{where}.retrieved_before",
                               source),
        retrieved_after=_ints(item.get("retrieved_after", []), f"{where}.retrieved_after",
                              source),
        relevant=frozenset(_ints(item.get("relevant", []), f"{where}.relevant", source)),
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

    Each run of ``current`` is compared with ``base``'s run of the same configuration by
    :func:`~pytest_ragev.gate.compare` (paired test, ``rules``), its most regressed
    questions listed by :func:`~pytest_ragev.gate.top_regressions`, its variants
    tabulated by :func:`~pytest_ragev.gate.compare_variants`. The verdict fails on a
    regressed metric, an unmet ``[thresholds]`` entry ``current`` recorded, a question
    that raised, or a run that did not finish.

    On the same dataset fingerprint every shared question is compared. When the dataset
    changed, questions pair by content hash, which a schema 2 baseline file and a JSON
    report (each sample's ``hash``) record, or ``hashes`` gives (those of the dataset
    ``current`` ran on); ``corpus_fingerprint`` (that dataset's corpus) lets the
    outcome say whether the corpus changed. Raises :class:`ReportError` when the files
    cannot be compared: another metric profile, another tokenizer (a file that records
    none was made with WeKnora's rule, ``default/1``; an earlier version of the other
    file's rules is compared when no compared question's text, the older file's answer
    or the reference, may get other tokens from the two), a dataset change without
    hashes (or with ``[gate] strict_dataset``), a variant ``base`` lacks under ``[gate]
    require_all_variants``, no unchanged question in common.
    """
    rules = rules or GateRules()
    own = outcome_from_report(current, rules=rules)
    runs = current.runs
    if not runs:
        raise ReportError(f"{current.source} holds no run to compare")
    for run in runs:
        recorded = base.run_for(run.variant) or base.runs[0]
        if recorded.profile != run.profile:
            raise ReportError(
                f"{base.source} was computed with metric profile {recorded.profile!r}, "
                f"{current.source} with {run.profile!r}: numbers across metric profiles are "
                "not comparable; compare runs of one profile"
            )
        if (recorded.tokenizer_identity != run.tokenizer_identity
                and _rules_upgrade(recorded, run) is None):
            raise ReportError(
                f"{_tokenizers(base.source, recorded, current.source, run)}: text metrics "
                "across tokenizers are not comparable; compare runs of one [metrics] tokenizer"
            )
    if base.run_for(None) is None and any(run.variant is None for run in runs):
        ran = ", ".join(str(run.variant) for run in base.runs)
        raise ReportError(
            f"{base.source} has no run of the base configuration (only variants ran: {ran}); "
            "compare against a file that records it"
        )
    missing = [str(run.variant) for run in runs if base.run_for(run.variant) is None]
    if missing and rules.require_all_variants:
        raise ReportError(
            f"{base.source} has no run of {_names(missing)} and [gate] require_all_variants "
            f"= true; compare against a file that records {_them(missing)}"
        )
    current_hashes = dict(hashes) if hashes is not None else dict(current.hashes)
    comparisons: list[Comparison] = []
    regressions: list[QuestionDiff] = []
    baseline_runs: dict[str | None, RunResult] = {}
    for run in runs:
        before = base.run_for(run.variant)
        if before is None:
            continue
        changed = _edited(base, before, current, run, current_hashes, rules.strict_dataset)
        _check_retokenized(base, before, current, run, changed)
        try:
            comparison = compare(before, run, rules, changed=changed)
        except BaselineError:
            label = "" if run.variant is None else f" (variant {run.variant!r})"
            raise ReportError(
                f"{base.source} and {current.source}{label} share no unchanged question "
                f"({len(before.samples)} in the baseline, {len(run.samples)} now"
                f"{f', {len(changed)} of them edited since' if changed else ''}); compare "
                "runs of one dataset"
            ) from None
        baseline_runs[run.variant] = before
        comparisons.append(comparison)
        regressions += top_regressions(before, run, rules.top_regressions, skip=changed)
    notes: list[str] = []
    change = _corpus_change(base, current, corpus_fingerprint, passages_after)
    if change is not None:
        notes.append(change.line)
    if missing:
        notes.append(
            f"ragev: warning: {_names(missing)} {'are' if len(missing) > 1 else 'is'} new, not "
            f"compared ({base.source} has no run of {_them(missing)})"
        )
    notes += power_lines(comparisons, rules)
    failures = [line for c in comparisons for line in c.failure_lines]
    gate = GateOutcome(
        rules=rules, baseline_path=Path(base.source), baseline_runs=baseline_runs,
        comparisons=tuple(comparisons), regressions=tuple(regressions),
        variant_table=own.gate.variant_table, failures=tuple(failures), notes=tuple(notes),
        new_variants=tuple(missing), corpus_change=change,
    )
    return replace(
        own,
        gate=gate,
        failures=(*(t.reason for t in own.thresholds if t.reason is not None), *failures),
        notes=tuple(notes),
        baseline_shown=base.source,
        question_hashes=current_hashes,
    )


def _edited(
    base: Saved, before: RunResult, current: Saved, run: RunResult,
    current_hashes: Mapping[int, str], strict: bool,
) -> list[int]:
    """The shared questions edited since ``base`` (left out of the comparison)."""
    if before.fingerprint == run.fingerprint:
        return []
    changed = (f"{base.source} ran on dataset {before.dataset_id!r} (fingerprint "
               f"{before.fingerprint[:12]}), {current.source} on {run.dataset_id!r} "
               f"(fingerprint {run.fingerprint[:12]})")
    if strict:
        raise ReportError(
            f"{changed}: the data changed and [gate] strict_dataset = true; compare runs of "
            "one dataset, or unset strict_dataset to compare the unchanged questions"
        )
    if not base.hashes:
        what = ("a JSON report written before reports recorded them" if base.kind == "report"
                else f"a schema_version {base.snapshot.schema_version} baseline file"
                if base.snapshot is not None else "it")
        raise ReportError(
            f"{changed}: the data changed, and {base.source} is {what}, which records no "
            "per-question content hashes to pair the unchanged questions; compare against "
            "a baseline file or JSON report written by this version, or compare runs of "
            "one dataset"
        )
    if not current_hashes:
        raise ReportError(
            f"{changed}: the data changed, and {current.source} records no per-question "
            "content hashes (a JSON report written before reports recorded them); pass "
            "--dataset DIR (the dataset folder the current run ran on) to pair the unchanged "
            "questions by content"
        )
    shared = {s.qid for s in before.samples} & {s.qid for s in run.samples}
    return sorted(q for q in shared if base.hashes.get(q) != current_hashes.get(q))


def _rules_upgrade(
    before: RunResult, after: RunResult
) -> tuple[RunResult, RunResult, Callable[[str], bool]] | None:
    """``(older, newer, affects)`` when one run was tokenized with an earlier version of
    the other's rules (a file that records no tokenizer: WeKnora's rule, ``default/1``),
    ``affects`` the test of a text the two may tokenize differently; else ``None``."""
    affects = earlier_tokenizers(after.tokenizer_identity).get(before.tokenizer_identity)
    if affects is not None:
        return before, after, affects
    affects = earlier_tokenizers(before.tokenizer_identity).get(after.tokenizer_identity)
    if affects is not None:
        return after, before, affects
    return None


def _check_retokenized(
    base: Saved, before: RunResult, current: Saved, run: RunResult, changed: Sequence[int]
) -> None:
    """Refuse a pair of runs made with two versions of the rules when a compared
    question's text (the older run's answer, the reference) may get other tokens from
    the newer rules than the older run's numbers rest on."""
    if before.tokenizer_identity == run.tokenizer_identity:
        return
    upgrade = _rules_upgrade(before, run)
    assert upgrade is not None  # compare_saved refused any other pair of tokenizers
    older, newer, affects = upgrade
    compared = ({s.qid for s in before.samples} & {s.qid for s in run.samples}) - set(changed)
    references = {s.qid: s.generated_gt for s in newer.samples}
    found = retokenized(older, compared, references, affects)
    if found is None:
        return
    old_file = base.source if older is before else current.source
    raise ReportError(
        f"{_tokenizers(base.source, before, current.source, run)}, and the two tokenize "
        f"{found.line} differently: text metrics across tokenizers are not comparable; "
        f"compare runs of one [metrics] tokenizer (rerun {old_file}'s configuration with "
        "this version, or rebuild a baseline with --ragev-update-baseline)"
    )


def _tokenizers(first_file: str, first: RunResult, second_file: str, second: RunResult) -> str:
    """``a.json was computed with the tokenizer 'X', b.json with 'Y'`` (a file that
    records none: WeKnora's original rule, said in full)."""
    then = (f"with {second.tokenizer!r}" if second.tokenizer and first.tokenizer
            else tokenizer_origin(second.tokenizer))
    return f"{first_file} {tokenizer_origin(first.tokenizer)}, {second_file} {then}"


def _corpus_change(
    base: Saved, current: Saved, corpus_fingerprint: str | None, passages_after: int | None
) -> CorpusChange | None:
    before = base.corpus_fingerprint
    after = corpus_fingerprint if corpus_fingerprint is not None else current.corpus_fingerprint
    if before is None or after is None or before == after:
        return None

    def passages(saved: Saved) -> int | None:
        stats = saved.snapshot.dataset_stats if saved.snapshot is not None else {}
        value = stats.get("passages")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return CorpusChange(passages(base),
                        passages_after if passages_after is not None else passages(current))


def _names(variants: Collection[str]) -> str:
    return f"variant{'s' if len(variants) > 1 else ''} " + ", ".join(repr(v) for v in variants)


def _them(variants: Collection[str]) -> str:
    return "them" if len(variants) > 1 else "it"


# --------------------------------------------------------------------------- values
def _mapping(value: Any, where: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ReportError(
            f"{source}: {where} is {_kind(value)}, not an object; is this a pytest-ragev "
            "JSON report (--ragev-report)?"
        )
    return value


def _list(value: Any, where: str, source: str) -> list[Any]:
    if not isinstance(value, list):
        raise ReportError(f"{source}: {where} is {_kind(value)}, not a list")
    return value


def _strings(value: Any, where: str, source: str) -> list[str]:
    items = _list(value, where, source)
    if not all(isinstance(item, str) for item in items):
        raise ReportError(f"{source}: {where} must be a list of strings")
    return list(items)


def _ints(value: Any, where: str, source: str) -> list[int]:
    items = _list(value, where, source)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in items):
        raise ReportError(f"{source}: {where} is {items!r}, not a list of integers")
    return list(items)


def _mean(value: Any, where: str, source: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReportError(f"{source}: {where} is {value!r}, not a number or null")
    return float(value)


def _metric_mean(value: Any, where: str, source: str, name: str) -> float | None:
    mean = _mean(value, where, source)
    problem = None if mean is None else metric_value_problem(name, mean)
    if problem is not None:
        raise ReportError(f"{source}: {where} {problem}")
    return mean


def _count(value: Any, where: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReportError(f"{source}: {where} is {value!r}, not a count")
    return value


def _optional_count(value: Any, where: str, source: str) -> int | None:
    return None if value is None else _count(value, where, source)


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


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
