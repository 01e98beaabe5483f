"""Report-only text: the headline facts, the base-missing note, the correction note.

Numbers are formatted by :mod:`pytest_ragev.core.fmt`, shared with the gate's lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_ragev.core.fmt import percent, seconds
from pytest_ragev.core.results import RunResult
from pytest_ragev.evaluation import Outcome, chunk_share, usage
from pytest_ragev.gate.rules import CORRECTION_NAMES

if TYPE_CHECKING:
    from pytest_ragev.gate.compare import Comparison

#: What a report calls the tool, first in its title.
TITLE = "pytest-ragev"


def verdict_word(outcome: Outcome) -> str:
    """The headline's word: ``passed`` or ``failed``; a shard (``--ragev-shard``) that
    did not fail on its own questions is ``not gated (shard 2 of 3)``: its means are
    not the run's, and only the merged run has a verdict."""
    if outcome.shard is not None and outcome.passed:
        return f"not gated ({outcome.shard.spec.words})"
    return "passed" if outcome.passed else "failed"


def run_facts(outcome: Outcome, *, value: Callable[[str], str]) -> list[str]:
    """The headline facts of a report (task, dataset, profile, counts, duration, start).

    ``value`` renders a user-supplied value for the target format (escaping, code spans).
    """
    facts = []
    base = outcome.base
    if outcome.facts.task_id:
        facts.append(f"task {value(outcome.facts.task_id)}")
    if base is not None:
        facts.append(f"dataset {value(base.dataset_id)} ({base.fingerprint[:12]})")
        facts.append(f"profile {value(base.profile)}")
        facts.append(f"{len(base.samples)} questions")
    variants = sum(run.variant is not None for run in outcome.runs)
    if variants:
        facts.append(f"{variants} variant(s)")
    if base is not None:
        pipeline = pipeline_label(base)
        if pipeline:
            facts.append(f"pipeline {value(pipeline)}")
    facts.append(f"{outcome.errors} error(s)")
    facts.append(f"{outcome.fallbacks} fallback(s)")
    if base is not None:
        share = chunk_share(base.samples)
        if share.chunks:
            facts.append(f"unattributed chunks {share.unattributed}/{share.chunks} "
                         f"({percent(share.share)})")
        figures = usage(base.samples, outcome.pricing)
        if figures.reported:
            facts.append(figures.text())
    if outcome.facts.duration_s is not None:
        facts.append(seconds(outcome.facts.duration_s))
    return facts


def pipeline_label(run: RunResult) -> str | None:
    """The code that answered ``run``'s questions (``params.pipeline.answered_by``), else
    the configured pipeline name; ``None`` when the params say neither."""
    pipeline = run.params.get("pipeline")
    if not isinstance(pipeline, dict):
        return None
    label = pipeline.get("answered_by") or pipeline.get("name")
    return str(label) if label else None


def base_missing_note(outcome: Outcome, *, value: Callable[[str], str]) -> str | None:
    """``The base configuration did not run; variants in this run: k10, k20.`` for a
    session of variants only (``--ragev-variant`` without ``base``), else ``None``.

    ``value`` renders each variant name for the target format (escaping, code spans).
    """
    if not outcome.runs or outcome.base_ran:
        return None
    names = ", ".join(value(str(run.variant)) for run in outcome.runs)
    return f"The base configuration did not run; variants in this run: {names}."


def correction_note(comparison: Comparison) -> str:
    """`` p is adjusted for the 12 metrics tested together (Holm).`` when a correction
    applied, else empty."""
    adjusted = [m for m in comparison.metrics if m.family > 1 and m.correction != "none"]
    if not adjusted:
        return ""
    name = CORRECTION_NAMES.get(adjusted[0].correction, adjusted[0].correction)
    return f" p is adjusted for the {adjusted[0].family} metrics tested together ({name})."


def tolerance_note(comparison: Comparison, shown: Sequence[str] | None = None) -> str | None:
    """The line under a comparison table when a metric (of ``shown``, when given) is
    gated with ``mode = "tolerance"``: its p is computed and shown, but not read."""
    gated = [m for m in comparison.metrics if m.rule.enabled]
    tolerant = [m.metric for m in gated if m.rule.mode == "tolerance"]
    names = [name for name in tolerant if shown is None or name in shown]
    if not names:
        return None
    which = "every metric" if len(tolerant) == len(gated) else ", ".join(names)
    return (f'mode = "tolerance" for {which}: the verdict reads only the change against '
            "the tolerance; the p column is shown, not used")


#: Question ids a Markdown or HTML report lists per kind before "… (N more)"; the JSON
#: report has them all.
IDS_SHOWN = 50


def question_changes(comparison: Comparison) -> list[tuple[str, list[int]]]:
    """``[("added", [61, 62]), ("removed", [3]), ("changed", [7])]``: the kinds with ids."""
    kinds = [("added", comparison.added), ("removed", comparison.removed),
             ("changed", comparison.changed)]
    return [(kind, list(ids)) for kind, ids in kinds if ids]


#: What each kind of question change means, for the reports' legend.
CHANGE_MEANINGS = {
    "added": "not in the baseline",
    "removed": "in the baseline, not in this run",
    "changed": "question, relevant passages or reference answer edited since the baseline",
}

