"""Baseline snapshots: the committed record of a run that later runs are gated against.

A snapshot is one JSON file (``ragev-baseline.json`` by default) written for code
review: stable key order, ``ensure_ascii=False``, indent 2, questions sorted by qid,
settings with sorted keys, so re-writing an unchanged run gives identical bytes and a
changed run gives a readable diff. One file holds the base run and every variant::

    {
      "schema": "pytest-ragev-baseline",
      "schema_version": 1,
      "plugin_version": "0.1.0",
      "profile": "...",
      "dataset": {"id": "...", "fingerprint": "...", "stats": {...}},
      "base": RUN,
      "variants": {"<variant name>": RUN, ...}
    }

    RUN = {
      "settings_hash": "...",
      "settings": {... redacted settings snapshot ...},
      "metrics": {"<metric>": {"mean": 0.61, "n": 400, "direction": "higher"}, ...},
      "questions": [
        {"qid": 1, "question": "...", "metrics": {...}, "retrieved_ids": [...],
         "relevant_ids": [...], "generated_text": "...", "error": null},
        ...
      ]
    }

Nothing here imports pytest or numpy.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.io import atomic_write_text, dumps_json
from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult

#: Identifies a pytest-ragev baseline file.
SCHEMA = "pytest-ragev-baseline"
#: Bumped whenever the layout changes incompatibly; other versions are refused.
SCHEMA_VERSION = 1

_FIX = "re-baseline on this version with --ragev-update-baseline"
_MAX_LISTED = 20


@dataclass(frozen=True)
class Snapshot:
    """The content of a baseline file: the base run, its variants and what they ran on.

    ``source`` is the file a snapshot was loaded from (``None`` when built from runs);
    it only serves error messages and is not part of the JSON.
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

    @classmethod
    def from_runs(cls, runs: Sequence[RunResult], *, plugin_version: str) -> Snapshot:
        """A snapshot of a session's runs: the one with ``variant is None`` and the variants.

        Raises :class:`ValueError` (a programming error, not user input) when there is
        no base run, a variant name repeats, or the runs disagree on dataset or profile.
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
            if (run.fingerprint, run.profile) != (base.fingerprint, base.profile):
                raise ValueError(f"variant {run.variant!r} ran on another dataset or profile")
            variants[run.variant] = run
        return cls(
            plugin_version=plugin_version,
            profile=base.profile,
            dataset_id=base.dataset_id,
            fingerprint=base.fingerprint,
            dataset_stats=dict(base.dataset_stats),
            base=base,
            variants={name: variants[name] for name in sorted(variants)},
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

    def to_data(self) -> dict[str, Any]:
        """The JSON object, keys in their stable order."""
        return {
            "schema": SCHEMA,
            "schema_version": self.schema_version,
            "plugin_version": self.plugin_version,
            "profile": self.profile,
            "dataset": {
                "id": self.dataset_id,
                "fingerprint": self.fingerprint,
                "stats": _sorted_keys(self.dataset_stats),
            },
            "base": _run_to_data(self.base),
            "variants": {name: _run_to_data(self.variants[name]) for name in sorted(self.variants)},
        }

    def to_json(self) -> str:
        """The file's text (project JSON style, trailing newline)."""
        return dumps_json(self.to_data())

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
        version = top.get("schema_version")
        if version != SCHEMA_VERSION:
            newer = isinstance(version, int) and version > SCHEMA_VERSION
            hint = "upgrade pytest-ragev or " if newer else ""
            raise BaselineError(
                f"ragev: {source} has schema_version {version!r}, this pytest-ragev reads "
                f"{SCHEMA_VERSION}; numbers across versions are not comparable: {hint}{_FIX}"
            )
        dataset = reader.mapping(reader.key(top, "dataset"), "dataset")
        profile = reader.string(top, "profile")
        dataset_id = reader.string(dataset, "id", "dataset.id")
        fingerprint = reader.string(dataset, "fingerprint", "dataset.fingerprint")
        stats = dict(reader.mapping(dataset.get("stats", {}), "dataset.stats"))

        def run_of(data: Any, where: str, variant: str | None) -> RunResult:
            return reader.run(
                data, where, variant=variant, dataset_id=dataset_id, fingerprint=fingerprint,
                stats=stats, profile=profile,
            )

        base = run_of(reader.key(top, "base"), "base", None)
        variants_data = reader.mapping(top.get("variants", {}), "variants")
        variants = {
            str(name): run_of(run, f"variants.{name}", str(name))
            for name, run in variants_data.items()
        }
        return cls(
            plugin_version=reader.string(top, "plugin_version"),
            profile=profile,
            dataset_id=dataset_id,
            fingerprint=fingerprint,
            dataset_stats=stats,
            base=base,
            variants=variants,
            schema_version=SCHEMA_VERSION,
            source=source,
        )


