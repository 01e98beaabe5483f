"""Baseline snapshots: the committed record of a run that later runs are gated against.

A snapshot is one JSON file (``ragev-baseline.json`` by default) written for code
review: stable key order, ``ensure_ascii=False``, indent 2 with one compact line per
question, questions sorted by qid, settings with sorted keys, so re-writing an
unchanged run gives identical bytes and a changed run gives a readable diff, one line
per changed question. A path ending in ``.gz`` is written gzip-compressed (for large
datasets; ``git diff`` reads it through a textconv); either form is read. One file
holds the base run and every variant::

    {
      "schema": "pytest-ragev-baseline",
      "schema_version": 2,
      "plugin_version": "0.1.0",
      "profile": "...",
      "dataset": {"id": "...", "fingerprint": "...", "corpus_fingerprint": "...",
                  "stats": {...}},
      "base": RUN,
      "variants": {"<variant name>": RUN, ...}
    }

    RUN = {
      "settings_hash": "...",
      "settings": {... redacted settings snapshot ...},
      "metrics": {"<metric>": {"mean": 0.61, "n": 400, "direction": "higher"}, ...},
      "questions": [
        {"qid": 1, "hash": "9f2c...", "question": "...", "metrics": {...},
         "retrieval_ids": [...], "retrieval_gt": [[...]], "generated_text": "...",
         "error": null},
        {"qid": 2, ..., "generated_text": "<the first N characters>",
         "answer_digest": "4e1c...", "answer_chars": 812, "error": null},
        ...
      ]
    }

``hash`` is the question's content hash (``pytest_ragev.dataset.question_hash``: its
text, its relevant passages' texts and grades, its reference answer): a later run on an
edited dataset compares the questions whose hash did not change and lists the others.
Schema version 1 (still read, never written) had no hashes and no corpus fingerprint
and named the ids ``retrieved_ids``/``relevant_ids``; any dataset edit voids such a file.

A file may keep only the first ``N`` characters of an answer longer than that (``[baseline]
answer_chars``; by default of a file with more than :data:`AUTO_WHOLE_ENTRIES` question
entries): the gate reads the metrics, and the diffs show the start of the answer and tell
a changed answer by ``answer_digest`` (:func:`~pytest_ragev.core.digest.text_digest` of
the whole answer), so a 100k-question baseline stays within some 20 MB compressed. Such a
file is schema version 3; a file that keeps every answer whole is written as version 2,
which earlier releases read.

Nothing here imports pytest or numpy.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_ragev.core.digest import text_digest
from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.fmt import listed, shorten
from pytest_ragev.core.gcpause import paused_gc
from pytest_ragev.core.io import atomic_write_bytes, dumps_json, encoded_blocks, iter_json
from pytest_ragev.core.results import (
    LEGACY_TOKENIZER,
    MetricSummary,
    RunResult,
    SampleResult,
    metric_value_problem,
)

#: Identifies a pytest-ragev baseline file.
SCHEMA = "pytest-ragev-baseline"
#: The newest layout this version writes; bumped whenever the layout changes. A file
#: that keeps every answer whole is written in :data:`WHOLE_ANSWERS_VERSION`'s layout.
SCHEMA_VERSION = 3
#: Version 3 added the cut answers (``answer_digest``, ``answer_chars``); a file without
#: one is version 2 to the byte.
WHOLE_ANSWERS_VERSION = 2
#: The lists of a baseline written one object per line (see ``core.io.dumps_json``).
_RECORD_LISTS = ("questions",)
#: The layouts this version reads; others are refused.
READABLE_VERSIONS: tuple[int, ...] = (1, 2, 3)

#: ``[baseline] answer_chars = "auto"`` (the default) keeps every answer whole in a file
#: of up to this many question entries (questions times configurations) and cuts longer
#: answers to :data:`AUTO_ANSWER_CHARS` characters in a larger one.
AUTO_WHOLE_ENTRIES = 10_000
#: What the Markdown diff shows of an answer (the terminal shows 50). Measured on the
#: built-in pipeline's 100k-question baseline (answers of some 440 characters of synthetic
#: text, which compresses worse than prose), as ``.json.gz``: whole answers 31.6 MB, cut
#: to 100 characters 19.8 MB, to 80 18.8 MB, no answer text about 14 MB.
AUTO_ANSWER_CHARS = 80
#: What ``[baseline] answer_chars`` holds: a number of characters, "all" or "auto".
AnswerChars = int | str

_FIX = "re-baseline on this version with --ragev-update-baseline"
_DIGEST = re.compile(r"[0-9a-f]{16}")

#: The earlier tokenizers a run's text metrics stay comparable with on some texts:
#: identity -> whether a text may get other tokens from it than from the run's
#: tokenizer (``pytest_ragev.metrics.tokenizers.earlier_tokenizers`` of the run's
#: identity). A recorded run made with one of them is compared only when none of the
#: texts its numbers rest on may (:func:`retokenized`); with any other tokenizer, never.
TokenizerUpgrades = Mapping[str, Callable[[str], bool]]


@dataclass(frozen=True)
class Snapshot:
    """The content of a baseline file: the base run, its variants and what they ran on.

    ``hashes`` maps each recorded question's qid to its content hash and
    ``corpus_fingerprint`` identifies the corpus (both empty/``None`` in a schema 1
    file, which had neither). Every run of a snapshot ran on the same dataset, so one
    mapping serves them all. ``source`` is the file a snapshot was loaded from (``None``
    when built from runs); it only serves error messages and is not part of the JSON.
    """

    plugin_version: str
    profile: str
    dataset_id: str
    fingerprint: str
    dataset_stats: dict[str, Any]
    base: RunResult
    variants: dict[str, RunResult] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    source: str | None = field(default=None, compare=False)
    hashes: Mapping[int, str] = field(default_factory=dict)
    corpus_fingerprint: str | None = None
    #: The text metrics' tokenizer identity (empty: not recorded, a file written before).
    tokenizer: str = ""
    #: Answers longer than this many characters are written cut, with their digest
    #: (``None``: every answer whole). Answers already cut (read from a file) stay cut.
    answer_chars: int | None = field(default=None, compare=False)

    @classmethod
    def from_runs(
        cls,
        runs: Sequence[RunResult],
        *,
        plugin_version: str,
        hashes: Mapping[int, str] | None = None,
        corpus_fingerprint: str | None = None,
        answer_chars: AnswerChars = "auto",
    ) -> Snapshot:
        """A snapshot of a session's runs: the one with ``variant is None`` and the variants.

        ``hashes`` (qid -> question hash) must cover every question of ``runs``: the
        file records each question's hash. ``answer_chars`` is ``[baseline]
        answer_chars`` (:func:`answer_limit`). Raises :class:`ValueError` (a programming
        error, not user input) when there is no base run, a variant name repeats, the
        runs disagree on dataset or profile, or a question has no hash.
        """
        bases = [run for run in runs if run.variant is None]
        if len(bases) != 1:
            raise ValueError(f"expected exactly one base run (variant None), got {len(bases)}")
        base = bases[0]
        variants: dict[str, RunResult] = {}
        for run in runs:
            if run.variant is None:
                continue
            if run.variant in variants:
                raise ValueError(f"variant {run.variant!r} appears twice")
            if ((run.fingerprint, run.profile, run.tokenizer)
                    != (base.fingerprint, base.profile, base.tokenizer)):
                raise ValueError(f"variant {run.variant!r} ran on another dataset, profile or "
                                 "tokenizer")
            variants[run.variant] = run
        recorded = {sample.qid for run in runs for sample in run.samples}
        known = dict(hashes or {})
        unhashed = sorted(recorded - known.keys())
        if unhashed:
            raise ValueError(f"questions without a hash: {listed(unhashed)}")
        return cls(
            plugin_version=plugin_version,
            profile=base.profile,
            dataset_id=base.dataset_id,
            fingerprint=base.fingerprint,
            dataset_stats=dict(base.dataset_stats),
            base=base,
            variants={name: variants[name] for name in sorted(variants)},
            hashes={qid: known[qid] for qid in sorted(recorded)},
            corpus_fingerprint=corpus_fingerprint,
            tokenizer=base.tokenizer,
            answer_chars=answer_limit(answer_chars, sum(len(run.samples) for run in runs)),
        )

    @property
    def runs(self) -> list[RunResult]:
        """The base run, then the variants by name."""
        return [self.base, *self.variants.values()]

    @property
    def has_hashes(self) -> bool:
        """Whether the file records per-question hashes (schema 2 and later)."""
        return self.schema_version >= 2

    def run_for(self, variant: str | None) -> RunResult | None:
        """The recorded run of ``variant`` (``None``: the base run), if the file has it."""
        if variant is None:
            return self.base
        return self.variants.get(variant)

    def to_data(self) -> dict[str, Any]:
        """The JSON object, keys in their stable order (a schema 1 snapshot keeps its layout)."""
        dataset: dict[str, Any] = {"id": self.dataset_id, "fingerprint": self.fingerprint}
        if self.has_hashes:
            dataset["corpus_fingerprint"] = self.corpus_fingerprint
        dataset["stats"] = _sorted_keys(self.dataset_stats)
        hashes = self.hashes if self.has_hashes else None
        limit = self.answer_chars if self.has_hashes else None
        version = self.schema_version
        if self.has_hashes:
            cut = any(_cut(sample, limit) for run in self.runs for sample in run.samples)
            version = SCHEMA_VERSION if cut else WHOLE_ANSWERS_VERSION
        return {
            "schema": SCHEMA,
            "schema_version": version,
            "plugin_version": self.plugin_version,
            "profile": self.profile,
            **({"tokenizer": self.tokenizer} if self.tokenizer else {}),
            "dataset": dataset,
            "base": _run_to_data(self.base, hashes, limit),
            "variants": {
                name: _run_to_data(self.variants[name], hashes, limit)
                for name in sorted(self.variants)
            },
        }

    def to_json(self) -> str:
        """The file's text (project JSON style, trailing newline)."""
        # One question per line: the diff of a rerun shows each changed question as
        # one line, and the file of a 100k-question run stays in the tens of MB.
        return dumps_json(self.to_data(), records=_RECORD_LISTS)

    @classmethod
    def from_data(cls, data: Any, *, source: str = "baseline") -> Snapshot:
        """Inverse of :meth:`to_data`; :class:`BaselineError` names the bad key."""
        reader = _Reader(source)
        top = reader.mapping(data, "the top level")
        if top.get("schema") != SCHEMA:
            raise BaselineError(
                f"ragev: {source} is not a pytest-ragev baseline (schema "
                f"{top.get('schema')!r}, expected {SCHEMA!r}); point [baseline] path at a "
                "baseline file or create one with --ragev-update-baseline"
            )
        version = _read_version(top, source)
        reader.version = version
        dataset = reader.mapping(reader.key(top, "dataset"), "dataset")
        profile = reader.string(top, "profile")
        tokenizer = reader.string(top, "tokenizer") if "tokenizer" in top else ""
        dataset_id = reader.string(dataset, "id", "dataset.id")
        fingerprint = reader.string(dataset, "fingerprint", "dataset.fingerprint")
        stats = dict(reader.mapping(dataset.get("stats", {}), "dataset.stats"))

        def run_of(data: Any, where: str, variant: str | None) -> RunResult:
            run = reader.run(
                data, where, variant=variant, dataset_id=dataset_id, fingerprint=fingerprint,
                stats=stats, profile=profile,
            )
            return replace(run, tokenizer=tokenizer)

        base = run_of(reader.key(top, "base"), "base", None)
        variants_data = reader.mapping(top.get("variants", {}), "variants")
        variants = {
            str(name): run_of(run, f"variants.{name}", str(name))
            for name, run in variants_data.items()
        }
        hashes: dict[int, str] = {}
        corpus = None
        if version >= 2:
            hashes = _read_hashes(reader, top)
            corpus = reader.key(dataset, "corpus_fingerprint", "dataset.corpus_fingerprint")
            if corpus is not None and not isinstance(corpus, str):
                raise reader.fail("dataset.corpus_fingerprint",
                                  f"must be a string or null, got {corpus!r}")
        return cls(
            plugin_version=reader.string(top, "plugin_version"),
            profile=profile,
            dataset_id=dataset_id,
            fingerprint=fingerprint,
            dataset_stats=stats,
            base=base,
            variants=variants,
            schema_version=version,
            source=source,
            hashes=hashes,
            corpus_fingerprint=corpus,
            tokenizer=tokenizer,
        )


