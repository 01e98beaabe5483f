"""Evaluation datasets: a folder of five Parquet files, loaded into :class:`QAPair` objects.

The layout (the same as the original's ``dataset/samples``):

==================  ==================================  ==============================
file                columns                             meaning
==================  ==================================  ==============================
queries.parquet     ``id``, ``text``                    questions
corpus.parquet      ``id``, ``text``                    passages of the knowledge base
answers.parquet     ``id``, ``text``                    reference answers
qrels.parquet       ``qid``, ``pid`` [, ``score``]      relevant passages per question
qas.parquet         ``qid``, ``aid``                    question -> reference answer
==================  ==================================  ==============================

The columnar work (pyarrow, numpy) lives in the private :mod:`._load` and :mod:`._write`.
The plugin imports this package only when a run answers questions, never when it merely
loads.
"""

from __future__ import annotations

import functools
import hashlib
import numbers
import operator
import os
from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pytest_ragev.core.errors import DatasetError
from pytest_ragev.core.types import QAPair
from pytest_ragev.dataset._arrow import python_strings
from pytest_ragev.dataset._fingerprint import corpus_digest
from pytest_ragev.dataset._load import read_dataset_folder, reordered
from pytest_ragev.dataset._spill import SPILL_TEXT_BYTES, MappedTexts, spill
from pytest_ragev.dataset._tags import LANG_PREFIX, tag_counts
from pytest_ragev.dataset._write import write_dataset_folder

__all__ = [
    "DATASET_FILES",
    "LANG_PREFIX",
    "SPILL_TEXT_BYTES",
    "Corpus",
    "Dataset",
    "DatasetError",
    "DatasetStats",
    "corpus_fingerprint",
    "load_dataset",
    "question_hash",
    "write_dataset",
]

#: The five files of a dataset folder, in the order they are read.
DATASET_FILES: tuple[str, ...] = (
    "queries.parquet",
    "corpus.parquet",
    "answers.parquet",
    "qrels.parquet",
    "qas.parquet",
)