def _mismatch(snapshot: Snapshot, run: RunResult) -> str | None:
    """Why ``run``'s numbers cannot sit beside ``snapshot``'s (another schema version,
    metric profile or dataset fingerprint), or ``None`` when they can."""
    where = snapshot.source or "the baseline"
    if snapshot.schema_version != SCHEMA_VERSION:
        return (
            f"ragev: {where} has schema_version {snapshot.schema_version}, this pytest-ragev "
            f"writes {SCHEMA_VERSION}; {_FIX}"
        )
    if snapshot.profile != run.profile:
        return (
            f"ragev: {where} was computed with metric profile {snapshot.profile!r}, this run "
            f"uses {run.profile!r}; numbers across metric versions are not comparable: {_FIX}"
        )
    if snapshot.fingerprint != run.fingerprint:
        return (
            f"ragev: {where} was computed on dataset {snapshot.dataset_id!r} (fingerprint "
            f"{snapshot.fingerprint[:12]}), this run on {run.dataset_id!r} (fingerprint "
            f"{run.fingerprint[:12]}); the data changed: {_FIX}"
        )
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
) -> Merged:
    """``runs`` written over ``existing``: a session that ran only some configurations.

    Each run replaces its recorded counterpart; a recorded run whose configuration is in
    ``keep`` (``None``: the base configuration) but did not run this time is carried
    over unchanged, so ``--ragev-variant k10 --ragev-update-baseline`` refreshes k10 and
    leaves the base run and the other variants alone. Recorded runs of configurations
    no longer in ``keep`` are dropped, and so is everything recorded on another dataset
    fingerprint, metric profile or schema (those numbers cannot sit beside the new ones).
    When every configuration in ``keep`` ran, the result equals
    ``Snapshot.from_runs(runs)``.

    Raises :class:`BaselineError` when neither ``runs`` nor ``existing`` has a base run.
    """
    ran = {run.variant for run in runs}
    usable = existing is not None and all(_mismatch(existing, run) is None for run in runs)
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
    snapshot = Snapshot.from_runs(merged, plugin_version=plugin_version)
    return Merged(snapshot=snapshot, kept=kept, dropped=dropped)