def _read_version(top: Mapping[str, Any], source: str) -> int:
    """The file's ``schema_version``, when this version reads it."""
    version = top.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version in READABLE_VERSIONS:
        return version
    newer = isinstance(version, int) and version > SCHEMA_VERSION
    hint = "upgrade pytest-ragev or " if newer else ""
    readable = ", ".join(str(v) for v in READABLE_VERSIONS[:-1])
    readable += f" and {READABLE_VERSIONS[-1]}"
    raise BaselineError(
        f"ragev: {source} has schema_version {version!r}, this pytest-ragev reads "
        f"{readable}; numbers across versions are not comparable: {hint}{_FIX}"
    )


def answer_limit(setting: AnswerChars, entries: int) -> int | None:
    """How many characters of a longer answer a file of ``entries`` question entries
    keeps (``None``: every answer whole), for ``[baseline] answer_chars`` = ``setting``:
    a positive number, ``"all"`` or ``"auto"`` (whole answers up to
    :data:`AUTO_WHOLE_ENTRIES` entries, :data:`AUTO_ANSWER_CHARS` characters above)."""
    if setting == "all":
        return None
    if setting == "auto":
        return None if entries <= AUTO_WHOLE_ENTRIES else AUTO_ANSWER_CHARS
    if isinstance(setting, int) and not isinstance(setting, bool) and setting > 0:
        return setting
    raise ValueError(f"answer_chars must be a positive integer, 'all' or 'auto', not {setting!r}")