class Corpus(Mapping[int, str]):
    """The passages of a dataset: a read-only mapping passage id -> text, in id order.

    The data stays columnar: ``ids`` is a sorted int64 numpy array and the texts an Arrow
    array, so a million passages cost no Python object per row until somebody asks for
    them (``texts`` materialises the Python list once and caches it).
    """

    __slots__ = ("_file_order", "_fingerprint", "_ids", "_mapped", "_texts_arrow", "_texts_list")

    def __init__(
        self,
        ids: npt.NDArray[np.int64],
        texts: pa.ChunkedArray[Any],
        *,
        fingerprint: str | None = None,
    ) -> None:
        """Wrap sorted, unique ``ids`` and their ``texts`` (same length, same order).

        ``fingerprint`` is the loader's digest of exactly these ids and texts, if known.
        """
        if len(ids) != len(texts):
            raise ValueError(f"Corpus: {len(ids)} ids but {len(texts)} texts")
        ids.flags.writeable = False
        self._fingerprint = fingerprint
        self._ids = ids
        self._texts_arrow = texts
        self._texts_list: list[str] | None = None
        self._mapped: MappedTexts | None = None  # set by spill_texts()
        #: id position -> row of ``_texts_arrow`` while the texts are still in file order.
        self._file_order: npt.NDArray[np.intp] | None = None

    @classmethod
    def _in_file_order(
        cls,
        ids: npt.NDArray[np.int64],
        file_texts: pa.ChunkedArray[Any],
        order: npt.NDArray[np.intp] | None,
        fingerprint: str | None = None,
    ) -> Corpus:
        """A corpus over texts still in file order: ``file_texts[order[i]]`` is ``ids[i]``'s.

        Lookups go through ``order``; the texts are physically put in id order only when
        a caller asks for them all (:attr:`arrow_texts`, :attr:`texts`).
        """
        corpus = cls(ids, file_texts, fingerprint=fingerprint)
        if order is not None:
            order.flags.writeable = False
            corpus._file_order = order
        return corpus

    @property
    def fingerprint(self) -> str | None:
        """sha256 (hex) of the passage ids and texts when the corpus was loaded from files.

        It is the corpus part of :attr:`Dataset.fingerprint`: editing a question, an
        answer or a qrel leaves it unchanged (the built-in pipeline keys its knowledge
        base on it). ``None`` for a corpus built in memory.
        """
        return self._fingerprint

    @property
    def ids(self) -> npt.NDArray[np.int64]:
        """Passage ids, ascending (a read-only int64 numpy array)."""
        return self._ids

    @property
    def texts(self) -> list[str]:
        """Passage texts aligned with :attr:`ids` (built on first use, then cached)."""
        if self._texts_list is None:
            self._texts_list = python_strings(self.arrow_texts)
            self.release_pages()
        return self._texts_list

    @property
    def text_bytes(self) -> int:
        """Bytes the texts take as Arrow holds them (UTF-8 data and offsets)."""
        return int(self._texts_arrow.nbytes)

    @property
    def spilled(self) -> bool:
        """Whether the texts are read from a memory-mapped temporary file (see
        :meth:`spill_texts`)."""
        return self._mapped is not None

    def spill_texts(self) -> bool:
        """Move the texts out of the heap, into a memory-mapped anonymous temporary file.

        Every read works as before; only the pages a read touches are resident, and a
        full scan (iterating the corpus, :attr:`texts`) hands its pages back when it
        ends. For a long-lived holder of a large corpus: the plugin does this when a
        corpus has at least :data:`SPILL_TEXT_BYTES` bytes of text (:attr:`text_bytes`).
        Returns whether the texts are mapped now; without a writable temporary folder
        (or room in it) they stay in memory.
        """
        if self._mapped is None and self._texts_list is None:
            mapped = spill(self._texts_arrow, self._file_order)
            if mapped is not None:
                self._texts_arrow = mapped.texts
                self._file_order = None
                self._mapped = mapped
                # The decoded column goes back to the operating system, not to Arrow's pool.
                pa.default_memory_pool().release_unused()
        return self._mapped is not None

    def release_pages(self) -> None:
        """Hand back the resident pages of mapped texts (nothing to do otherwise)."""
        if self._mapped is not None:
            self._mapped.release()

    @property
    def arrow_texts(self) -> pa.ChunkedArray[Any]:
        """The texts as an Arrow array in id order, for columnar consumers (no Python copies)."""
        if self._file_order is not None:
            self._texts_arrow = reordered(self._texts_arrow, self._file_order)
            self._file_order = None
        return self._texts_arrow

    def _position(self, pid: object) -> int | None:
        # Any integer, including numpy's (``ds.corpus[ds.corpus.ids[0]]``); never a bool.
        if isinstance(pid, bool) or not isinstance(pid, numbers.Integral):
            return None
        pid = operator.index(pid)
        ids = self._ids
        if len(ids) == 0 or pid < int(ids[0]) or pid > int(ids[-1]):
            return None
        position = int(ids.searchsorted(pid))
        return position if int(ids[position]) == pid else None

    def __getitem__(self, pid: int | np.integer[Any]) -> str:
        position = self._position(pid)
        if position is None:
            raise KeyError(pid)
        if self._texts_list is not None:
            return self._texts_list[position]
        if self._file_order is not None:
            position = int(self._file_order[position])
        text: str = self._texts_arrow[position].as_py()
        return text

    def __contains__(self, pid: object) -> bool:
        return self._position(pid) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids.tolist())

    def items(self) -> ItemsView[int, str]:
        """(id, text) pairs in id order, streamed from the columns (no per-key lookup;
        the strings are made a block at a time, not kept)."""
        return _CorpusItems(self)

    def values(self) -> ValuesView[str]:
        """Texts in id order, streamed as :meth:`items` (not kept)."""
        return _CorpusValues(self)

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"Corpus({len(self)} passages)"


#: Rows made into Python strings at a time when a corpus is iterated (a few MB of text).
_ITER_ROWS = 1 << 13


def _text_blocks(corpus: Corpus) -> Iterator[tuple[list[int], list[str]]]:
    """The ids and texts in id order, a block of rows at a time.

    Iterating the corpus (the built-in KB build does, once) must not make it hold a
    Python string per passage for the rest of the run: the texts are already in Arrow.
    Only the :attr:`Corpus.texts` list, once somebody asked for it, is read as it is.
    """
    ids = corpus.ids
    cached = corpus._texts_list
    if cached is not None:
        yield ids.tolist(), cached
        return
    texts = corpus.arrow_texts
    try:
        for start in range(0, len(ids), _ITER_ROWS):
            yield (ids[start:start + _ITER_ROWS].tolist(),
                   python_strings(texts.slice(start, _ITER_ROWS)))
    finally:
        # Mapped texts: a scan (the KB build's) must not leave every page resident.
        corpus.release_pages()


class _CorpusItems(ItemsView[int, str]):
    # The generic ItemsView looks every key up again; with a million passages that would
    # cost a binary search and an Arrow scalar per row.
    _mapping: Corpus

    def __iter__(self) -> Iterator[tuple[int, str]]:
        for ids, texts in _text_blocks(self._mapping):
            yield from zip(ids, texts, strict=True)


