"""The per-question record: one typed value from the pipeline's answer to the baseline file.

A :class:`Record` is made where a question is answered (:func:`make_record`), travels
on the test report as JSON text (:meth:`Record.to_json_text`, which pytest's
``--junitxml`` writes as the item's property), is parsed back only where it crossed a
process boundary (:meth:`Record.from_json`, as xdist serialises its reports), gets its
metrics when the run is scored (:meth:`Record.scored`) and is what the gate compares
and the reports show. Its field names are the metric engine's
(:class:`~pytest_ragev.core.types.MetricInput`) and the JSON report's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_ragev.core.attribution import (
    ChunkCount,
    PassageIndex,
    count_unattributed,
    is_passage_id,
    retrieved_ids,
)
from pytest_ragev.core.digest import text_digest
from pytest_ragev.core.types import Answer, Chunk, MetricInput, QAPair, Verdict

#: The ``user_properties`` name under which a record travels on a test report.
RECORD_KEY = "ragev"

#: A question of a run: ``(variant or None for the base configuration, qid)``.
QuestionKey = tuple[str | None, int]


@dataclass(frozen=True, slots=True)
class Record:
    """One question as the run answered it, and (once scored) its metrics.

    ``retrieval_gt`` holds the relevant passage ids as one group (``[]`` for a question
    without qrels) and ``grades`` their relevance grades; ``retrieval_ids`` what the
    pipeline retrieved, mapped to passage ids, best first. ``metrics`` holds only the
    metrics that apply (none at all when the pipeline raised; ``error`` says why).
    ``cached`` tells whether the answer came from the answer cache (``None``: no cache).
    ``retrieved`` holds every retrieved item as the pipeline returned it, best first and
    not deduplicated: its text, or its passage id when it has no text (what a custom
    metric reads as ``retrieved_texts``). ``chunks`` counts the
    items attributed by their text, ``unattributed`` those of them that matched no
    corpus passage, ``unattributed_example`` the first such text (shortened).
    ``nonfinite_meta`` names the places in ``meta`` where the answer held a NaN or an
    infinity, recorded as ``None`` (reports and baselines are strict JSON).
    ``answer_digest`` is set only on a record read from a baseline that keeps the first
    characters of a longer answer: ``generated_text`` holds those characters,
    ``answer_digest`` the :func:`~pytest_ragev.core.digest.text_digest` of the whole
    answer and ``answer_chars`` its length (see :func:`same_answer`). ``verdicts`` holds
    the judged metrics' and the custom metrics' values computed while the question was
    answered (scoring reads them instead of computing them again). ``retrieved_pids``
    holds, for each item of ``retrieved``, the passage id it named (a bare id, or a
    chunk's own ``passage_id``; ``None`` for a text placed by its text): kept only when
    the run exports its answers (``--ragev-answers-out``), so that a replay of the file
    places every item as the pipeline did; empty otherwise.

    With ``--ragev-repeat R`` (R > 1) the question was answered R times: the record's
    own answer fields hold the first answer, ``repeats`` the other R - 1 (records of the
    same question), and once scored ``scores`` holds each metric's R values in answer
    order and ``metrics`` their means, the value the gate pairs (see :attr:`spread`).
    ``slices`` are the slices the question belongs to (``lang:zh``, ``tag:billing``),
    set when the run is scored.
    """

    qid: int
    question: str
    retrieval_gt: list[list[int]]
    retrieval_ids: list[int]
    generated_text: str
    generated_gt: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    variant: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    grades: Mapping[int, float] = field(default_factory=dict)
    has_answer: bool = True
    cached: bool | None = None
    retrieved: tuple[int | str, ...] = ()
    chunks: int = 0
    unattributed: int = 0
    unattributed_example: str | None = None
    nonfinite_meta: tuple[str, ...] = ()
    answer_digest: str | None = None
    answer_chars: int | None = None
    verdicts: tuple[Verdict, ...] = ()
    repeats: tuple[Record, ...] = ()
    scores: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    slices: tuple[str, ...] = ()

    @property
    def answers(self) -> int:
        """How many answers the question got: 1, or R with ``--ragev-repeat R``."""
        return 1 + len(self.repeats)

    @property
    def every_answer(self) -> tuple[Record, ...]:
        """The question's answers in order: this record, then its :attr:`repeats`."""
        return (self, *self.repeats)

    @property
    def spread(self) -> dict[str, Spread]:
        """Per metric, how much the question's R scores disagree (``{}`` with one answer)."""
        return {name: spread_of(values) for name, values in self.scores.items()
                if len(values) > 1}
    retrieved_pids: tuple[int | None, ...] = ()

    @property
    def cut(self) -> bool:
        """Whether ``generated_text`` holds only the first characters of the answer."""
        return self.answer_digest is not None

    @property
    def shown_answer(self) -> str:
        """The answer as reports show it: a cut answer ends in "…"."""
        return self.generated_text + "…" if self.cut else self.generated_text

    @property
    def key(self) -> QuestionKey:
        """``(variant, qid)``: which question of which configuration this is."""
        return (self.variant, self.qid)

    @property
    def relevant(self) -> frozenset[int]:
        """The relevant passage ids, as a set."""
        return frozenset(pid for group in self.retrieval_gt for pid in group)

    def metric_input(self) -> MetricInput:
        """What the metric engine scores for this question."""
        return MetricInput(
            retrieval_gt=[list(group) for group in self.retrieval_gt],
            retrieval_ids=list(self.retrieval_ids),
            generated_text=self.generated_text,
            generated_gt=self.generated_gt,
        )

    def scored(self, metrics: Mapping[str, float],
               slices: tuple[str, ...] | None = None) -> Record:
        """This record with its metrics (and its slices, when given)."""
        if slices is None:
            return replace(self, metrics=dict(metrics))
        return replace(self, metrics=dict(metrics), slices=slices)

    # The record's JSON forms live here, side by side: the channel form (every field:
    # to_json_text / from_json), the report's sample (to_report_json, read back by
    # from_json too) and the baseline's entry (to_baseline_entry; the baseline reads its
    # committed file back through a checked reader, pytest_ragev.gate.snapshot).
    def _channel(self) -> dict[str, Any]:
        """Every field as the channel form names it, without copies (json writes tuples
        as arrays and the int keys of grades as strings)."""
        return {
            "qid": self.qid,
            "question": self.question,
            "retrieval_gt": self.retrieval_gt,
            "retrieval_ids": self.retrieval_ids,
            "generated_text": self.generated_text,
            "generated_gt": self.generated_gt,
            "metrics": _plain(self.metrics),
            "error": self.error,
            "variant": self.variant,
            "meta": _plain(self.meta),
            "grades": _plain(self.grades),
            "has_answer": self.has_answer,
            "cached": self.cached,
            "retrieved": self.retrieved,
            "chunks": self.chunks,
            "unattributed": self.unattributed,
            "unattributed_example": self.unattributed_example,
            "nonfinite_meta": self.nonfinite_meta,
            "verdicts": [verdict.to_json() for verdict in self.verdicts],
            # Only where they apply: a record of one answer crosses the channel as before.
            **({"repeats": [r._channel() for r in self.repeats]} if self.repeats else {}),
            **({"scores": _plain(self.scores)} if self.scores else {}),
            **({"slices": self.slices} if self.slices else {}),
            **({"retrieved_pids": self.retrieved_pids} if self.retrieved_pids else {}),
        }

    def to_json_text(self) -> str:
        """Every field as compact JSON text (non-ASCII kept): what crosses the xdist
        channel and ``--junitxml`` writes as the item's property."""
        return _ENCODE(self._channel())

    def to_json(self) -> dict[str, Any]:
        """:meth:`to_json_text` as plain data."""
        data: dict[str, Any] = json.loads(self.to_json_text())
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        """Inverse of :meth:`to_json` (missing optional keys take their defaults)."""
        return cls(
            qid=int(data["qid"]),
            question=str(data.get("question", "")),
            # map(int, ...): the listcomp's int() of each id, a fifth faster (a merge reads
            # a million ids back).
            retrieval_gt=[list(map(int, group)) for group in data.get("retrieval_gt", [])],
            retrieval_ids=list(map(int, data.get("retrieval_ids", []))),
            generated_text=str(data.get("generated_text", "")),
            generated_gt=str(data.get("generated_gt", "")),
            metrics={str(k): float(v) for k, v in dict(data.get("metrics") or {}).items()},
            error=data.get("error"),
            variant=data.get("variant"),
            meta=dict(data.get("meta") or {}),
            grades={int(k): float(v) for k, v in dict(data.get("grades") or {}).items()},
            has_answer=bool(data.get("has_answer", True)),
            cached=data.get("cached"),
            retrieved=tuple(
                item if isinstance(item, int) else str(item)
                for item in data.get("retrieved", ())
            ),
            chunks=int(data.get("chunks", 0)),
            unattributed=int(data.get("unattributed", 0)),
            unattributed_example=data.get("unattributed_example"),
            nonfinite_meta=tuple(str(x) for x in data.get("nonfinite_meta", ())),
            verdicts=tuple(Verdict.from_json(v) for v in data.get("verdicts", ())),
            repeats=tuple(cls.from_json(_repeat_data(data, item))
                          for item in data.get("repeats", ()) or ()),
            scores={str(k): tuple(float(x) for x in v)
                    for k, v in dict(data.get("scores") or {}).items()},
            slices=tuple(str(x) for x in data.get("slices", ()) or ()),
            retrieved_pids=tuple(None if pid is None else int(pid)
                                 for pid in data.get("retrieved_pids", ())),
        )

    def to_report_json(self) -> dict[str, Any]:
        """The record as it appears in ``data.samples`` of the JSON report: the channel
        form's names, without what the run alone needs (grades, cache state, the
        retrieved texts) and without empty optional fields."""
        return {
            "qid": self.qid,
            "question": self.question,
            "retrieval_gt": [list(group) for group in self.retrieval_gt],
            "retrieval_ids": list(self.retrieval_ids),
            "generated_text": self.generated_text,
            "generated_gt": self.generated_gt,
            "metrics": dict(self.metrics),
            "error": self.error,
            **({"variant": self.variant} if self.variant is not None else {}),
            **({"meta": dict(self.meta)} if self.meta else {}),
            # Only for pipelines that return texts: ids need no attribution.
            **({"chunks": self.chunks, "unattributed": self.unattributed}
               if self.chunks else {}),
            # Judged values with their reasons (and custom metrics' reasons and costs).
            **({"verdicts": [verdict.to_json() for verdict in self.verdicts]}
               if self.verdicts else {}),
            **self._repeats_json(),
        }

    def _repeats_json(self) -> dict[str, Any]:
        """The sample's keys of a question answered R > 1 times: the other answers
        (``repeats``), each metric's R values (``scores``) and their ``spread``."""
        if not self.repeats:
            return {}
        return {
            "repeats": [repeat.to_repeat_json() for repeat in self.repeats],
            "scores": {name: list(values) for name, values in self.scores.items()},
            "spread": {name: item.to_json() for name, item in self.spread.items()},
        }

    def to_repeat_json(self) -> dict[str, Any]:
        """One of the other answers of a repeated question, as its sample lists it: what
        differs between answers (the question's own fields are the sample's)."""
        return {
            "retrieval_ids": list(self.retrieval_ids),
            "generated_text": self.generated_text,
            "error": self.error,
            **({"meta": dict(self.meta)} if self.meta else {}),
            **({"chunks": self.chunks, "unattributed": self.unattributed}
               if self.chunks else {}),
            **({"verdicts": [verdict.to_json() for verdict in self.verdicts]}
               if self.verdicts else {}),
        }

    def to_part_json(self) -> dict[str, Any]:
        """The record as a partial report (a shard's, ``--ragev-shard``) holds it: the
        report's sample and what the report form leaves out that the merged run reads
        again (:meth:`from_json` takes it back): the relevance grades, a question
        without a reference answer, the first chunk text that matched no passage, where
        ``meta`` held a NaN or an infinity, and the question's slices (a report names
        them only when its own run's slices are worth showing, which a shard's part of
        the questions says nothing about)."""
        item = self.to_report_json()
        item["grades"] = {str(pid): grade for pid, grade in self.grades.items()}
        if self.slices:
            item["slices"] = list(self.slices)
        if not self.has_answer:
            item["has_answer"] = False
        if self.unattributed_example is not None:
            item["unattributed_example"] = self.unattributed_example
        if self.nonfinite_meta:
            item["nonfinite_meta"] = list(self.nonfinite_meta)
        return item

    def verdict(self, metric: str) -> Verdict | None:
        """The verdict of ``metric`` on this question, if one was computed."""
        return next((v for v in self.verdicts if v.metric == metric), None)

    def to_baseline_entry(
        self, content_hash: str, metric_names: Sequence[str], limit: int | None = None
    ) -> dict[str, Any]:
        """The record as a baseline file keeps it: the report's names for what the gate
        reads, the question's content hash, the metrics ``metric_names`` in that order;
        an answer longer than ``limit`` characters cut, with the digest and length of the
        whole (an answer already cut stays as it was)."""
        entry: dict[str, Any] = {
            "qid": self.qid,
            "hash": content_hash,
            "question": self.question,
            "metrics": {m: float(self.metrics[m]) for m in metric_names},
            "retrieval_ids": list(self.retrieval_ids),
            "retrieval_gt": [list(group) for group in self.retrieval_gt],
        }
        text = self.generated_text
        if self.cut:
            entry.update(generated_text=text, answer_digest=self.answer_digest,
                         answer_chars=self.answer_chars)
        elif limit is not None and len(text) > limit:
            entry.update(generated_text=text[:limit], answer_digest=text_digest(text),
                         answer_chars=len(text))
        else:
            entry["generated_text"] = text
        entry["error"] = self.error
        return entry


#: The question-level fields a repeated answer shares with its question's record.
_SHARED = ("qid", "question", "retrieval_gt", "generated_gt", "variant", "grades",
           "has_answer")


def _repeat_data(question: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """A repeated answer's JSON with its question's fields filled in (a report's sample
    lists only what differs between the answers)."""
    return {**{key: question[key] for key in _SHARED if key in question}, **answer}


@dataclass(frozen=True)
class Spread:
    """How much a question's R scores of one metric disagree.

    ``sd`` is their sample standard deviation (``n - 1`` in the denominator); for a
    metric whose R values are all 0 or 1 (a hit or a miss), ``disagree`` is the share of
    the answers that differ from the majority (``2 of 5`` answers: 0.4; ``None`` for
    other metrics).
    """

    sd: float
    disagree: float | None = None

    def to_json(self) -> dict[str, float]:
        """``{"sd": 0.49}`` or ``{"sd": 0.55, "disagree": 0.4}``."""
        return {"sd": self.sd, **({"disagree": self.disagree}
                                  if self.disagree is not None else {})}


def spread_of(values: Sequence[float]) -> Spread:
    """The :class:`Spread` of two or more scores of one question."""
    count = len(values)
    mean = math.fsum(values) / count
    sd = math.sqrt(max(math.fsum((v - mean) ** 2 for v in values) / (count - 1), 0.0))
    disagree = None
    if all(v in (0.0, 1.0) for v in values):
        ones = sum(1 for v in values if v == 1.0)
        disagree = min(ones, count - ones) / count
    return Spread(sd=sd, disagree=disagree)


def same_answer(before: Record, after: Record) -> bool:
    """Whether two records hold the same generated answer, also when one or both were
    read from a baseline that keeps it in part (then their digests decide)."""
    if before.answer_digest is None and after.answer_digest is None:
        return before.generated_text == after.generated_text
    return _whole_digest(before) == _whole_digest(after)


def _whole_digest(record: Record) -> str:
    return record.answer_digest or text_digest(record.generated_text)


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _plain(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    # The encoder takes dicts only; a record's mappings are dicts but for odd callers.
    return mapping if type(mapping) is dict else dict(mapping)


def make_record(
    case: QAPair,
    answer: Answer | None,
    *,
    index: PassageIndex,
    variant: str | None,
    error: str | None = None,
    cached: bool | None = None,
    item_ids: bool = False,
) -> Record:
    """The record of ``case``: the pipeline's ``answer`` mapped to passage ids, or ``error``.

    ``answer`` is ``None`` for a question that failed; ``TypeError`` when the answer's
    text is not a string. ``item_ids`` keeps the passage id each retrieved item named
    (:attr:`Record.retrieved_pids`), for a run that exports its answers.
    """
    nonfinite: list[str] = []
    pids: tuple[int | None, ...] = ()
    if answer is None:
        ids: list[int] = []
        text = ""
        meta: dict[str, Any] = {}
        items: tuple[int | str, ...] = ()
        count = ChunkCount()
    else:
        ids = retrieved_ids(answer.retrieved, index=index, relevant=case.pids)
        text = answer.text
        if not isinstance(text, str):
            raise TypeError(f"Answer.text is a {type(text).__name__}; return the answer as a str")
        meta = _json_safe(dict(answer.meta), "meta", nonfinite)
        items = tuple(_item(item) for item in answer.retrieved)
        if item_ids:
            pids = tuple(_item_pid(item) for item in answer.retrieved)
        count = count_unattributed(answer.retrieved, index=index)
    return Record(
        qid=case.qid,
        question=case.question,
        retrieval_gt=[list(case.pids)] if case.pids else [],
        retrieval_ids=ids,
        generated_text=text,
        generated_gt=case.answer if case.answer is not None else "",
        error=error,
        variant=variant,
        meta=meta,
        grades=dict(zip(case.pids, case.grades, strict=False)),
        has_answer=case.answer is not None,
        cached=cached,
        retrieved=items,
        chunks=count.chunks,
        unattributed=count.unattributed,
        unattributed_example=count.first,
        nonfinite_meta=tuple(nonfinite),
        retrieved_pids=pids,
    )


def _item_pid(item: Any) -> int | None:
    # retrieved_ids has checked the items' types: an id, a text, or a chunk object.
    if isinstance(item, str):
        return None
    if is_passage_id(item):
        return int(item)
    pid = getattr(item, "passage_id", None)
    return None if pid is None else int(pid)


def _item(item: Any) -> int | str:
    # retrieved_ids has checked the items' types. A chunk keeps its own text even when it
    # names its passage: that text is what the generator saw.
    kind = type(item)
    if kind is int or kind is str:
        return item  # type: ignore[no-any-return]
    if kind is Chunk and type(item.text) is str:
        return item.text
    if isinstance(item, int | str):
        return item
    if is_passage_id(item):
        return int(item)  # a numpy integer: records carry plain JSON types
    return str(item.text)


def _json_safe(value: Any, where: str, nonfinite: list[str]) -> Any:
    # Records cross the xdist channel and land in JSON: plain types only. A NaN or an
    # infinity becomes None (strict JSON has neither); ``nonfinite`` collects where.
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v, f"{where}[{str(k)!r}]", nonfinite)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v, f"{where}[{i}]", nonfinite) for i, v in enumerate(value)]
    if not isinstance(value, float):
        try:  # numpy scalars and the like
            value = float(value)
        except (TypeError, ValueError):
            return str(value)
    if not math.isfinite(value):
        nonfinite.append(where)
        return None
    return value


def finite_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` as a record holds it: plain JSON types, NaN and infinities as ``None``."""
    clean: dict[str, Any] = _json_safe(dict(meta), "meta", [])
    return clean


def nonfinite_warning(records: Sequence[Record]) -> str | None:
    """The run's one warning line about NaN/infinite numbers in ``Answer.meta``, if any."""
    hit = [record for record in records if record.nonfinite_meta]
    if not hit:
        return None
    first = hit[0]
    where = f"q{first.qid}" + (f" [{first.variant}]" if first.variant else "")
    return (f"{len(hit)} answer(s) held NaN or an infinity in Answer.meta "
            f"(first: {where} {first.nonfinite_meta[0]}); recorded as null, since the reports "
            "and baselines are strict JSON: return finite numbers or None")