def _cut(sample: SampleResult, limit: int | None) -> bool:
    """Whether ``sample``'s answer is written cut under ``limit``."""
    return sample.cut or (limit is not None and len(sample.generated_text) > limit)


def _read_hashes(reader: _Reader, top: Mapping[str, Any]) -> dict[int, str]:
    """qid -> question hash over every run of a schema 2 file (the runs must agree).

    Runs on the raw data :meth:`_Reader.run` has already checked (qids are unique
    integers, questions are objects), so it only checks the ``hash`` keys.
    """
    hashes: dict[int, str] = {}
    runs: list[tuple[str, Any]] = [("base", top["base"])]
    runs += [(f"variants.{name}", run) for name, run in dict(top.get("variants", {})).items()]
    for where, run in runs:
        for index, question in enumerate(run["questions"]):
            q_where = f"{where}.questions[{index}].hash"
            value = reader.key(question, "hash", q_where)
            if not isinstance(value, str) or not value:
                raise reader.fail(q_where, f"must be a non-empty string, got {value!r}")
            qid = question["qid"]
            if hashes.setdefault(qid, value) != value:
                raise reader.fail(q_where, f"is {value!r}, another run records "
                                  f"{hashes[qid]!r} for qid {qid}")
    return hashes


def tokenizer_origin(recorded: str) -> str:
    """``was computed with the tokenizer '…'``: how a message names the tokenizer a
    file records (``recorded``; empty when it records none: WeKnora's original rule)."""
    if recorded:
        return f"was computed with the tokenizer {recorded!r}"
    return (
        "records no tokenizer, so it was computed with WeKnora's original word rule "
        f"{LEGACY_TOKENIZER!r} (which skips every letter that is neither ASCII nor Han)"
    )


@dataclass(frozen=True)
class Retokenized:
    """A text a recorded run's numbers rest on that the run's tokenizer and the current
    one may tokenize differently: question ``qid``'s ``what`` (``"generated answer"`` or
    ``"reference answer"``)."""

    qid: int
    what: str
    text: str
    #: The file keeps only the start of the text: it could not be checked at all.
    unchecked: bool = False

    @property
    def line(self) -> str:
        """``question 7's reference answer ('Привет, мир…')``."""
        return f"question {self.qid}'s {self.what} ({shorten(self.text, 40)!r})"


