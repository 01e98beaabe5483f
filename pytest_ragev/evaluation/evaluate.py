"""The end of a run as one pure step: the session's records in, the decision out.

At session end the plugin shell gathers an :class:`EvalInputs` (the plan, the dataset,
the records, what happened during the run) and :func:`evaluate` returns an
:class:`~pytest_ragev.evaluation.outcome.Outcome`: the scored runs, the threshold and
gate results, the failure lines and notes. Only the gate touches a file (the baseline);
the shell writes the reports and sets the exit status.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragev.core.fmt import listed
from pytest_ragev.core.paths import display_roots, portable_path, shown_path
from pytest_ragev.core.record import QuestionKey, Record, nonfinite_warning
from pytest_ragev.core.redact import redact
from pytest_ragev.core.version import __version__
from pytest_ragev.dataset import Dataset, corpus_fingerprint
from pytest_ragev.evaluation.outcome import (
    LOWEST_BY,
    ChunkShare,
    LowestQuestions,
    Outcome,
    RunFacts,
    ShardPart,
    chunk_share,
    lowest_questions,
    question_errors,
)
from pytest_ragev.evaluation.plan import RunPlan
from pytest_ragev.evaluation.quality import SimilarityScorer
from pytest_ragev.evaluation.repeats import repeat_summary
from pytest_ragev.evaluation.scoring import TextScoreMemo, build_run
from pytest_ragev.evaluation.slices import slice_tables, slice_threshold_results
from pytest_ragev.gate.thresholds import check_question, check_thresholds
from pytest_ragev.gate.workflow import GateInputs, GateOutcome, run_gate
from pytest_ragev.metrics import audit_tokens

#: Told the name of each end-of-run phase as it starts (``"scoring 100000 answers"``,
#: ``"gate"``, ``"baseline write"``), so the shell can print a progress line for it.
Phase = Callable[[str], None]


def _no_phase(name: str) -> None:
    """The default :data:`Phase`: say nothing."""


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
    #: Scores ``similarity`` when the plan measures it (``None``: the plan does not).
    similarity: SimilarityScorer | None = None
    #: The share of a sharded run (``--ragev-shard``): its outcome is not gated.
    shard: ShardPart | None = None



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
                "path": portable_path(config.dataset_path, config.source.parent),
                "fingerprint": dataset.fingerprint,
                "limit": plan.options.limit,
            },
            "pipeline": {"name": name, **pipeline_snapshot, **identity},
            "metrics": {"profile": plan.profile, "tokenizer": plan.tokenizer.identity,
                        **({"scorers": plan.scorers} if plan.quality else {}),
                        **({"judge": plan.judge.snapshot()} if plan.judge else {})},
            "thresholds": dict(config.thresholds),
            # Only what a run sets: a run without them records what it always did.
            **({"slice_thresholds": {name: dict(table) for name, table
                                     in config.slice_thresholds.items()}}
               if config.slice_thresholds else {}),
            **({"pricing": config.pricing.to_json()} if config.pricing else {}),
            **({"run": {"repeat": plan.repeat}} if plan.repeat > 1 else {}),
        }
    )
    return params


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
                  params=inputs.params[variant], scored=inputs.scored, memo=inputs.memo,
                  similarity=inputs.similarity)
        for variant in plan.variants if variant in by_variant
    )
    interrupted = None
    if facts.interrupted is not None:
        interrupted = (
            f"ragev: run {facts.interrupted}: {facts.finished} of {facts.total} "
            "questions answered"
        )
    error_list = question_errors(runs)
    fallbacks = sum(1 for run in runs for s in run.samples if s.meta.get("fallback"))
    # Thresholds hold the base configuration (the one you ship); variants are checked
    # only when one is selected alone. A shard holds part of the questions: its means
    # are not the run's, so neither thresholds nor the baseline judge them (the merged
    # run is judged once).
    gated = runs[:1] if runs and runs[0].variant is None else runs
    thresholds = () if inputs.shard is not None else tuple(
        result for run in gated for result in (
            *check_thresholds(run, plan.thresholds),
            *slice_threshold_results(run, plan.slice_thresholds)))
    below = [f"q{s.qid}" + (f" [{run.variant}]" if run.variant else "")
             for run in runs for s in run.samples if check_question(s, plan.item_thresholds)]
    floors = ([f"ragev: {len(below)} question(s) below their [item_thresholds]: "
               f"{listed(below)}"] if below else [])
    notes = [*facts.notes, *([] if inputs.shard is None else [inputs.shard.line])]
    if facts.duplicates:
        notes.append(
            f"ragev: {facts.duplicates} duplicate records for the same question were ignored "
            "(the first one counts)"
        )
    dataset = inputs.dataset
    baseline_path = plan.baseline_path if inputs.shard is None else None
    phase("gate")
    gate = run_gate(runs, GateInputs(
        rules=plan.rules,
        baseline_path=baseline_path,
        update=plan.options.update_baseline,
        interrupted=facts.interrupted is not None,
        configured=plan.configured,
        plugin_version=__version__,
        every_qid=tuple(pair.qid for pair in dataset.pairs),
        limit=plan.options.limit,
        source_fingerprint=dataset.source_fingerprint,
        # Only a run with a baseline needs the content hashes (computed on first use).
        hashes=dataset.question_hashes if baseline_path is not None else {},
        corpus_fingerprint=(corpus_fingerprint(dataset.corpus)
                            if baseline_path is not None else None),
        no_baseline=plan.options.no_baseline,
        answer_chars=plan.config.baseline_answer_chars,
    ), phase=phase)
    phase("verdict")
    repeats = repeat_summary(runs[0] if runs else None, plan.rules)
    roots = display_roots(facts.rootdir, plan.config.base_dir)
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
    nonfinite = nonfinite_warning(inputs.records)
    outcome = Outcome(
        runs=runs,
        facts=facts,
        thresholds=thresholds,
        gate=gate,
        failures=(*(t.reason for t in thresholds if t.reason is not None), *floors,
                  *gate.failures),
        notes=(*notes, *gate.notes, *(repeats.lines() if repeats is not None else ())),
        warnings=(*facts.warnings, *([nonfinite] if nonfinite else []), *dataset.warnings,
                  *([attribution] if attribution else []), *([tokens] if tokens else [])),
        errors=len(error_list),
        fallbacks=fallbacks,
        interrupted=interrupted,
        error_list=error_list,
        lowest=lowest,
        passages=_view_passages(dataset.corpus, lowest, gate),
        baseline_shown=(None if gate.baseline_path is None
                        else shown_path(gate.baseline_path, roots)),
        report_html=None if plan.report_html is None else shown_path(plan.report_html, roots),
        # Computed once, on first use: for the baseline, or for the JSON report's samples.
        question_hashes=(dataset.question_hashes if baseline_path is not None
                         or plan.report_json is not None else {}),
        pricing=plan.config.pricing,
        slices=slice_tables(runs, plan.rules.min_slice),
        repeats=repeats,
        shard=inputs.shard,
    )
    return outcome.shown(roots)


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
