"""Baseline snapshots: the file format of the committed record later runs are gated against.

A snapshot is one JSON file (``ragev-baseline.json`` by default) written for code
review: stable key order, ``ensure_ascii=False``, indent 2 with one compact line per
question, questions sorted by qid, settings with sorted keys, so re-writing an
unchanged run gives identical bytes and a changed run gives a readable diff, one line
per changed question. A path ending in ``.gz`` is written gzip-compressed (for large
datasets; ``git diff`` reads it through a textconv); either form is read. One file
holds the base run and every variant::

    {
      "schema": "pytest-ragev-baseline",
      "schema_version": 3,
      "plugin_version": "0.2.0",
      "profile": "...",
      "tokenizer": "default/3 jieba==0.42.1",
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

A file may keep only the first ``N`` characters of an answer longer than that (``[baseline]
answer_chars``; by default of a file with more than :data:`AUTO_WHOLE_ENTRIES` question
entries): the gate reads the metrics, and the diffs show the start of the answer and tell
a changed answer by ``answer_digest`` (:func:`~pytest_ragev.core.digest.text_digest` of
the whole answer), so a 100k-question baseline stays within some 20 MB compressed.

Only this layout is read: a file of an earlier pytest-ragev (another ``schema_version``,
or no ``tokenizer``) is refused in one line that says to rewrite it. Whether a file's
runs can be compared with a session's is :mod:`pytest_ragev.gate.pairing`'s decision.

Nothing here imports pytest or numpy.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_ragev.core.checked import Checked
from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.fmt import listed
from pytest_ragev.core.gcpause import paused_gc
from pytest_ragev.core.io import atomic_write_bytes, dumps_json, encoded_blocks, iter_json
from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.gate.pairing import FIX, Recorded, dataset_changed_line, refusal

#: Identifies a pytest-ragev baseline file.
SCHEMA = "pytest-ragev-baseline"
#: The layout this version writes and reads; bumped whenever the layout changes.
SCHEMA_VERSION = 3
#: The lists of a baseline written one object per line (see ``core.io.dumps_json``).
_RECORD_LISTS = ("questions",)

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

_DAMAGED = "the file is damaged: restore it from version control or rewrite it with " \
    "--ragev-update-baseline"
_DIGEST = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True)
class Snapshot:
    """The content of a baseline file: the base run, its variants and what they ran on.

    ``hashes`` maps each recorded question's qid to its content hash and
    ``corpus_fingerprint`` identifies the corpus. Every run of a snapshot ran on the
    same dataset, so one mapping serves them all. ``source`` is the file a snapshot was
    loaded from (``None`` when built from runs); it only serves messages and is not
    part of the JSON.
    """

    plugin_version: str
    profile: str
    dataset_id: str
    fingerprint: str
    dataset_stats: dict[str, Any]
    base: RunResult
    variants: dict[str, RunResult] = field(default_factory=dict)
    source: str | None = field(default=None, compare=False)
    hashes: Mapping[int, str] = field(default_factory=dict)
    corpus_fingerprint: str | None = None
    #: The text metrics' tokenizer identity.
    tokenizer: str = ""
    #: Who scored each answer-quality metric (see ``RunResult.scorers``).
    scorers: Mapping[str, str] = field(default_factory=dict)
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
        runs disagree on dataset, profile or tokenizer, or a question has no hash.
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
            if ((run.fingerprint, run.profile, run.tokenizer, dict(run.scorers))
                    != (base.fingerprint, base.profile, base.tokenizer, dict(base.scorers))):
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
            scorers=dict(base.scorers),
            answer_chars=answer_limit(answer_chars, sum(len(run.samples) for run in runs)),
        )

    @property
    def runs(self) -> list[RunResult]:
        """The base run, then the variants by name."""
        return [self.base, *self.variants.values()]

    def run_for(self, variant: str | None) -> RunResult | None:
        """The recorded run of ``variant`` (``None``: the base run), if the file has it."""
        if variant is None:
            return self.base
        return self.variants.get(variant)

    def recorded(self) -> Recorded:
        """The file as the recorded side of a comparison."""
        passages = self.dataset_stats.get("passages")
        return Recorded(
            source=self.source or "the baseline", runs=tuple(self.runs), hashes=self.hashes,
            corpus_fingerprint=self.corpus_fingerprint,
            passages=passages if type(passages) is int else None,
        )

    def to_data(self) -> dict[str, Any]:
        """The JSON object, keys in their stable order."""
        limit = self.answer_chars
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "plugin_version": self.plugin_version,
            "profile": self.profile,
            "tokenizer": self.tokenizer,
            **({"scorers": dict(sorted(self.scorers.items()))} if self.scorers else {}),
            "dataset": {
                "id": self.dataset_id,
                "fingerprint": self.fingerprint,
                "corpus_fingerprint": self.corpus_fingerprint,
                "stats": _sorted_keys(self.dataset_stats),
            },
            "base": _run_to_data(self.base, self.hashes, limit),
            "variants": {
                name: _run_to_data(self.variants[name], self.hashes, limit)
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
        read = Checked(source, error=BaselineError, fix=_DAMAGED, prefix="ragev: ")
        top = read.mapping(data, "the top level")
        if top.get("schema") != SCHEMA:
            raise BaselineError(
                f"ragev: {source} is not a pytest-ragev baseline (schema "
                f"{top.get('schema')!r}, expected {SCHEMA!r}); point [baseline] path at a "
                "baseline file or create one with --ragev-update-baseline"
            )
        _check_version(top, source)
        dataset = read.mapping(read.key(top, "dataset"), "dataset")
        profile = read.string(read.key(top, "profile"), "profile")
        tokenizer = read.string(top["tokenizer"], "tokenizer")
        scorers = {str(k): read.string(v, f"scorers.{k}")
                   for k, v in read.mapping(top.get("scorers", {}), "scorers").items()}
        dataset_id = read.string(read.key(dataset, "id", "dataset.id"), "dataset.id")
        fingerprint = read.string(read.key(dataset, "fingerprint", "dataset.fingerprint"),
                                  "dataset.fingerprint")
        stats = dict(read.mapping(dataset.get("stats", {}), "dataset.stats"))
        corpus = read.key(dataset, "corpus_fingerprint", "dataset.corpus_fingerprint")
        if corpus is not None:
            corpus = read.string(corpus, "dataset.corpus_fingerprint")

        def run_of(raw: Any, where: str, variant: str | None) -> RunResult:
            run = _run_from_data(read, raw, where, variant=variant, dataset_id=dataset_id,
                                 fingerprint=fingerprint, stats=stats, profile=profile,
                                 tokenizer=tokenizer)
            return replace(run, scorers=scorers)

        base = run_of(read.key(top, "base"), "base", None)
        variants_data = read.mapping(top.get("variants", {}), "variants")
        variants = {
            str(name): run_of(run, f"variants.{name}", str(name))
            for name, run in variants_data.items()
        }
        return cls(
            plugin_version=read.string(read.key(top, "plugin_version"), "plugin_version"),
            profile=profile,
            dataset_id=dataset_id,
            fingerprint=fingerprint,
            dataset_stats=stats,
            base=base,
            variants=variants,
            source=source,
            hashes=_read_hashes(read, top),
            corpus_fingerprint=corpus,
            tokenizer=tokenizer,
            scorers=scorers,
        )


def earlier_file_line(source: str, what: str) -> str:
    """The one line refusing a baseline an earlier pytest-ragev made (``what`` says how
    it tells: ``schema_version 2``, ``no tokenizer``)."""
    return (f"ragev: {source} was made by an earlier pytest-ragev ({what}); rewrite it with "
            "--ragev-update-baseline")


def _check_version(top: Mapping[str, Any], source: str) -> None:
    """Refuse a layout other than :data:`SCHEMA_VERSION`, in one line."""
    version = top.get("schema_version")
    if type(version) is int and version > SCHEMA_VERSION:
        raise BaselineError(
            f"ragev: {source} has schema_version {version}, this pytest-ragev reads "
            f"{SCHEMA_VERSION}; numbers across versions are not comparable: upgrade "
            f"pytest-ragev or {FIX}"
        )
    if type(version) is int and 0 < version < SCHEMA_VERSION:
        raise BaselineError(earlier_file_line(source, f"schema_version {version}"))
    if version != SCHEMA_VERSION:
        raise BaselineError(
            f"ragev: {source}: schema_version is {json.dumps(version)[:40]}, not a version "
            f"number; {_DAMAGED}"
        )
    if "tokenizer" not in top:
        raise BaselineError(earlier_file_line(source, "it records no tokenizer"))


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


def _read_hashes(read: Checked, top: Mapping[str, Any]) -> dict[int, str]:
    """qid -> question hash over every run of the file (the runs must agree).

    Runs on the raw data :func:`_run_from_data` has already checked (qids are unique
    integers, questions are objects), so it only checks the ``hash`` keys.
    """
    hashes: dict[int, str] = {}
    runs: list[tuple[str, Any]] = [("base", top["base"])]
    runs += [(f"variants.{name}", run) for name, run in dict(top.get("variants", {})).items()]
    for where, run in runs:
        for index, question in enumerate(run["questions"]):
            q_where = f"{where}.questions[{index}].hash"
            value = read.key(question, "hash", q_where)
            if not isinstance(value, str) or not value:
                raise read.fail(q_where, f"is {json.dumps(value)[:40]}, not a content hash")
            qid = question["qid"]
            if hashes.setdefault(qid, value) != value:
                raise read.fail(q_where, f"is {value!r}, but another run records "
                                f"{hashes[qid]!r} for qid {qid}")
    return hashes


@dataclass(frozen=True)
class Merged:
    """What :func:`merge_snapshot` built: the snapshot and which recorded runs it kept."""

    snapshot: Snapshot
    kept: list[str | None]
    dropped: list[str | None]


def _mismatch(snapshot: Snapshot, run: RunResult) -> str | None:
    """Why ``run`` cannot be merged into ``snapshot``'s file (another metric profile,
    tokenizer or dataset fingerprint), or ``None`` when it can."""
    recorded = snapshot.recorded()
    reason = refusal(recorded, run)
    if reason is not None:
        return reason
    if snapshot.fingerprint != run.fingerprint:
        return f"{dataset_changed_line(recorded, snapshot.base, run)}; the data changed: {FIX}"
    return None


def merge_snapshot(
    existing: Snapshot | None,
    runs: Sequence[RunResult],
    *,
    plugin_version: str,
    keep: Sequence[str | None],
    hashes: Mapping[int, str] | None = None,
    corpus_fingerprint: str | None = None,
    answer_chars: AnswerChars = "auto",
) -> Merged:
    """``runs`` written over ``existing``: a session that ran only some configurations.

    Each run replaces its recorded counterpart; a recorded run whose configuration is in
    ``keep`` (``None``: the base configuration) but did not run this time is carried
    over unchanged, so ``--ragev-variant k10 --ragev-update-baseline`` refreshes k10 and
    leaves the base run and the other variants alone. Recorded runs of configurations
    no longer in ``keep`` are dropped, and so is everything recorded on another dataset
    fingerprint, metric profile or tokenizer (those numbers cannot sit beside the new
    ones). When every configuration in ``keep`` ran, the result equals
    ``Snapshot.from_runs(runs)``.

    ``hashes`` (qid -> question hash) covers at least the questions of ``runs``;
    ``answer_chars`` is as in :meth:`Snapshot.from_runs`.
    Raises :class:`BaselineError` when neither ``runs`` nor ``existing`` has a base run.
    """
    ran = {run.variant for run in runs}
    usable = existing is not None and all(_mismatch(existing, run) is None for run in runs)
    known = {**(existing.hashes if existing is not None and usable else {}), **(hashes or {})}
    kept: list[str | None] = []
    dropped: list[str | None] = []
    merged = list(runs)
    if existing is not None:
        for name in [None, *existing.variants]:
            if name in ran:
                continue
            recorded = existing.run_for(name)
            if usable and name in keep and recorded is not None:
                merged.append(recorded)
                kept.append(name)
            else:
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


def _sorted_keys(value: Any) -> Any:
    # Settings and stats come from TOML tables and dicts built in any order; sorting
    # them recursively is what makes an unchanged configuration re-serialise identically.
    if isinstance(value, Mapping):
        return {str(k): _sorted_keys(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted_keys(item) for item in value]
    return value


def _run_to_data(
    run: RunResult, hashes: Mapping[int, str], limit: int | None = None
) -> dict[str, Any]:
    order = list(run.summary)
    questions = []
    for sample in sorted(run.samples, key=lambda s: s.qid):
        names = [m for m in order if m in sample.metrics]
        names += sorted(m for m in sample.metrics if m not in order)
        questions.append(sample.to_baseline_entry(hashes[sample.qid], names, limit))
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


def _cut_answer(
    read: Checked, question: Mapping[str, Any], where: str, text: str
) -> tuple[str | None, int | None]:
    """``(answer_digest, answer_chars)`` of an entry that keeps its answer in part,
    ``(None, None)`` for a whole answer."""
    if "answer_digest" not in question and "answer_chars" not in question:
        return None, None
    digest = question.get("answer_digest")
    chars = question.get("answer_chars")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise read.fail(f"{where}.answer_digest",
                        f"is {json.dumps(digest)[:40]}, not 16 lowercase hex digits")
    if type(chars) is not int or chars <= len(text):
        raise read.fail(f"{where}.answer_chars", f"is {json.dumps(chars)[:40]}, not an integer "
                        f"above the length of the kept generated_text ({len(text)})")
    return digest, chars


def _summary_from_data(read: Checked, run: Mapping[str, Any],
                       where: str) -> dict[str, MetricSummary]:
    summary: dict[str, MetricSummary] = {}
    for name, item in read.mapping(run.get("metrics", {}), f"{where}.metrics").items():
        item_where = f"{where}.metrics.{name}"
        entry = read.mapping(item, item_where)
        mean = entry.get("mean")
        direction = entry.get("direction", "higher")
        if direction not in ("higher", "lower"):
            raise read.fail(f"{item_where}.direction", f"is {direction!r}, not 'higher' or "
                            "'lower'")
        summary[str(name)] = MetricSummary(
            name=str(name),
            mean=None if mean is None else read.metric_value(mean, f"{item_where}.mean",
                                                             str(name)),
            n=read.count(entry.get("n"), f"{item_where}.n"),
            direction=direction,
        )
    return summary


def _run_from_data(
    read: Checked, data: Any, where: str, *, variant: str | None, dataset_id: str,
    fingerprint: str, stats: dict[str, Any], profile: str, tokenizer: str,
) -> RunResult:
    run = read.mapping(data, where)
    summary = _summary_from_data(read, run, where)
    questions = read.listing(read.key(run, "questions", f"{where}.questions"),
                             f"{where}.questions")
    samples = []
    seen: set[int] = set()
    for index, raw in enumerate(questions):
        q_where = f"{where}.questions[{index}]"
        question = read.mapping(raw, q_where)
        qid = read.key(question, "qid", f"{q_where}.qid")
        if type(qid) is not int or qid in seen:
            raise read.fail(f"{q_where}.qid", f"is {json.dumps(qid)[:40]}, not a unique "
                            "integer")
        seen.add(qid)
        given = question.get("metrics", {})
        if type(given) is dict and all(type(v) is float and 0.0 <= v <= 1.0
                                       for v in given.values()):
            # Every value a float in [0, 1] (NaN fails the comparison): as written.
            metrics: dict[str, float] = given
        else:
            metrics = {
                str(k): read.metric_value(v, f"{q_where}.metrics.{k} (qid {qid})", str(k))
                for k, v in read.mapping(given, f"{q_where}.metrics").items()
            }
        groups = read.listing(question.get("retrieval_gt", []), f"{q_where}.retrieval_gt")
        retrieval_gt = [read.integers(group, f"{q_where}.retrieval_gt[{i}]")
                        for i, group in enumerate(groups)]
        retrieval_ids = read.integers(question.get("retrieval_ids", []),
                                      f"{q_where}.retrieval_ids")
        error = question.get("error")
        text = str(question.get("generated_text", ""))
        digest, chars = _cut_answer(read, question, q_where, text)
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
        params=dict(read.mapping(run.get("settings", {}), f"{where}.settings")),
        params_hash=str(run.get("settings_hash", "")),
        samples=samples,
        summary=summary,
        variant=variant,
        tokenizer=tokenizer,
    )


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
