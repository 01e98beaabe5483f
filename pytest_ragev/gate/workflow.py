"""The baseline life cycle of one session, as one function: :func:`run_gate`.

Given the session's runs and a :class:`GateInputs`, it decides what to compare, what to
write and what to say, and returns a :class:`GateOutcome`. It owns the baseline file
(the gate's own artefact, as in pytest-regressions): it creates a missing one, writes
``*.obtained.json`` beside it after a regression, removes a stale one after a pass and
writes the file on ``--ragev-update-baseline``. Everything else is a value.

* ``--ragev-no-baseline``: nothing compared, a note says so (thresholds still apply).
* No baseline path: nothing to compare (``--ragev-update-baseline`` then fails).
* ``update``: write (or merge into) the baseline and pass.
* The file is missing: write it and fail, asking to commit it.
* Otherwise: compare every run with its own recorded run, pairing questions by qid and
  content hash. A baseline that cannot be used (unreadable, another metric profile, a
  required variant missing, a dataset edit under ``strict_dataset``, nothing left to
  pair) is not an exception: the outcome says "not compared" and why
  (:attr:`GateOutcome.not_compared`), so the reports are still written; the shell then
  exits with status 4.
* A baseline (or ``*.obtained.json``) that cannot be written (a full disk, a read-only
  folder, a folder in its place) is not an exception either: one failure line names the
  file and the cause (:attr:`GateOutcome.write_error`), the previous file stays as it
  was, the reports are written, and the shell exits with status 4.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.fmt import listed
from pytest_ragev.core.io import WRITE_ERRORS, write_error_cause, write_error_fix
from pytest_ragev.core.results import RunResult
from pytest_ragev.gate.compare import Comparison
from pytest_ragev.gate.diffs import QuestionDiff, VariantTable, compare_variants
from pytest_ragev.gate.pairing import CorpusChange, Judgement, judge_against
from pytest_ragev.gate.rules import GateRules
from pytest_ragev.gate.snapshot import (
    AnswerChars,
    Snapshot,
    compressed,
    load_snapshot,
    merge_snapshot,
    obtained_path,
    write_snapshot,
)


@dataclass(frozen=True)
class GateInputs:
    """What the gate needs to know about the session besides its runs.

    ``configured`` lists every configuration of the config file (``None`` for the base
    one), whether it ran or not; ``every_qid`` the dataset's question ids (to say which
    questions a written baseline lacks); ``source_fingerprint`` the full dataset's
    fingerprint of a ``--ragev-limit`` run (``None`` otherwise). ``hashes`` maps each
    question of the dataset to its content hash (``Dataset.question_hashes``) and
    ``corpus_fingerprint`` identifies its corpus: a baseline records both, so a later
    run on an edited dataset compares the unchanged questions. ``no_baseline``
    (``--ragev-no-baseline``) switches the baseline gate off for the run.
    ``answer_chars`` is ``[baseline] answer_chars``: how much of a long answer a written
    baseline keeps (:func:`~pytest_ragev.gate.snapshot.answer_limit`).
    """

    rules: GateRules = field(default_factory=GateRules)
    baseline_path: Path | None = None
    update: bool = False
    interrupted: bool = False
    configured: tuple[str | None, ...] = (None,)
    plugin_version: str = ""
    every_qid: tuple[int, ...] = ()
    limit: int | None = None
    source_fingerprint: str | None = None
    hashes: Mapping[int, str] = field(default_factory=dict)
    corpus_fingerprint: str | None = None
    no_baseline: bool = False
    answer_chars: AnswerChars = "auto"


@dataclass(frozen=True)
class GateOutcome:
    """What the gate found: comparisons, the most regressed questions, lines to print.

    ``failures`` fail the verdict; ``notes`` are printed and reported. ``not_compared``
    is the reason the baseline could not be used (the run still reports its own
    metrics; the shell exits with status 4); ``new_variants`` the variants that ran
    but that the baseline has no run of (warned about, not compared);
    ``corpus_change`` set when the corpus changed since the baseline; ``write_error``
    the line saying which baseline file could not be written and why (it is among the
    ``failures`` too; the shell exits with status 4).
    """

    rules: GateRules = field(default_factory=GateRules)
    baseline_path: Path | None = None
    baseline_runs: dict[str | None, RunResult] = field(default_factory=dict)
    comparisons: tuple[Comparison, ...] = ()
    regressions: tuple[QuestionDiff, ...] = ()
    variant_table: VariantTable | None = None
    failures: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    not_compared: str | None = None
    new_variants: tuple[str, ...] = ()
    corpus_change: CorpusChange | None = None
    write_error: str | None = None

    @property
    def passed(self) -> bool:
        """Whether the gate adds no failure."""
        return not self.failures


def not_compared_line(reason: str) -> str:
    """The failure line of a gate that could not use its baseline."""
    return f"ragev: gate not compared: {reason.removeprefix('ragev: ')}"


def _not_compared(outcome: GateOutcome, reason: str) -> GateOutcome:
    # The reason is a failure line too, so every report lists it where failures go.
    return replace(outcome, not_compared=reason.removeprefix("ragev: "),
                   failures=(not_compared_line(reason),))


def _name(variant: str | None) -> str:
    return "base" if variant is None else variant


def _label(variant: str | None) -> str:
    return "the base configuration" if variant is None else f"variant {variant!r}"


def _comparable(runs: Sequence[RunResult], source_fingerprint: str | None) -> list[RunResult]:
    """The runs as the baseline sees them: a ``--ragev-limit`` run carries its parent's fingerprint.

    ``Dataset.limit`` gives the limited dataset a fingerprint of its own (answer caches
    and reports must not mix it up with the full one) and remembers the full dataset's as
    ``source_fingerprint``. Against a baseline the limited run is the full dataset with
    questions left out: the overlap logic lists them instead of refusing the comparison.
    """
    if source_fingerprint is None:
        return list(runs)
    return [
        run if run.fingerprint == source_fingerprint
        else replace(run, fingerprint=source_fingerprint)
        for run in runs
    ]


def _subset_notes(runs: Sequence[RunResult], path: Path, inputs: GateInputs) -> list[str]:
    """Warnings when the written baseline holds fewer questions than the dataset has."""
    notes = []
    for run in runs:
        ran = {sample.qid for sample in run.samples}
        missing = [qid for qid in inputs.every_qid if qid not in ran]
        if missing:
            notes.append(
                f"ragev: warning: {path} now holds {len(ran)} of {len(inputs.every_qid)} "
                f"questions for {_label(run.variant)} (the others were deselected or not run, "
                f"and are not gated until recorded): {listed(missing)}"
            )
    if inputs.limit and inputs.source_fingerprint is not None:
        notes.append(
            f"ragev: warning: --ragev-limit {inputs.limit}: {path} holds only the first "
            f"{inputs.limit} questions; rerun without the limit to record the whole dataset"
        )
    return notes


def _write(path: Path, snapshot: Snapshot, what: str = "baseline") -> tuple[int, str | None]:
    """Write ``snapshot`` to ``path``: the bytes written, and the failure line when that
    is impossible (then nothing was written)."""
    try:
        written = write_snapshot(path, snapshot)
    except WRITE_ERRORS as exc:
        cause, content = write_error_cause(exc)
        fix = ("return finite numbers from custom metrics" if content else
               write_error_fix(exc, elsewhere="point [baseline] path (--ragev-baseline) "
                                              "at another file"))
        return 0, (f"ragev: could not write the {what} {path}: {cause}; the previous file, "
                   f"if any, is untouched: {fix}")
    return written, None


def _write_failed(outcome: GateOutcome, line: str) -> GateOutcome:
    return replace(outcome, write_error=line, failures=(*outcome.failures, line))


#: A plain baseline larger than this gets a note suggesting the compressed form.
LARGE_BASELINE = 20_000_000


def _size_note(path: Path, written: int) -> list[str]:
    """A note when a plain JSON baseline is large enough to be worth compressing."""
    if written <= LARGE_BASELINE or compressed(path):
        return []
    return [
        f"ragev: note: {path} is {written / 1e6:.0f} MB; set [baseline] path to "
        f"{path.name}.gz to store it gzip-compressed, about 4x smaller (git diff reads it "
        "through a textconv: see docs/baselines.md)"
    ]


def _remove_stale(path: Path) -> str | None:
    """Remove the ``.obtained.json`` of an earlier failed run; the note to print, if any."""
    obtained = obtained_path(path)
    try:
        obtained.unlink()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"ragev: could not remove the stale {obtained}: {exc}"
    return f"ragev: removed the stale {obtained} (this run passed)"


def _quiet(name: str) -> None:
    """Says nothing about a phase."""


def run_gate(
    runs: Sequence[RunResult], inputs: GateInputs, *, phase: Callable[[str], None] = _quiet
) -> GateOutcome:
    """Run the baseline workflow and the variant comparison for one session.

    ``phase("baseline write")`` is called before the baseline (or the
    ``*.obtained.json``) is written, so the shell can say what the end of a run is doing.

    Every run is compared with its own recorded run (the base configuration with the
    base run, each variant with its variant run), whichever of them were selected. A
    session that ran only some configurations (``--ragev-variant``, ``-k``) compares
    those, and ``update`` merges them into the file, keeping the recorded runs of the
    configurations that did not run.
    """
    rules = inputs.rules
    table = (compare_variants(runs[0], runs[1:], rules)
             if len(runs) > 1 and runs[0].variant is None else None)
    outcome = GateOutcome(rules=rules, variant_table=table, baseline_path=inputs.baseline_path)
    path = inputs.baseline_path
    if inputs.no_baseline:
        return replace(outcome, baseline_path=None, notes=(
            "ragev: --ragev-no-baseline: not gated against a baseline this run (thresholds "
            "still apply)",
        ))
    if path is None:
        if inputs.update:
            return replace(outcome, failures=(
                "ragev: --ragev-update-baseline needs a baseline path; set [baseline] path "
                "in the config or pass --ragev-baseline PATH",
            ))
        return outcome
    if not runs:
        if inputs.update:
            return replace(outcome, failures=(
                f"ragev: --ragev-update-baseline: no question ran, so {path} was left "
                "untouched; check -k, --ragev-variant and the node ids you selected",
            ))
        return outcome
    if inputs.interrupted:
        return replace(outcome, notes=(f"ragev: run interrupted: baseline {path} left untouched",))
    runs = _comparable(runs, inputs.source_fingerprint)
    if inputs.update:
        return _update(runs, path, inputs, outcome, phase)
    if not path.exists():
        if not any(run.variant is None for run in runs):
            return replace(outcome, failures=(
                f"ragev: baseline {path} not found, and the base configuration did not run "
                "(only variants were selected); run without --ragev-variant to create it",
            ))
        phase("baseline write")
        written, failed = _write(path, Snapshot.from_runs(
            runs, plugin_version=inputs.plugin_version, hashes=inputs.hashes,
            corpus_fingerprint=inputs.corpus_fingerprint, answer_chars=inputs.answer_chars,
        ))
        if failed is not None:
            return _write_failed(outcome, failed)
        return replace(
            outcome,
            notes=(*_subset_notes(runs, path, inputs), *_size_note(path, written)),
            failures=(f"ragev: baseline not found, created {path}; commit it and rerun",),
        )
    return _compare(runs, path, inputs, outcome, phase)


def _update(
    runs: Sequence[RunResult], path: Path, inputs: GateInputs, outcome: GateOutcome,
    phase: Callable[[str], None],
) -> GateOutcome:
    """Write ``runs`` into the baseline (merging a partial session), with the notes to print."""
    ran = {run.variant for run in runs}
    complete = all(name in ran for name in inputs.configured)
    # A complete session replaces the file (even a damaged one); a partial one must
    # read it to keep the configurations that did not run.
    existing = None
    if not complete and path.exists():
        try:
            existing = load_snapshot(path)
        except BaselineError as exc:
            raise BaselineError(
                f"{exc} (a partial update keeps the file's other runs, so it must read "
                "the file: run --ragev-update-baseline without --ragev-variant or -k to "
                "replace it)"
            ) from None
    merged = merge_snapshot(existing, runs, plugin_version=inputs.plugin_version,
                            keep=inputs.configured, hashes=inputs.hashes,
                            corpus_fingerprint=inputs.corpus_fingerprint,
                            answer_chars=inputs.answer_chars)
    phase("baseline write")
    size, failed = _write(path, merged.snapshot)
    if failed is not None:
        return _write_failed(outcome, failed)
    message = f"ragev: baseline written to {path}"
    if not complete:
        written = ", ".join(_name(run.variant) for run in runs)
        kept = ", ".join(_name(v) for v in merged.kept) or "nothing"
        message += f" (updated: {written}; kept from the previous file: {kept})"
    notes = [message]
    if merged.dropped and existing is not None:
        notes.append(
            f"ragev: dropped from {path}: {', '.join(_name(v) for v in merged.dropped)} "
            "(no longer configured, or recorded on another dataset, metric profile or "
            "tokenizer)"
        )
    notes += _subset_notes(runs, path, inputs)
    notes += _size_note(path, size)
    stale = _remove_stale(path)
    return replace(outcome, notes=(*notes, *([stale] if stale else [])))


def judged(
    judgement: Judgement, *, rules: GateRules, baseline_path: Path | None,
    variant_table: VariantTable | None = None,
) -> GateOutcome:
    """The gate's outcome of a comparison (:func:`~pytest_ragev.gate.pairing.judge_against`):
    what the plugin's gate and ``ragev report compare`` both report."""
    outcome = GateOutcome(rules=rules, variant_table=variant_table, baseline_path=baseline_path)
    if judgement.not_compared is not None:
        return _not_compared(outcome, judgement.not_compared)
    return replace(
        outcome, baseline_runs=dict(judgement.recorded_runs),
        comparisons=judgement.comparisons, regressions=judgement.regressions,
        failures=judgement.failures, notes=judgement.notes,
        new_variants=judgement.new_variants, corpus_change=judgement.corpus_change,
    )