class _CorpusValues(ValuesView[str]):
    _mapping: Corpus

    def __iter__(self) -> Iterator[str]:
        for _, texts in _text_blocks(self._mapping):
            yield from texts


@dataclass(frozen=True)
class DatasetStats:
    """What the loader reports about a dataset (the seed prints these at load).

    ``avg_relevant_passages`` is the number of relevant qrels divided by the number of
    questions (questions without qrels count as 0); ``answer_coverage`` is the share of
    questions that have a reference answer, in percent.
    """

    questions: int
    passages: int
    answers: int
    relevant_qrels: int
    questions_with_answer: int
    questions_without_qrels: int
    questions_without_answer: int
    unreferenced_passages: int
    fingerprint: str
    #: Questions per tag, most frequent first (``None``: ``queries.parquet`` has no
    #: ``tags`` column; ``{}``: it has one, and no question is tagged).
    tags: Mapping[str, int] | None = None

    @property
    def avg_relevant_passages(self) -> float:
        """Relevant passages per question, averaged over all questions."""
        return self.relevant_qrels / self.questions if self.questions else 0.0

    @property
    def answer_coverage(self) -> float:
        """Percentage of questions with a reference answer (0-100)."""
        return 100.0 * self.questions_with_answer / self.questions if self.questions else 0.0

    def to_json(self) -> dict[str, Any]:
        """The ``ragev dataset stats --json`` object (rounded to 4 decimals for stability);
        ``tags`` only for a dataset with a ``tags`` column."""
        return {
            "questions": self.questions,
            "passages": self.passages,
            "answers": self.answers,
            "avg_relevant_passages": round(self.avg_relevant_passages, 4),
            "answer_coverage": round(self.answer_coverage, 4),
            "questions_without_qrels": self.questions_without_qrels,
            "questions_without_answer": self.questions_without_answer,
            "unreferenced_passages": self.unreferenced_passages,
            "fingerprint": self.fingerprint,
            **({"tags": dict(self.tags)} if self.tags is not None else {}),
        }

    def lines(self) -> list[str]:
        """Human-readable lines, one statistic each."""
        return [
            f"questions: {self.questions}",
            f"passages: {self.passages}",
            f"answers: {self.answers}",
            f"avg relevant passages per question: {self.avg_relevant_passages:.2f}",
            f"answer coverage: {self.answer_coverage:.1f}% "
            f"({self.questions_with_answer}/{self.questions})",
            f"questions without qrels: {self.questions_without_qrels}",
            f"questions without answer: {self.questions_without_answer}",
            f"passages referenced by no question: {self.unreferenced_passages}",
            *self._tag_lines(),
            f"fingerprint: {self.fingerprint}",
        ]

    def _tag_lines(self) -> list[str]:
        if self.tags is None:
            return []
        if not self.tags:
            return ["questions per tag: none tagged"]
        tagged = ", ".join(f"{name} {count}" for name, count in self.tags.items())
        return [f"questions per tag: {tagged}"]


def _stats(
    *,
    questions: int,
    passages: int,
    answers: int,
    relevant_qrels: int,
    referenced_passages: int,
    without_qrels: int,
    without_answer: int,
    fingerprint: str,
    tags: Mapping[str, int] | None = None,
) -> DatasetStats:
    return DatasetStats(
        questions=questions,
        passages=passages,
        answers=answers,
        relevant_qrels=relevant_qrels,
        questions_with_answer=questions - without_answer,
        questions_without_qrels=without_qrels,
        questions_without_answer=without_answer,
        unreferenced_passages=passages - referenced_passages,
        fingerprint=fingerprint,
        tags=tags,
    )