def _sorted_keys(value: Any) -> Any:
    # Settings and stats come from TOML tables and dicts built in any order; sorting
    # them recursively is what makes an unchanged configuration re-serialise identically.
    if isinstance(value, Mapping):
        return {str(k): _sorted_keys(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted_keys(item) for item in value]
    return value


def _run_to_data(run: RunResult) -> dict[str, Any]:
    order = list(run.summary)
    questions = []
    for sample in sorted(run.samples, key=lambda s: s.qid):
        names = [m for m in order if m in sample.metrics]
        names += sorted(m for m in sample.metrics if m not in order)
        questions.append({
            "qid": sample.qid,
            "question": sample.question,
            "metrics": {m: float(sample.metrics[m]) for m in names},
            "retrieved_ids": list(sample.retrieval_ids),
            "relevant_ids": sorted({pid for group in sample.retrieval_gt for pid in group}),
            "generated_text": sample.generated_text,
            "error": sample.error,
        })
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

    def score(self, value: Any, where: str) -> float:
        """A metric value: a finite number in [0, 1], as every metric gives.

        ``json`` reads ``NaN`` and ``Infinity``, which a hand edit (or another tool) can
        leave behind; a NaN per-question value would drop the question from the paired
        comparison without a word, so it is refused like any other damage.
        """
        number = self.number(value, where)
        if not math.isfinite(number) or not 0.0 <= number <= 1.0:
            raise self.fail(where, f"is {json.dumps(number)}, not a number in [0, 1]")
        return number

    def integers(self, value: Any, where: str) -> list[int]:
        if not isinstance(value, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in value
        ):
            raise self.fail(where, f"must be a list of integers, got {value!r}")
        return list(value)

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
                mean=None if mean is None else self.score(mean, f"{item_where}.mean"),
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
            if not isinstance(qid, int) or isinstance(qid, bool) or qid in seen:
                raise self.fail(f"{q_where}.qid", f"must be a unique integer, got {qid!r}")
            seen.add(qid)
            metrics = {
                str(k): self.score(v, f"{q_where}.metrics.{k} (qid {qid})")
                for k, v in self.mapping(question.get("metrics", {}), f"{q_where}.metrics").items()
            }
            relevant = self.integers(question.get("relevant_ids", []), f"{q_where}.relevant_ids")
            error = question.get("error")
            samples.append(SampleResult(
                qid=qid,
                question=str(question.get("question", "")),
                retrieval_gt=[relevant] if relevant else [],
                retrieval_ids=self.integers(
                    question.get("retrieved_ids", []), f"{q_where}.retrieved_ids"
                ),
                generated_text=str(question.get("generated_text", "")),
                generated_gt="",
                metrics=metrics,
                error=None if error is None else str(error),
                variant=variant,
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


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read a baseline file. Missing, unreadable or corrupt files raise :class:`BaselineError`."""
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
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
        data = json.loads(text)
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
    return Snapshot.from_data(data, source=str(target))


def write_snapshot(path: str | os.PathLike[str], snapshot: Snapshot) -> None:
    """Write ``snapshot`` to ``path`` atomically (readers never see a torn file)."""
    atomic_write_text(path, snapshot.to_json())


def obtained_path(path: str | os.PathLike[str]) -> Path:
    """Where the current run's snapshot goes next to a baseline, for inspection or copying.

    ``ragev-baseline.json`` → ``ragev-baseline.obtained.json``; a name without a suffix
    gets ``.obtained`` appended.
    """
    target = Path(path)
    if target.suffix:
        return target.with_name(f"{target.stem}.obtained{target.suffix}")
    return target.with_name(f"{target.name}.obtained")


@dataclass(frozen=True)
class Overlap:
    """Which questions a comparison can pair: shared, only current (added), only baseline."""

    common_qids: list[int]
    added: list[int]
    removed: list[int]

    def lines(self, label: str | None = None) -> list[str]:
        """Notes for the terminal about questions added or removed since the baseline.

        ``label`` (such as ``variant 'k10'``) says which run the notes are about.
        """
        about = f" ({label})" if label else ""
        notes = []
        if self.added:
            notes.append(
                f"ragev: {len(self.added)} question(s) not in the baseline{about} (added, not "
                f"compared): {id_list(self.added)}"
            )
        if self.removed:
            notes.append(
                f"ragev: {len(self.removed)} baseline question(s) missing from this run{about} "
                f"(removed, not compared): {id_list(self.removed)}"
            )
        return notes


def id_list(ids: Sequence[int]) -> str:
    """``1, 2, 3, … (n more)``: at most 20 ids, for one-line messages."""
    shown = ", ".join(str(i) for i in ids[:_MAX_LISTED])
    return shown + (f", … ({len(ids) - _MAX_LISTED} more)" if len(ids) > _MAX_LISTED else "")


def check_compatible(baseline: Snapshot, current: RunResult) -> Overlap:
    """Check that ``current`` may be compared with its run in ``baseline``.

    A different schema version, metric profile or dataset fingerprint, a variant the
    baseline does not have, or no shared question raise :class:`BaselineError` (a
    usage error). Returns the qid overlap with the baseline's run of the same variant.
    """
    mismatch = _mismatch(baseline, current)
    if mismatch is not None:
        raise BaselineError(mismatch)
    where = baseline.source or "the baseline"
    recorded = baseline.run_for(current.variant)
    if recorded is None:
        raise BaselineError(
            f"ragev: {where} has no run of variant {current.variant!r} (it has: "
            f"{', '.join(baseline.variants) or 'none'}); record it with --ragev-update-baseline "
            f"--ragev-variant {current.variant} (the other runs in the file are kept)"
        )
    before = {s.qid for s in recorded.samples}
    after = {s.qid for s in current.samples}
    common = sorted(before & after)
    if not common:
        label = "" if current.variant is None else f" (variant {current.variant!r})"
        raise BaselineError(
            f"ragev: {where} and this run{label} share no question ({len(before)} in the "
            f"baseline, {len(after)} now); {_FIX}"
        )
    return Overlap(common_qids=common, added=sorted(after - before), removed=sorted(before - after))