def retokenized(
    older: RunResult,
    qids: Collection[int],
    references: Mapping[int, str],
    affects: Callable[[str], bool],
) -> Retokenized | None:
    """The first of ``qids`` (in qid order) whose texts, as ``older`` scored them, the
    two tokenizers may tokenize differently (``affects``), or ``None`` when none.

    A question's texts are ``older``'s generated answer and its reference answer:
    ``older``'s own (a JSON report records it) and ``references[qid]`` (the dataset's:
    a baseline file does not record it, and a compared question has the same content
    hash, so the same reference, on both sides). When ``None``, ``older``'s numbers on
    these questions are what the other tokenizer gives.

    A generated answer ``older`` keeps only in part cannot be checked: it is returned
    (``unchecked``) unless its kept start already differs.
    """
    wanted = set(qids)
    for sample in sorted((s for s in older.samples if s.qid in wanted), key=lambda s: s.qid):
        if sample.cut and not affects(sample.generated_text):
            return Retokenized(sample.qid, "generated answer", sample.generated_text,
                               unchecked=True)
        for what, text in (("generated answer", sample.generated_text),
                           ("reference answer", sample.generated_gt),
                           ("reference answer", references.get(sample.qid, ""))):
            if text and affects(text):
                return Retokenized(sample.qid, what, text)
    return None


def profile_mismatch(
    snapshot: Snapshot, run: RunResult, upgrades: TokenizerUpgrades | None = None
) -> str | None:
    """Why ``run``'s numbers cannot sit beside ``snapshot``'s at all (another metric
    profile or text tokenizer), or ``None`` when they can.

    A file that records no tokenizer (written before the identity was kept) was made
    with WeKnora's rule (:data:`~pytest_ragev.core.results.LEGACY_TOKENIZER`). A
    tokenizer among ``upgrades`` (an earlier version of the run's rules) passes here:
    :func:`check_compatible` then checks the compared questions' texts.
    """
    where = snapshot.source or "the baseline"
    if snapshot.profile != run.profile:
        return (
            f"ragev: {where} was computed with metric profile {snapshot.profile!r}, this run "
            f"uses {run.profile!r}; numbers across metric versions are not comparable: {_FIX}"
        )
    recorded = snapshot.tokenizer or LEGACY_TOKENIZER
    if recorded != run.tokenizer_identity and recorded not in (upgrades or {}):
        return (
            f"ragev: {where} {tokenizer_origin(snapshot.tokenizer)}, this run uses "
            f"{run.tokenizer_identity!r}; text metrics across tokenizers are not comparable: "
            f"{_FIX} (or set [metrics] tokenizer back)"
        )
    return None


def _retokenized_line(snapshot: Snapshot, run: RunResult, found: Retokenized) -> str:
    """Why a baseline made with an earlier version of the run's rules is not compared."""
    where = snapshot.source or "the baseline"
    if found.unchecked:
        return (
            f"ragev: {where} {tokenizer_origin(snapshot.tokenizer)}, this run uses "
            f"{run.tokenizer_identity!r}, and it keeps only the start of {found.line}, so "
            f"whether the two tokenize it alike cannot be checked: {_FIX}"
        )
    return (
        f"ragev: {where} {tokenizer_origin(snapshot.tokenizer)}, this run uses "
        f"{run.tokenizer_identity!r}, and the two tokenize {found.line} differently: text "
        f"metrics across tokenizers are not comparable: {_FIX}"
    )


def _dataset_changed(snapshot: Snapshot, run: RunResult) -> str:
    """The line that says the dataset fingerprint changed since ``snapshot``."""
    where = snapshot.source or "the baseline"
    return (
        f"ragev: {where} was computed on dataset {snapshot.dataset_id!r} (fingerprint "
        f"{snapshot.fingerprint[:12]}), this run on {run.dataset_id!r} (fingerprint "
        f"{run.fingerprint[:12]})"
    )


def _mismatch(
    snapshot: Snapshot, run: RunResult, upgrades: TokenizerUpgrades | None = None
) -> str | None:
    """Why ``run`` cannot be merged into ``snapshot``'s file (another metric profile,
    tokenizer or dataset fingerprint), or ``None`` when it can."""
    profile = profile_mismatch(snapshot, run, upgrades)
    if profile is not None:
        return profile
    if snapshot.fingerprint != run.fingerprint:
        return f"{_dataset_changed(snapshot, run)}; the data changed: {_FIX}"
    return None


@dataclass(frozen=True)
class Merged:
    """What :func:`merge_snapshot` built: the snapshot and which recorded runs it kept."""

    snapshot: Snapshot
    kept: list[str | None]
    dropped: list[str | None]


