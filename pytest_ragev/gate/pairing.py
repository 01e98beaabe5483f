"""A run against its recorded run: whether they can be compared, and the comparison.

The one comparison path of the package. The plugin's gate (:func:`~pytest_ragev.gate.
workflow.run_gate`, the recorded side a baseline file) and ``ragev report compare``
(the recorded side any saved file) both call :func:`judge_against`, so on the same two
runs they pair the same questions, refuse for the same reasons and print the same
lines, word for word.

The recorded side is a :class:`Recorded`: the runs a file holds and what they ran on.
:func:`judge_against` then decides, in this order:

1. numbers that cannot sit side by side at all: another metric profile, another text
   tokenizer (:func:`refusal`);
2. configurations the file has no run of: the base configuration (not compared), a
   variant (a warning, or not compared under ``[gate] require_all_variants``);
3. how each run's questions pair with the recorded run's (:func:`pair_questions`): on
   the same dataset every shared question; on an edited one the questions whose content
   hash did not change (``[gate] strict_dataset`` refuses any edit), and none at all is
   a refusal;
4. the paired comparison of every metric (:func:`~pytest_ragev.gate.compare.compare`),
   the most regressed questions, whether the corpus changed, and what the test cannot
   see at this size (:func:`~pytest_ragev.gate.compare.power_lines`).

A refusal is part of the :class:`Judgement` (``not_compared``), never an exception:
the caller says it its own way (the plugin exits 4 with every report written, the
command exits 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_ragev.core.results import RunResult
from pytest_ragev.gate.compare import Comparison, compare, paired_table, power_lines
from pytest_ragev.gate.diffs import QuestionDiff, top_regressions
from pytest_ragev.gate.rules import GateRules

#: How every refusal line ends: what makes the two comparable again.
FIX = "re-baseline with --ragev-update-baseline"


@dataclass(frozen=True)
class Recorded:
    """The recorded side of a comparison: the runs of one file and what they ran on.

    ``source`` names the file in every line; ``runs`` holds the base configuration's run
    first (when the file has one), then the variants'. ``hashes`` maps each recorded
    question to its content hash (empty when the file records none), ``corpus_fingerprint``
    and ``passages`` the corpus the runs ran on (``None`` when unknown).
    """

    source: str
    runs: tuple[RunResult, ...]
    hashes: Mapping[int, str] = field(default_factory=dict)
    corpus_fingerprint: str | None = None
    passages: int | None = None

    def run_for(self, variant: str | None) -> RunResult | None:
        """The recorded run of ``variant`` (``None``: the base configuration), if any."""
        return next((run for run in self.runs if run.variant == variant), None)

    @property
    def variants(self) -> list[str]:
        """The variants the file has a run of, in its order."""
        return [run.variant for run in self.runs if run.variant is not None]


@dataclass(frozen=True)
class Overlap:
    """Which questions a comparison pairs with the recorded run's.

    ``common_qids``: in both, with the same content hash (compared); ``added``: only in
    this run; ``removed``: only in the recorded run; ``changed``: in both, but the
    question, its relevant passages or its reference answer were edited since (listed,
    not compared).
    """

    common_qids: list[int]
    added: list[int]
    removed: list[int]
    changed: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class CorpusChange:
    """The corpus changed since the recorded runs: passages added, removed or edited.

    Retrieval can move for every question, not only for the edited ones. The counts
    are ``None`` when a file does not record them.
    """

    passages_before: int | None
    passages_after: int | None

    @property
    def line(self) -> str:
        """The warning the reports print."""
        before, after = self.passages_before, self.passages_after
        if before is not None and after is not None and before != after:
            what = f"{before} → {after} passages"
        elif after is not None:
            what = f"{after} passages, texts edited"
        else:
            what = "passages edited"
        return (
            f"ragev: warning: the corpus changed since the baseline ({what}): retrieval can "
            "move for every question, so the compared questions measure the corpus change "
            "as well as the pipeline's"
        )


@dataclass(frozen=True)
class Judgement:
    """What :func:`judge_against` found.

    ``not_compared`` is the line saying why the runs could not be compared at all
    (``None`` when they were: then every other field is filled in). ``failures`` are
    the regressed metrics' lines, ``notes`` the warnings (new variants, a changed
    corpus, what the test cannot see), ``recorded_runs`` the recorded run each compared
    configuration was compared with.
    """

    not_compared: str | None = None
    comparisons: tuple[Comparison, ...] = ()
    regressions: tuple[QuestionDiff, ...] = ()
    recorded_runs: Mapping[str | None, RunResult] = field(default_factory=dict)
    failures: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    new_variants: tuple[str, ...] = ()
    corpus_change: CorpusChange | None = None

    @property
    def passed(self) -> bool:
        """Compared, and no metric regressed."""
        return self.not_compared is None and all(c.passed for c in self.comparisons)


def refusal(recorded: Recorded, run: RunResult) -> str | None:
    """Why ``run``'s numbers cannot sit beside the recorded ones at all (another metric
    profile or text tokenizer, an answer-quality metric scored by another model or
    prompt), or ``None`` when they can."""
    before = recorded.run_for(run.variant) or (recorded.runs[0] if recorded.runs else None)
    if before is None:
        return None
    if before.profile != run.profile:
        return (
            f"ragev: {recorded.source} was computed with metric profile {before.profile!r}, "
            f"this run uses {run.profile!r}; numbers across metric profiles are not "
            f"comparable: {FIX}, or set [metrics] profile back"
        )
    if before.tokenizer != run.tokenizer:
        return (
            f"ragev: {recorded.source} was computed with the tokenizer {before.tokenizer!r}, "
            f"this run uses {run.tokenizer!r}; text metrics across tokenizers are not "
            f"comparable: {FIX}, or set [metrics] tokenizer back"
        )
    for metric in sorted(before.scorers.keys() & run.scorers.keys()):
        if before.scorers[metric] != run.scorers[metric]:
            return (
                f"ragev: {recorded.source} scored {metric} with {before.scorers[metric]!r}, "
                f"this run with {run.scorers[metric]!r}; scores of another model or prompt "
                f"are not comparable: {FIX}, or set the judge (or model) back"
            )
    return None


def dataset_changed_line(recorded: Recorded, before: RunResult, run: RunResult) -> str:
    """``ragev: <file> was computed on dataset 'x' (fingerprint …), this run on 'y' (…)``."""
    return (
        f"ragev: {recorded.source} was computed on dataset {before.dataset_id!r} (fingerprint "
        f"{before.fingerprint[:12]}), this run on {run.dataset_id!r} (fingerprint "
        f"{run.fingerprint[:12]})"
    )


def missing_variants_line(
    recorded: Recorded, names: Sequence[str], *, required: bool, because: str = ""
) -> str:
    """The one line naming every variant of this run that the file has no run of.

    ``required`` makes it the reason the runs were not compared (``because`` says why,
    e.g. ``[gate] require_all_variants = true``); otherwise it is a warning: the
    variants are new, and not compared.
    """
    quoted = ", ".join(repr(name) for name in names)
    them = "them" if len(names) > 1 else "it"
    record = "--ragev-update-baseline " + " ".join(f"--ragev-variant {name}" for name in names)
    if required:
        return (
            f"ragev: {recorded.source} has no run of variant {quoted} (it has: "
            f"{', '.join(recorded.variants) or 'none'}){because}; record {them} with "
            f"{record} (the other runs in the file are kept)"
        )
    are = "are" if len(names) > 1 else "is"
    return (
        f"ragev: warning: variant {quoted} {are} new, not compared ({recorded.source} has no "
        f"run of {them}); record {them} with {record} (the other runs in the file are kept)"
    )


def pair_questions(
    recorded: Recorded, before: RunResult, run: RunResult, hashes: Mapping[int, str], *,
    strict: bool = False,
) -> Overlap | str:
    """How ``run``'s questions pair with ``before``'s (its run in ``recorded``), or the
    line saying why they cannot pair.

    On the same dataset (fingerprint) every shared question is compared. On an edited
    dataset, questions pair by qid **and** content hash (``hashes``: the current
    dataset's, qid -> hash): unchanged ones are compared, edited ones listed as
    ``changed``; refused when ``strict`` (``[gate] strict_dataset``), when either side
    records no hashes, or when no unchanged question is shared.
    """
    same_data = before.fingerprint == run.fingerprint
    if not same_data:
        changed = dataset_changed_line(recorded, before, run)
        if strict:
            return (f"{changed}; the data changed and [gate] strict_dataset = true: {FIX}, or "
                    "unset strict_dataset to compare the unchanged questions")
        if not recorded.hashes:
            return (f"{changed}; the data changed, and {recorded.source} records no "
                    "per-question content hashes to pair the unchanged questions: "
                    f"{FIX}, or compare runs of one dataset")
        if not hashes:
            return (f"{changed}; the data changed, and this run records no per-question "
                    "content hashes to pair the unchanged questions: pass the dataset it "
                    "ran on (ragev report compare --dataset DIR)")
    before_qids = {s.qid for s in before.samples}
    after_qids = {s.qid for s in run.samples}
    shared = sorted(before_qids & after_qids)
    edited = [] if same_data else [
        qid for qid in shared if recorded.hashes.get(qid) != hashes.get(qid)]
    common = sorted(set(shared) - set(edited))
    if not common:
        label = "" if run.variant is None else f" (variant {run.variant!r})"
        since = f", {len(edited)} of them edited since" if edited else ""
        return (f"ragev: {recorded.source} and this run{label} share no unchanged question "
                f"({len(before_qids)} in the baseline, {len(after_qids)} now{since}); {FIX}")
    return Overlap(common_qids=common, added=sorted(after_qids - before_qids),
                   removed=sorted(before_qids - after_qids), changed=edited)


def repeats_line(
    recorded: Recorded, pairs: Sequence[tuple[RunResult, RunResult]]
) -> str | None:
    """The one line saying that the recorded runs answered each question another number
    of times than this run (``--ragev-repeat``), or ``None`` when they agree. Compared all
    the same: each side's per-question values are the means of its answers."""
    differ = [(before.repeat, run.repeat) for before, run in pairs if before.repeat != run.repeat]
    if not differ:
        return None
    before, now = differ[0]
    return (f"ragev: note: {recorded.source} answered each question {_times(before)}, this run "
            f"{_times(now)}; compared all the same (each side's per-question values are the "
            "means of its answers), but the side with fewer answers is the noisier")


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def corpus_change(
    recorded: Recorded, corpus_fingerprint: str | None, passages: int | None
) -> CorpusChange | None:
    """How the corpus changed since the recorded runs, or ``None`` when it did not (or
    either side does not know)."""
    before = recorded.corpus_fingerprint
    if before is None or corpus_fingerprint is None or before == corpus_fingerprint:
        return None
    return CorpusChange(recorded.passages, passages)


def judge_against(
    recorded: Recorded,
    runs: Sequence[RunResult],
    rules: GateRules,
    *,
    hashes: Mapping[int, str],
    corpus_fingerprint: str | None = None,
    passages: int | None = None,
) -> Judgement:
    """Compare every run with its recorded run and judge it (see the module's docstring).

    ``hashes`` maps this run's questions to their content hashes, ``corpus_fingerprint``
    and ``passages`` describe the corpus it ran on (``passages`` defaults to what the
    first run's dataset stats say).
    """
    for run in runs:
        reason = refusal(recorded, run)
        if reason is not None:
            return Judgement(not_compared=reason)
    if any(run.variant is None for run in runs) and recorded.run_for(None) is None:
        return Judgement(not_compared=(
            f"ragev: {recorded.source} has no run of the base configuration (only variants "
            f"ran: {', '.join(recorded.variants)}); compare against a file that records it"))
    missing = [str(run.variant) for run in runs if recorded.run_for(run.variant) is None]
    if missing and rules.require_all_variants:
        return Judgement(not_compared=missing_variants_line(
            recorded, missing, required=True, because=" and [gate] require_all_variants = true"))
    pairs: list[tuple[RunResult, RunResult, Overlap]] = []
    for run in runs:
        before = recorded.run_for(run.variant)
        if before is None:
            continue
        overlap = pair_questions(recorded, before, run, hashes, strict=rules.strict_dataset)
        if isinstance(overlap, str):
            return Judgement(not_compared=overlap)
        pairs.append((before, run, overlap))
    notes: list[str] = []
    if passages is None and runs:
        counted = runs[0].dataset_stats.get("passages")
        passages = counted if type(counted) is int else None
    change = (corpus_change(recorded, corpus_fingerprint, passages)
              if any(before.fingerprint != run.fingerprint for before, run, _ in pairs) else None)
    if change is not None:
        notes.append(change.line)
    if missing:
        notes.append(missing_variants_line(recorded, missing, required=False))
    repeat_line = repeats_line(recorded, [(before, run) for before, run, _ in pairs])
    if repeat_line is not None:
        notes.append(repeat_line)
    if rules.slices and pairs and not any(s.slices for _, run, _ in pairs for s in run.samples):
        notes.append("ragev: note: [gate] slices: this run records no slices (a baseline file "
                     "or a report of an earlier pytest-ragev), so no slice was tested")
    comparisons: list[Comparison] = []
    regressions: list[QuestionDiff] = []
    for before, run, overlap in pairs:
        # Paired once: the comparison and the ranking of the questions read one table.
        table = paired_table(before, run, skip=overlap.changed)
        comparisons.append(compare(before, run, rules, changed=overlap.changed, table=table))
        regressions += top_regressions(before, run, rules.top_regressions,
                                       skip=overlap.changed, table=table)
    notes += power_lines(comparisons, rules,
                         answers=max((run.repeat for _, run, _ in pairs), default=1))
    return Judgement(
        comparisons=tuple(comparisons),
        regressions=tuple(regressions),
        recorded_runs={run.variant: before for before, run, _ in pairs},
        failures=tuple(line for c in comparisons for line in c.failure_lines),
        notes=tuple(notes),
        new_variants=tuple(missing),
        corpus_change=change,
    )