def _compare(
    runs: Sequence[RunResult], path: Path, inputs: GateInputs, outcome: GateOutcome,
    phase: Callable[[str], None],
) -> GateOutcome:
    try:
        baseline = load_snapshot(path)
    except BaselineError as exc:
        return _not_compared(outcome, str(exc))
    judgement = judge_against(baseline.recorded(), runs, inputs.rules, hashes=inputs.hashes,
                              corpus_fingerprint=inputs.corpus_fingerprint)
    gate = judged(judgement, rules=inputs.rules, baseline_path=path,
                  variant_table=outcome.variant_table)
    if judgement.not_compared is not None:
        return gate
    if judgement.passed and not judgement.new_variants:
        stale = _remove_stale(path)
        return gate if stale is None else replace(gate, notes=(*gate.notes, stale))
    # A regression, or variants the file lacks: this run's snapshot beside the baseline.
    obtained = obtained_path(path)
    merged = merge_snapshot(baseline, runs, plugin_version=inputs.plugin_version,
                            keep=inputs.configured, hashes=inputs.hashes,
                            corpus_fingerprint=inputs.corpus_fingerprint,
                            answer_chars=inputs.answer_chars)
    phase("baseline write")
    _, write_error = _write(obtained, merged.snapshot, what="run's snapshot")
    if write_error is not None:
        return _write_failed(gate, write_error)
    return replace(gate, notes=(
        *gate.notes, f"ragev: this run's snapshot written to {obtained}; diff it against {path}"))