def merge_snapshot(
    existing: Snapshot | None,
    runs: Sequence[RunResult],
    *,
    plugin_version: str,
    keep: Sequence[str | None],
    hashes: Mapping[int, str] | None = None,
    corpus_fingerprint: str | None = None,
    upgrades: TokenizerUpgrades | None = None,
    answer_chars: AnswerChars = "auto",
) -> Merged:
    """``runs`` written over ``existing``: a session that ran only some configurations.

    Each run replaces its recorded counterpart; a recorded run whose configuration is in
    ``keep`` (``None``: the base configuration) but did not run this time is carried
    over unchanged, so ``--ragev-variant k10 --ragev-update-baseline`` refreshes k10 and
    leaves the base run and the other variants alone. Recorded runs of configurations
    no longer in ``keep`` are dropped, and so is everything recorded on another dataset
    fingerprint, metric profile or tokenizer (those numbers cannot sit beside the new
    ones). A run recorded with an earlier version of the runs' tokenizer rules (one of
    ``upgrades``) is carried over, under the runs' tokenizer, only when none of its
    texts may be tokenized differently (:func:`retokenized`, the reference answers
    taken from ``runs``); its numbers are then the new rules' own. A schema 1 file's
    runs are kept (and so upgraded) when ``hashes`` covers their questions: they ran
    on this very dataset, so its hashes are theirs. When every configuration in
    ``keep`` ran, the result equals ``Snapshot.from_runs(runs)``.

    ``hashes`` (qid -> question hash) covers at least the questions of ``runs``;
    ``answer_chars`` is as in :meth:`Snapshot.from_runs`.
    Raises :class:`BaselineError` when neither ``runs`` nor ``existing`` has a base run.
    """
    ran = {run.variant for run in runs}
    usable = existing is not None and all(
        _mismatch(existing, run, upgrades) is None for run in runs)
    known = {**(existing.hashes if existing is not None and usable else {}), **(hashes or {})}
    kept: list[str | None] = []
    dropped: list[str | None] = []
    merged = list(runs)
    if existing is not None:
        for name in [None, *existing.variants]:
            if name in ran:
                continue
            recorded = existing.run_for(name)
            if (usable and name in keep and recorded is not None
                    and all(sample.qid in known for sample in recorded.samples)):
                carried = _carried_over(recorded, runs, upgrades or {})
                if carried is not None:
                    merged.append(carried)
                    kept.append(name)
                    continue
            dropped.append(name)
    if None not in {run.variant for run in merged}:
        where = existing.source if existing is not None and existing.source else "the baseline"
        raise BaselineError(
            f"ragev: {where} cannot be written from variant runs alone: it needs the base "
            "configuration's run; run once without --ragev-variant (or with --ragev-variant "
            "base) to record it"
        )
    snapshot = Snapshot.from_runs(merged, plugin_version=plugin_version, hashes=known,
                                  corpus_fingerprint=corpus_fingerprint,
                                  answer_chars=answer_chars)
    return Merged(snapshot=snapshot, kept=kept, dropped=dropped)


def _carried_over(
    recorded: RunResult, runs: Sequence[RunResult], upgrades: TokenizerUpgrades
) -> RunResult | None:
    """``recorded`` as a file of ``runs``' tokenizer can keep it, or ``None`` when it
    cannot: made with an earlier version of the rules, it is kept (relabelled) only
    when the rules agree on every text of it, the reference answers of ``runs``."""
    if not runs or recorded.tokenizer_identity == runs[0].tokenizer_identity:
        return recorded
    affects = upgrades.get(recorded.tokenizer_identity)
    if affects is None:
        return None
    references = {s.qid: s.generated_gt for run in runs for s in run.samples}
    qids = {s.qid for s in recorded.samples}
    if not qids <= references.keys() or retokenized(recorded, qids, references, affects):
        return None  # a question no run answered has no reference to check
    return replace(recorded, tokenizer=runs[0].tokenizer)