def _warnings_for(without_qrels: Sequence[int], without_answer: Sequence[int]) -> tuple[str, ...]:
    """The load warnings, given the ascending qids that lack qrels resp. an answer."""
    warnings: list[str] = []
    if len(without_qrels):
        warnings.append(
            f"{_plural(len(without_qrels), 'question')} without qrels "
            f"(first: qid {int(without_qrels[0])}): excluded from retrieval means"
        )
    if len(without_answer):
        warnings.append(
            f"{_plural(len(without_answer), 'question')} without a reference answer "
            f"(first: qid {int(without_answer[0])}): excluded from generation means"
        )
    return tuple(warnings)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset: one :class:`QAPair` per question, the corpus, stats and warnings.

    Build it with :func:`load_dataset`. ``pairs`` holds every row of ``queries.parquet``
    ordered by qid, including questions without qrels or without an answer (the metric
    layer leaves those out of the retrieval resp. generation means; ``warnings`` says so).
    """

    path: Path
    dataset_id: str
    fingerprint: str
    pairs: tuple[QAPair, ...]
    corpus: Corpus
    stats: DatasetStats
    warnings: tuple[str, ...] = ()
    #: For a :meth:`limit`-ed dataset, the fingerprint of the full dataset it was cut
    #: from (a baseline of the full dataset gates it on the questions it ran); else None.
    source_fingerprint: str | None = None
    _by_qid: Mapping[int, QAPair] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self._by_qid:
            object.__setattr__(self, "_by_qid", {pair.qid: pair for pair in self.pairs})

    @functools.cached_property
    def question_hashes(self) -> Mapping[int, str]:
        """qid -> :func:`question_hash` of every question, computed once on first use.

        A baseline stores these, so that a later run compares the questions whose
        content did not change and lists the ones that were added, removed or edited.
        """
        return {pair.qid: question_hash(pair) for pair in self.pairs}

    def pair(self, qid: int) -> QAPair:
        """The question with id ``qid``; ``KeyError`` naming the dataset if there is none."""
        try:
            return self._by_qid[qid]
        except KeyError:
            raise KeyError(f"dataset {self.dataset_id!r} has no question with qid {qid}") from None

    def limit(self, n: int) -> Dataset:
        """The first ``n`` questions by qid, with the same corpus (``n >= len`` returns self).

        The fingerprint of the result is derived from this one and ``n`` (answer caches
        and reports never mix a limited run up with a full one); the full dataset's
        fingerprint stays available as ``source_fingerprint``, so a limited run can be
        gated against a baseline of the full dataset on the questions it ran.
        """
        if n < 0:
            raise ValueError(f"limit must be >= 0, got {n}")
        if n >= len(self.pairs):
            return self
        pairs = self.pairs[:n]
        fingerprint = hashlib.sha256(f"{self.fingerprint}:limit={n}".encode()).hexdigest()
        without_qrels = [pair.qid for pair in pairs if not pair.has_qrels]
        without_answer = [pair.qid for pair in pairs if not pair.has_answer]
        stats = _stats(
            questions=len(pairs),
            passages=len(self.corpus),
            answers=len({pair.aid for pair in pairs if pair.aid is not None}),
            relevant_qrels=sum(len(pair.pids) for pair in pairs),
            referenced_passages=len({pid for pair in pairs for pid in pair.pids}),
            without_qrels=len(without_qrels),
            without_answer=len(without_answer),
            fingerprint=fingerprint,
            tags=None if self.stats.tags is None else tag_counts([pair.tags for pair in pairs]),
        )
        return Dataset(
            path=self.path,
            dataset_id=self.dataset_id,
            fingerprint=fingerprint,
            pairs=pairs,
            corpus=self.corpus,
            stats=stats,
            warnings=_warnings_for(without_qrels, without_answer),
            source_fingerprint=self.source_fingerprint or self.fingerprint,
        )

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[QAPair]:
        return iter(self.pairs)


#: Tags the hash input; changing what :func:`question_hash` covers must change the tag.
_QUESTION_HASH_TAG = "q1"
#: Follows the tag part of a tagged question's hash input (an untagged question's input,
#: and so its hash, is what it was before tags existed).
_QUESTION_TAGS_TAG = "t1"


def question_hash(pair: QAPair) -> str:
    """A short content hash of one question: what its scores depend on besides the pipeline.

    It covers the question text, the texts and grades of its relevant passages (not
    their ids, nor their order: renumbering the corpus does not change a question) and
    the reference answer, and its tags when it has any (sorted: their order does not
    matter; an untagged question hashes as it did before tags existed, so a baseline of
    a dataset without tags keeps pairing). 16 hex digits (64 bits): a hash is only ever
    compared with the same qid's hash in a baseline, so a collision needs an edit that
    happens to keep 64 bits, odds of 2^-64 per edited question. Every field is written
    with its length first, so no two different contents share an input.
    """
    grades = pair.grades or (1.0,) * len(pair.passages)
    passages = sorted(
        f"{len(text)}:{text}{float(grade)!r};" for text, grade in zip(pair.passages, grades,
                                                                      strict=True)
    )
    answer = "-" if pair.answer is None else f"{len(pair.answer)}:{pair.answer}"
    text = (f"{_QUESTION_HASH_TAG}{len(pair.question)}:{pair.question}{answer}"
            f"{len(passages)}:{''.join(passages)}")
    if pair.tags:
        names = "".join(f"{len(tag)}:{tag}" for tag in sorted(pair.tags))
        text += f"{_QUESTION_TAGS_TAG}{len(pair.tags)}:{names}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def corpus_fingerprint(corpus: Mapping[int, str]) -> str:
    """sha256 of the corpus alone (ids and texts in id order): what the KB depends on.

    Editing a question, an answer or a qrel leaves it unchanged, so the cached KB is
    reused. A loaded :class:`~pytest_ragev.dataset.Corpus` carries it from the loader;
    any other mapping is hashed the same way (one content, one key).
    """
    own = getattr(corpus, "fingerprint", None)
    if isinstance(own, str):
        return own
    ids = getattr(corpus, "ids", None)
    texts = getattr(corpus, "arrow_texts", None)
    if isinstance(ids, np.ndarray) and texts is not None:
        return corpus_digest(ids, texts)
    pairs = sorted(corpus.items())
    return corpus_digest(
        np.asarray([pid for pid, _ in pairs], dtype=np.int64),
        pa.chunked_array([pa.array([text for _, text in pairs], pa.string())]),
    )


def load_dataset(path: str | os.PathLike[str], dataset_id: str | None = None) -> Dataset:
    """Read the five Parquet files of the folder ``path`` into a :class:`Dataset`.

    Accepts ids stored as any integer type or as strings holding integers, extra columns
    (ignored) and a numeric qrels ``score`` column (graded relevance: ``score > 0`` is
    relevant and the grade is kept in :attr:`QAPair.grades`). ``dataset_id`` names the
    run and defaults to the folder name. Raises :class:`DatasetError` with a one-line
    message for anything unusable.
    """
    folder = Path(path)
    loaded = read_dataset_folder(folder)
    corpus = Corpus._in_file_order(
        loaded.corpus_ids,
        loaded.corpus_texts,
        loaded.corpus_order,
        fingerprint=loaded.corpus_fingerprint,
    )
    stats = _stats(
        questions=len(loaded.pairs),
        passages=len(corpus),
        answers=loaded.answer_count,
        relevant_qrels=loaded.relevant_qrels,
        referenced_passages=loaded.referenced_passages,
        without_qrels=len(loaded.qids_without_qrels),
        without_answer=len(loaded.qids_without_answer),
        fingerprint=loaded.fingerprint,
        tags=loaded.tag_counts,
    )
    dataset = Dataset(
        path=folder,
        dataset_id=dataset_id if dataset_id else (folder.resolve().name or str(folder)),
        fingerprint=loaded.fingerprint,
        pairs=loaded.pairs,
        corpus=corpus,
        stats=stats,
        warnings=_warnings_for(
            loaded.qids_without_qrels.tolist(), loaded.qids_without_answer.tolist()
        ),
    )
    # The loaded tables hold the decoded column too: were they kept, a later
    # Corpus.spill_texts could not hand its memory back to the operating system.
    del loaded
    return dataset


#: What :func:`write_dataset` takes for ``queries``/``corpus``/``answers``.
TextRows = Mapping[int, str] | Iterable[tuple[int, str]] | Iterable[Mapping[str, Any]]


def write_dataset(
    path: str | os.PathLike[str],
    *,
    queries: Any,
    corpus: Any,
    answers: Any = (),
    qrels: Any = (),
    qas: Any = (),
    compression: Literal["gzip", "brotli", "lz4", "zstd", "snappy", "none"] = "zstd",
) -> Path:
    """Write a dataset folder (the five Parquet files, each written atomically).

    ``queries``, ``corpus`` and ``answers`` take a mapping ``id -> text``, ``(id, text)``
    tuples, ``{"id": ..., "text": ...}`` dicts or a ``pyarrow.Table``; a question may
    carry tags (``{"id", "text", "tags"}`` or ``(id, text, tags)``, a string or a list
    of strings), written as a ``tags`` column when any has them. ``qrels`` takes
    ``(qid, pid)`` or ``(qid, pid, score)`` tuples, dicts with those keys, a mapping
    ``qid -> [pid, ...]`` or a table; a ``score`` column is written only when some row has
    one. ``qas`` takes ``(qid, aid)`` tuples, dicts, a mapping ``qid -> aid`` or a table.
    Ids are written as int64. Nothing is validated here (tests write broken datasets on
    purpose); :func:`load_dataset` validates. Returns the folder.
    """
    return write_dataset_folder(
        Path(path),
        queries=queries,
        corpus=corpus,
        answers=answers,
        qrels=qrels,
        qas=qas,
        compression=compression,
    )