def _sorted_keys(value: Any) -> Any:
    # Settings and stats come from TOML tables and dicts built in any order; sorting
    # them recursively is what makes an unchanged configuration re-serialise identically.
    if isinstance(value, Mapping):
        return {str(k): _sorted_keys(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted_keys(item) for item in value]
    return value


def _question_to_data(
    sample: SampleResult, names: Sequence[str], hashes: Mapping[int, str] | None,
    limit: int | None = None,
) -> dict[str, Any]:
    """One question entry: the record's vocabulary and its hash, or the schema 1 keys;
    an answer longer than ``limit`` characters cut, with its digest and length."""
    metrics = {m: float(sample.metrics[m]) for m in names}
    if hashes is None:
        return {
            "qid": sample.qid,
            "question": sample.question,
            "metrics": metrics,
            "retrieved_ids": list(sample.retrieval_ids),
            "relevant_ids": sorted({pid for group in sample.retrieval_gt for pid in group}),
            "generated_text": sample.generated_text,
            "error": sample.error,
        }
    entry: dict[str, Any] = {
        "qid": sample.qid,
        "hash": hashes[sample.qid],
        "question": sample.question,
        "metrics": metrics,
        "retrieval_ids": list(sample.retrieval_ids),
        "retrieval_gt": [list(group) for group in sample.retrieval_gt],
    }
    text = sample.generated_text
    if sample.cut:
        entry.update(generated_text=text, answer_digest=sample.answer_digest,
                     answer_chars=sample.answer_chars)
    elif limit is not None and len(text) > limit:
        entry.update(generated_text=text[:limit], answer_digest=text_digest(text),
                     answer_chars=len(text))
    else:
        entry["generated_text"] = text
    entry["error"] = sample.error
    return entry


def _run_to_data(
    run: RunResult, hashes: Mapping[int, str] | None, limit: int | None = None
) -> dict[str, Any]:
    order = list(run.summary)
    questions = []
    for sample in sorted(run.samples, key=lambda s: s.qid):
        names = [m for m in order if m in sample.metrics]
        names += sorted(m for m in sample.metrics if m not in order)
        questions.append(_question_to_data(sample, names, hashes, limit))
    return {
        "settings_hash": run.params_hash,
        "settings": _sorted_keys(run.params),
        "metrics": {
            name: {
                "mean": None if item.mean is None else float(item.mean),
                "n": item.n,
                "direction": item.direction,
            }
            for name, item in run.summary.items()
        },
        "questions": questions,
    }


class _Reader:
    """Typed access to the parsed JSON, with one-line errors naming file and key."""

    def __init__(self, source: str) -> None:
        self.source = source
        #: The file's schema_version: which names the question entries use.
        self.version = SCHEMA_VERSION

    def fail(self, where: str, problem: str) -> BaselineError:
        return BaselineError(
            f"ragev: {self.source}: {where} {problem}; the file is damaged: restore it "
            "from version control or rewrite it with --ragev-update-baseline"
        )

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"must be an object, got {type(value).__name__}")
        return value

    def key(self, table: Mapping[str, Any], key: str, where: str | None = None) -> Any:
        if key not in table:
            raise self.fail(where or key, "is missing")
        return table[key]

    def string(self, table: Mapping[str, Any], key: str, where: str | None = None) -> str:
        value = self.key(table, key, where)
        if not isinstance(value, str):
            raise self.fail(where or key, f"must be a string, got {value!r}")
        return value

    def number(self, value: Any, where: str) -> float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise self.fail(where, f"must be a number, got {value!r}")
        return float(value)

    def score(self, value: Any, where: str, name: str) -> float:
        """A value of metric ``name``: a number in [0, 1] for a built-in metric, a finite
        one for a custom metric (:func:`~pytest_ragev.core.results.metric_value_problem`).

        ``json`` reads ``NaN`` and ``Infinity``, which a hand edit (or another tool) can
        leave behind; a NaN per-question value would drop the question from the paired
        comparison without a word, so it is refused like any other damage.
        """
        number = self.number(value, where)
        problem = metric_value_problem(name, number)
        if problem is not None:
            raise self.fail(where, problem)
        return number

    def integers(self, value: Any, where: str) -> list[int]:
        # The common case first, by exact types (bool is not int here): a 100k-question
        # baseline holds millions of ids, and isinstance goes through the ABC machinery.
        if type(value) is list and all(type(x) is int for x in value):
            return value
        if not isinstance(value, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in value
        ):
            raise self.fail(where, f"must be a list of integers, got {value!r}")
        return list(value)

    def cut_answer(
        self, question: Mapping[str, Any], where: str, text: str
    ) -> tuple[str | None, int | None]:
        """``(answer_digest, answer_chars)`` of an entry that keeps its answer in part,
        ``(None, None)`` for a whole answer (and in every file before schema 3)."""
        if self.version < 3 or ("answer_digest" not in question
                                and "answer_chars" not in question):
            return None, None
        digest = question.get("answer_digest")
        chars = question.get("answer_chars")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise self.fail(f"{where}.answer_digest",
                            f"must be 16 lowercase hex digits, got {digest!r}")
        if type(chars) is not int or chars <= len(text):
            raise self.fail(f"{where}.answer_chars", "must be an integer above the length of "
                            f"the kept generated_text ({len(text)}), got {chars!r}")
        return digest, chars

    def run(
        self, data: Any, where: str, *, variant: str | None, dataset_id: str,
        fingerprint: str, stats: dict[str, Any], profile: str,
    ) -> RunResult:
        run = self.mapping(data, where)
        summary: dict[str, MetricSummary] = {}
        for name, item in self.mapping(run.get("metrics", {}), f"{where}.metrics").items():
            item_where = f"{where}.metrics.{name}"
            entry = self.mapping(item, item_where)
            mean = entry.get("mean")
            direction = entry.get("direction", "higher")
            if direction not in ("higher", "lower"):
                raise self.fail(f"{item_where}.direction", f"must be 'higher' or 'lower', "
                                f"got {direction!r}")
            n = entry.get("n")
            if not isinstance(n, int) or isinstance(n, bool):
                raise self.fail(f"{item_where}.n", f"must be an integer, got {n!r}")
            if n < 0:
                raise self.fail(f"{item_where}.n", f"must be 0 or more, got {n}")
            summary[str(name)] = MetricSummary(
                name=str(name),
                mean=None if mean is None else self.score(mean, f"{item_where}.mean",
                                                          str(name)),
                n=n,
                direction=direction,
            )
        questions = self.key(run, "questions", f"{where}.questions")
        if not isinstance(questions, list):
            raise self.fail(f"{where}.questions", "must be a list")
        samples = []
        seen: set[int] = set()
        for index, raw in enumerate(questions):
            q_where = f"{where}.questions[{index}]"
            question = self.mapping(raw, q_where)
            qid = self.key(question, "qid", f"{q_where}.qid")
            if type(qid) is not int or qid in seen:
                raise self.fail(f"{q_where}.qid", f"must be a unique integer, got {qid!r}")
            seen.add(qid)
            given = question.get("metrics", {})
            if type(given) is dict and all(type(v) is float and 0.0 <= v <= 1.0
                                           for v in given.values()):
                # Every value a float in [0, 1] (NaN fails the comparison): as written.
                metrics: dict[str, float] = given
            else:
                metrics = {
                    str(k): self.score(v, f"{q_where}.metrics.{k} (qid {qid})", str(k))
                    for k, v in self.mapping(given, f"{q_where}.metrics").items()
                }
            retrieval_gt, retrieval_ids = _question_ids(self, question, q_where)
            error = question.get("error")
            text = str(question.get("generated_text", ""))
            digest, chars = self.cut_answer(question, q_where, text)
            samples.append(SampleResult(
                qid=qid,
                question=str(question.get("question", "")),
                retrieval_gt=retrieval_gt,
                retrieval_ids=retrieval_ids,
                generated_text=text,
                generated_gt="",
                metrics=metrics,
                error=None if error is None else str(error),
                variant=variant,
                answer_digest=digest,
                answer_chars=chars,
            ))
        return RunResult(
            dataset_id=dataset_id,
            fingerprint=fingerprint,
            dataset_stats=stats,
            profile=profile,
            params=dict(self.mapping(run.get("settings", {}), f"{where}.settings")),
            params_hash=str(run.get("settings_hash", "")),
            samples=samples,
            summary=summary,
            variant=variant,
        )


def _question_ids(
    reader: _Reader, question: Mapping[str, Any], where: str
) -> tuple[list[list[int]], list[int]]:
    """``(retrieval_gt, retrieval_ids)`` of one question entry, in either schema's names."""
    if reader.version < 2:
        relevant = reader.integers(question.get("relevant_ids", []), f"{where}.relevant_ids")
        retrieved = reader.integers(question.get("retrieved_ids", []), f"{where}.retrieved_ids")
        return ([relevant] if relevant else []), retrieved
    groups = question.get("retrieval_gt", [])
    if not isinstance(groups, list):
        raise reader.fail(f"{where}.retrieval_gt", f"must be a list of lists of integers, "
                          f"got {groups!r}")
    gt = [reader.integers(group, f"{where}.retrieval_gt[{i}]") for i, group in enumerate(groups)]
    retrieved = reader.integers(question.get("retrieval_ids", []), f"{where}.retrieval_ids")
    return gt, retrieved


def _parse(text: str) -> Any:
    """``json.loads`` with the cyclic garbage collector paused: parsing makes millions
    of containers, none of them garbage, and each collection they trigger scans every
    live object (half the parse time of a 100k-question baseline)."""
    with paused_gc():
        return json.loads(text)


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read a baseline file. Missing, unreadable or corrupt files raise :class:`BaselineError`."""
    target = Path(path)
    try:
        text = _read_text(target)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise BaselineError(
            f"ragev: baseline {target} is a damaged gzip file ({exc}); restore it from "
            "version control or rewrite it with --ragev-update-baseline"
        ) from None
    except FileNotFoundError:
        raise BaselineError(
            f"ragev: baseline {target} not found; create it with --ragev-update-baseline"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(
            f"ragev: baseline {target} cannot be read ({exc}); fix its permissions or encoding, "
            "or rewrite it with --ragev-update-baseline"
        ) from None
    try:
        data = _parse(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"ragev: baseline {target} is not valid JSON (line {exc.lineno} column {exc.colno}: "
            f"{exc.msg}); restore it from version control (a merge conflict?) or rewrite it "
            "with --ragev-update-baseline"
        ) from None
    except RecursionError:
        # Python's parser recurses once per nesting level; a baseline is a few levels deep.
        raise BaselineError(
            f"ragev: baseline {target} nests arrays or objects too deeply to read (Python's "
            f"JSON parser stops near {sys.getrecursionlimit()} levels); it is not a pytest-ragev "
            "baseline: restore it from version control or rewrite it with "
            "--ragev-update-baseline"
        ) from None
    # The text (some 100 MB for 100k questions) goes before the records are made from
    # what it parsed to: the two together are the peak of a gated run's end.
    del text
    return Snapshot.from_data(data, source=str(target))


def _read_text(target: Path) -> str:
    """The file's text; its bytes are freed on return."""
    raw = target.read_bytes()
    # A gzip file is read whatever its name (a .json.gz renamed, or the reverse).
    return (gzip.decompress(raw) if raw[:2] == _GZIP_MAGIC else raw).decode("utf-8")


_GZIP_MAGIC = b"\x1f\x8b"
#: Measured on the built-in pipeline's 100k-question baseline, answers cut to 80
#: characters: level 3 gives 20.0 MB in 2.9 s, 4 19.5 MB in 2.9 s, 5 18.8 MB in 3.3 s,
#: zlib's default 6 18.4 MB in 3.7 s (whole answers: 33.9 MB at 3, 31.6 MB at 6).
_GZIP_LEVEL = 5


def compressed(path: str | os.PathLike[str]) -> bool:
    """Whether a baseline at ``path`` is written gzip-compressed (its name ends in ``.gz``)."""
    return Path(path).suffix.lower() == ".gz"


def write_snapshot(path: str | os.PathLike[str], snapshot: Snapshot) -> int:
    """Write ``snapshot`` to ``path`` atomically (readers never see a torn file); the
    bytes written.

    A path ending in ``.gz`` gets the same text gzip-compressed, with no timestamp or
    name in the header, so an unchanged run still writes identical bytes; ``git diff``
    reads it through a textconv (docs/baselines.md).
    """
    if compressed(path):
        data = gzip.compress(snapshot.to_json().encode("utf-8"), compresslevel=_GZIP_LEVEL,
                             mtime=0)
        atomic_write_bytes(path, data)
        return len(data)
    # Written as it is encoded: the text of a 100k-question baseline (and its bytes) is
    # never whole in memory, at the end of a run that holds every record already.
    atomic_write_bytes(path, encoded_blocks(iter_json(snapshot.to_data(),
                                                      records=_RECORD_LISTS)))
    return os.path.getsize(path)


def obtained_path(path: str | os.PathLike[str]) -> Path:
    """Where the current run's snapshot goes next to a baseline, for inspection or copying.

    ``ragev-baseline.json`` → ``ragev-baseline.obtained.json``,
    ``ragev-baseline.json.gz`` → ``ragev-baseline.obtained.json.gz``; a name without a
    suffix gets ``.obtained`` appended.
    """
    target = Path(path)
    if compressed(target) and Path(target.stem).suffix:
        inner = Path(target.stem)
        return target.with_name(f"{inner.stem}.obtained{inner.suffix}{target.suffix}")
    if target.suffix:
        return target.with_name(f"{target.stem}.obtained{target.suffix}")
    return target.with_name(f"{target.name}.obtained")


@dataclass(frozen=True)
class Overlap:
    """Which questions a comparison can pair with the baseline's run.

    ``common_qids``: in both, with the same content hash (compared); ``added``: only in
    this run; ``removed``: only in the baseline; ``changed``: in both, but the question,
    its relevant passages or its reference answer were edited (listed, not compared).
    """

    common_qids: list[int]
    added: list[int]
    removed: list[int]
    changed: list[int] = field(default_factory=list)


def missing_variants_line(
    baseline: Snapshot, names: Sequence[str], *, required: bool, because: str = ""
) -> str:
    """The one line naming every variant of this run that ``baseline`` has no run of.

    ``required`` makes it the reason the gate was not compared (``because`` says why,
    e.g. ``[gate] require_all_variants = true``); otherwise it is a warning: the
    variants are new, and not compared.
    """
    where = baseline.source or "the baseline"
    quoted = ", ".join(repr(name) for name in names)
    them = "them" if len(names) > 1 else "it"
    record = ("--ragev-update-baseline "
              + " ".join(f"--ragev-variant {name}" for name in names))
    if required:
        return (
            f"ragev: {where} has no run of variant {quoted} (it has: "
            f"{', '.join(baseline.variants) or 'none'}){because}; record {them} with "
            f"{record} (the other runs in the file are kept)"
        )
    are = "are" if len(names) > 1 else "is"
    return (
        f"ragev: warning: variant {quoted} {are} new, not compared ({where} has no run of "
        f"{them}); record {them} with {record} (the other runs in the file are kept)"
    )


@dataclass(frozen=True)
class CorpusChange:
    """The corpus changed since the baseline: passages added, removed or edited.

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


def corpus_change(
    baseline: Snapshot, run: RunResult, corpus_fingerprint: str | None
) -> CorpusChange | None:
    """How the corpus changed since ``baseline``, or ``None`` when it did not (or the
    baseline does not know: schema 1)."""
    if (baseline.corpus_fingerprint is None or corpus_fingerprint is None
            or baseline.corpus_fingerprint == corpus_fingerprint):
        return None

    def passages(stats: Mapping[str, Any]) -> int | None:
        value = stats.get("passages")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return CorpusChange(passages(baseline.dataset_stats), passages(run.dataset_stats))


def check_compatible(
    baseline: Snapshot,
    current: RunResult,
    hashes: Mapping[int, str] | None = None,
    *,
    strict: bool = False,
    upgrades: TokenizerUpgrades | None = None,
) -> Overlap:
    """Check that ``current`` may be compared with its run in ``baseline``; pair its questions.

    On the baseline's dataset (same fingerprint) every shared qid is compared. On an
    edited dataset, questions are paired by qid **and** content hash (``hashes``: the
    current dataset's, qid -> hash): unchanged ones are compared, edited ones listed as
    ``changed``. Raises :class:`BaselineError` (the baseline cannot be used: a usage
    error) for another metric profile, a variant the baseline does not have, an edited
    dataset when ``strict`` (``[gate] strict_dataset``) or when the baseline or the
    caller has no hashes, or no unchanged shared question. Another tokenizer is refused
    too, unless it is an earlier version of ``current``'s rules (``upgrades``) and no
    text of the compared questions may be tokenized differently by the two
    (:func:`retokenized`): the baseline's numbers are then the current rules' own.
    """
    profile = profile_mismatch(baseline, current, upgrades)
    if profile is not None:
        raise BaselineError(profile)
    where = baseline.source or "the baseline"
    recorded = baseline.run_for(current.variant)
    if recorded is None:
        raise BaselineError(
            missing_variants_line(baseline, [str(current.variant)], required=True)
        )
    same_data = baseline.fingerprint == current.fingerprint
    if not same_data:
        _check_pairable(baseline, current, hashes, strict=strict)
    before = {s.qid for s in recorded.samples}
    after = {s.qid for s in current.samples}
    shared = sorted(before & after)
    changed = [] if same_data or hashes is None else [
        qid for qid in shared if baseline.hashes.get(qid) != hashes.get(qid)
    ]
    common = sorted(set(shared) - set(changed))
    if not common:
        label = "" if current.variant is None else f" (variant {current.variant!r})"
        edited = f", {len(changed)} of them edited since" if changed else ""
        raise BaselineError(
            f"ragev: {where} and this run{label} share no unchanged question ({len(before)} "
            f"in the baseline, {len(after)} now{edited}); {_FIX}"
        )
    # Made with an earlier version of this run's rules (profile_mismatch refused any
    # other tokenizer): comparable only if no compared text may be tokenized otherwise.
    recorded_tokenizer = baseline.tokenizer or LEGACY_TOKENIZER
    affects = (upgrades or {}).get(recorded_tokenizer)
    if affects is not None and recorded_tokenizer != current.tokenizer_identity:
        references = {s.qid: s.generated_gt for s in current.samples}
        found = retokenized(recorded, set(common), references, affects)
        if found is not None:
            raise BaselineError(_retokenized_line(baseline, current, found))
    return Overlap(common_qids=common, added=sorted(after - before),
                   removed=sorted(before - after), changed=changed)


def _check_pairable(
    baseline: Snapshot, current: RunResult, hashes: Mapping[int, str] | None, *, strict: bool
) -> None:
    """Raise when questions of an edited dataset cannot be paired with ``baseline``'s."""
    changed = _dataset_changed(baseline, current)
    if strict:
        raise BaselineError(
            f"{changed}; the data changed and [gate] strict_dataset = true: {_FIX}, or unset "
            "strict_dataset to compare the unchanged questions"
        )
    if not baseline.has_hashes:
        raise BaselineError(
            f"{changed}; the data changed and this schema_version {baseline.schema_version} "
            "file has no per-question hashes to pair the unchanged questions: rerun with "
            "--ragev-update-baseline to upgrade it (later dataset edits then compare the "
            "unchanged questions)"
        )
    if hashes is None:
        raise BaselineError(f"{changed}; the data changed: {_FIX}")
