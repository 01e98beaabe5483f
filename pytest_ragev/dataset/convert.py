"""Dataset tools behind ``ragev dataset sample`` and ``ragev dataset convert``.

``sample`` shrinks a dataset (N questions, their passages and answers, plus a share of
distractor passages); ``convert`` turns the BEIR layout or a simple JSONL QA file into
the five Parquet files. Both write through :func:`pytest_ragev.dataset.write_dataset`;
the ``ragev`` command points them at a :func:`staged_folder` beside the destination, which
replaces the destination's files only once the output has been loaded successfully.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pytest_ragev.core.errors import ConfigError, DatasetError
from pytest_ragev.dataset import DATASET_FILES, Dataset, write_dataset
from pytest_ragev.dataset._load import INTEGER_ID
from pytest_ragev.dataset._tags import source_tags
from pytest_ragev.dataset._write import write_table

#: The share of distractor passages ``sample`` adds, relative to the relevant ones (the seed's 20%).
DEFAULT_DISTRACTOR_SHARE = 0.2
#: Where a conversion that renumbered ids records them (``table``, ``id``, ``source_id``).
ID_MAP_FILE = "id_map.parquet"
#: Every file a dataset tool writes into its destination.
_OUTPUT_FILES = (*DATASET_FILES, ID_MAP_FILE)


def check_destination(source: Path, destination: Path, *, force: bool) -> None:
    """Refuse to overwrite a dataset (or the source) unless ``force`` is given."""
    if destination.exists() and not destination.is_dir():
        raise ConfigError(f"destination {destination} is a file; pass a folder path")
    if source.resolve() == destination.resolve():
        raise ConfigError(
            f"destination {destination} is the source folder; write to another folder"
        )
    existing = [name for name in _OUTPUT_FILES if (destination / name).exists()]
    if existing and not force:
        raise ConfigError(
            f"destination {destination} already holds {existing[0]}; "
            "pass --force to overwrite it or choose an empty folder"
        )


@dataclass(frozen=True)
class SampleSummary:
    """What :func:`sample_dataset` wrote."""

    questions: int
    relevant_passages: int
    distractors: int


def check_seed(seed: int) -> None:
    """``ConfigError`` for a seed numpy's generators refuse (they take 0 or more)."""
    if seed < 0:
        raise ConfigError(f"--seed must be 0 or more, got {seed}; pass a non-negative integer")


def sample_dataset(
    source: Dataset,
    destination: Path,
    *,
    questions: int,
    seed: int = 0,
    distractor_share: float = DEFAULT_DISTRACTOR_SHARE,
) -> SampleSummary:
    """Write a smaller dataset: ``questions`` questions drawn uniformly with ``seed``.

    The sample keeps every relevant passage of the drawn questions (with their grades) and
    their answers, and adds ``int(distractor_share * relevant passages)`` other passages of
    the source corpus, drawn with the same seed, so retrieval is not trivial. The same
    source, ``questions`` and ``seed`` always give the same files.
    """
    total = len(source.pairs)
    check_seed(seed)
    if questions < 1:
        raise ConfigError(f"--questions must be at least 1, got {questions}")
    if questions > total:
        raise ConfigError(
            f"--questions {questions} exceeds the {total} questions of {source.path}; "
            f"pick at most {total}"
        )
    if not 0.0 <= distractor_share <= 10.0:
        raise ConfigError(
            f"--distractors must be between 0 and 10 (a share of the relevant passages), "
            f"got {distractor_share}"
        )
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(total, size=questions, replace=False))
    pairs = [source.pairs[index] for index in picked.tolist()]

    relevant = np.unique(np.array([pid for pair in pairs for pid in pair.pids], dtype=np.int64))
    candidates = np.setdiff1d(source.corpus.ids, relevant, assume_unique=True)
    wanted = min(int(distractor_share * len(relevant)), len(candidates))
    distractors = rng.choice(candidates, size=wanted, replace=False)
    passage_ids = np.union1d(relevant, distractors.astype(np.int64))
    positions = np.searchsorted(source.corpus.ids, passage_ids)
    corpus = pa.table(
        {
            "id": pa.array(passage_ids, pa.int64()),
            "text": source.corpus.arrow_texts.take(positions),
        }
    )
    qrels = [
        (pair.qid, pid, grade)
        for pair in pairs
        for pid, grade in zip(pair.pids, pair.grades or (1.0,) * len(pair.pids), strict=True)
    ]
    graded = any(grade != 1.0 for _, _, grade in qrels)
    write_dataset(
        destination,
        # A source with a tags column gives a sample with one (an untagged question: []).
        queries=[(pair.qid, pair.question, list(pair.tags)) if source.stats.tags is not None
                 else (pair.qid, pair.question) for pair in pairs],
        corpus=corpus,
        answers=sorted({(pair.aid, pair.answer) for pair in pairs if pair.aid is not None}),
        qrels=[
            (qid, pid, _plain_number(grade)) if graded else (qid, pid) for qid, pid, grade in qrels
        ],
        qas=[(pair.qid, pair.aid) for pair in pairs if pair.aid is not None],
    )
    return SampleSummary(questions, len(relevant), wanted)


def _plain_number(grade: float) -> int | float:
    return int(grade) if grade.is_integer() else grade


# --- JSONL reading -----------------------------------------------------------------------------


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of a UTF-8 text file; ``DatasetError`` naming the
    line for bytes that are not UTF-8, and for a file that cannot be read."""
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    # A byte order mark (Windows editors write one) is not part of the text.
                    yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(
                        f"{path} line {number}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at "
                        f"column {exc.start + 1}); save the file as UTF-8 (e.g. iconv -f latin1 "
                        "-t utf-8)"
                    ) from None
    except OSError as exc:
        raise DatasetError(
            f"{path} cannot be read ({exc.strerror or exc}); check the path and its permissions"
        ) from None


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; ``DatasetError`` for bad lines."""
    if path.is_dir():
        raise DatasetError(f"{path} is a folder, not a JSONL file; pass the file itself")
    if not path.is_file():
        raise DatasetError(f"{path} does not exist; pass an existing JSONL file")
    for number, line in _text_lines(path):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{path} line {number}: not valid JSON ({exc.msg}); "
                "each line must be one JSON object"
            ) from None
        except RecursionError:
            # Python's JSON parser recurses once per level: thousands of nested arrays
            # or objects exhaust the stack before the line is read.
            raise DatasetError(
                f"{path} line {number}: nested too deeply to read (Python's JSON parser "
                f"stops near {sys.getrecursionlimit()} levels of arrays or objects); each line "
                "must be one flat JSON object of the keys the format knows"
            ) from None
        if not isinstance(item, dict):
            raise DatasetError(
                f"{path} line {number}: holds a {type(item).__name__}, not a JSON object; "
                "each line must be one JSON object"
            )
        yield number, item


def _text_field(path: Path, number: int, item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        shown = "missing" if value is None else f"a {type(value).__name__}"
        raise DatasetError(
            f"{path} line {number}: field {key!r} is {shown}; give it a string"
        )
    return value


#: An integer id as the loader reads one from a string: optional sign, ASCII digits.
_INTEGER = re.compile(INTEGER_ID)


def _as_integer(text: str) -> int | None:
    """``text`` as an int64 value when it holds an integer (blanks around allowed), else None."""
    stripped = text.strip()
    if _INTEGER.fullmatch(stripped) is None:
        return None
    value = int(stripped)
    return value if -(2**63) <= value < 2**63 else None


class _SourceIds:
    """The source ids of one JSONL file in file order; a repeated id is a ``DatasetError``."""

    def __init__(self, path: Path, key: str, noun: str) -> None:
        self._path, self._key, self._noun = path, key, noun
        self._lines: dict[str, int] = {}

    def add(self, number: int, source_id: str, raw: object) -> None:
        """Record ``source_id`` (from the JSON value ``raw``) found on line ``number``."""
        first = self._lines.setdefault(source_id, number)
        if first != number:
            raise DatasetError(
                f"{self._path} line {number}: {self._key} {raw!r} appears twice "
                f"(first on line {first}); give every {self._noun} its own {self._key}"
            )

    def id_map(self, *, passages: bool = False) -> _IdMap:
        return _IdMap(list(self._lines), passages=passages)


class _IdMap:
    """Unique source ids (strings) -> int64 ids.

    The ids are kept when every source id holds an integer that fits in int64 and no two
    of them hold the same integer (``"7"`` and ``"007"``); otherwise the table is
    renumbered 1..n in file order. For ``passages`` a negative id also renumbers: the
    loader refuses negative passage ids (the metrics mark unmatched chunks with them).
    """

    def __init__(self, source_ids: list[str], *, passages: bool = False) -> None:
        self.source_ids = source_ids
        numbers = [_as_integer(value) for value in source_ids]
        kept = [number for number in numbers if number is not None]
        self.renumbered = (
            len(kept) != len(source_ids)
            or len(set(kept)) != len(kept)
            or (passages and any(number < 0 for number in kept))
        )
        self.ids = list(range(1, len(source_ids) + 1)) if self.renumbered else kept
        self._index = dict(zip(source_ids, self.ids, strict=True))

    def get(self, source_id: str) -> int | None:
        return self._index.get(source_id)


def _id_text(value: Any) -> str | None:
    """A JSON id (string or integer) as the string that identifies it; None if unusable."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    return text if text.strip() else None


def _write_id_map(destination: Path, maps: dict[str, _IdMap]) -> tuple[str, ...]:
    """Write ``id_map.parquet`` for the tables of ``maps`` that were renumbered, if any;
    returns their names."""
    renumbered = tuple(name for name, id_map in maps.items() if id_map.renumbered)
    if not renumbered:
        return renumbered
    tables, ids, source_ids = [], [], []
    for name in renumbered:
        id_map = maps[name]
        tables += [name] * len(id_map.ids)
        ids += id_map.ids
        source_ids += id_map.source_ids
    write_table(
        destination / ID_MAP_FILE,
        pa.table({"table": tables, "id": pa.array(ids, pa.int64()), "source_id": source_ids}),
    )
    return renumbered


@dataclass(frozen=True)
class ConvertSummary:
    """What a conversion wrote."""

    questions: int
    passages: int
    answers: int
    qrels: int
    renumbered: tuple[str, ...]  # tables whose source ids were replaced by 1..n
    #: Keys of the source that are not part of the format and were left out (metadata
    #: such as ``category``), in first-seen order; the CLI warns about them.
    ignored_keys: tuple[str, ...] = ()


# --- writing through a staging folder ----------------------------------------------------------


@contextmanager
def staged_folder(destination: Path) -> Iterator[Path]:
    """A fresh folder beside ``destination`` to write (and validate) a dataset in.

    When the ``with`` body finishes, the staged files replace those of ``destination``
    (each with an atomic rename; a stale ``id_map.parquet`` the new output lacks is
    removed); if it raises, the staging folder and any parent folders created for it are
    removed, and ``destination`` is left exactly as it was. A file system error (a
    read-only or full disk) becomes a :class:`ConfigError` naming ``destination``.
    """
    parent = destination.absolute().parent
    created: list[Path] = []
    ancestor = parent
    while not ancestor.exists():
        created.append(ancestor)
        ancestor = ancestor.parent
    staging = parent / f".{destination.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        try:
            parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
        except OSError as exc:
            nearest = _nearest(parent)
            if not nearest.is_dir():
                raise ConfigError(
                    f"cannot write {destination}: {nearest} is a file, not a folder; choose "
                    "another destination"
                ) from None
            raise ConfigError(
                f"cannot write {destination}: creating a folder in {nearest} failed "
                f"({_cause(exc)}); choose a destination in a folder you can write to"
            ) from None
        try:
            yield staging
            _publish(staging, destination)
        except OSError as exc:
            raise ConfigError(
                f"cannot write {destination} ({_cause(exc)}); nothing was written: free "
                "space or choose a destination you can write to"
            ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for folder in created:  # deepest first
            with suppress(OSError):
                folder.rmdir()
        raise


def _nearest(folder: Path) -> Path:
    """``folder``, or its nearest ancestor that exists (where creating failed)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _cause(exc: OSError) -> str:
    """The OS's reason, without the temporary paths it may name."""
    return exc.strerror or type(exc).__name__


def _publish(staging: Path, destination: Path) -> None:
    """Move the staged files into ``destination``: all of them, or (on an error) none.

    Each file is replaced with an atomic rename, so a reader sees an old or a new file,
    never a torn one. The old files are first hard-linked into the staging folder, so a
    rename that fails part-way can put back the ones already replaced.
    """
    if not destination.exists():
        os.replace(staging, destination)
        return
    written = [name for name in _OUTPUT_FILES if (staging / name).exists()]
    # e.g. an id_map.parquet of an earlier conversion that this output does not have
    stale = [name for name in _OUTPUT_FILES
             if name not in written and (destination / name).exists()]
    previous = staging / ".previous"
    previous.mkdir()
    kept = set()
    for name in _OUTPUT_FILES:
        with suppress(OSError):  # without a link (another file system) no way back for it
            os.link(destination / name, previous / name)
            kept.add(name)
    done: list[str] = []
    try:
        for name in written:
            os.replace(staging / name, destination / name)
            done.append(name)
        for name in stale:
            (destination / name).unlink()
            done.append(name)
    except OSError:
        for name in reversed(done):
            with suppress(OSError):
                if name in kept:
                    os.replace(previous / name, destination / name)
                else:
                    (destination / name).unlink()
        raise
    shutil.rmtree(staging, ignore_errors=True)


# --- BEIR --------------------------------------------------------------------------------------


def convert_beir(source: Path, destination: Path, *, split: str | None = None) -> ConvertSummary:
    """Convert a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).

    Corpus texts become ``title + "\\n" + text`` when a title is present. Only queries that
    have a line in the split's qrels are kept (BEIR's ``queries.jsonl`` covers all splits).
    A query's reference answer is taken from an ``answer`` field (or ``metadata.answer``)
    when it is a non-blank string. A table whose ids are not all distinct integers is
    renumbered 1..n in file order and the mapping is written to ``id_map.parquet`` next to
    the five files. Repeated ids and repeated qrels pairs are errors naming file and line.
    """
    if source.is_file():
        raise DatasetError(
            f"{source} is a file; --from beir takes a BEIR folder (corpus.jsonl, queries.jsonl, "
            "qrels/<split>.tsv); for a JSONL QA file use --from jsonl"
        )
    if not source.is_dir():
        raise DatasetError(
            f"BEIR folder {source} does not exist; pass the folder that holds corpus.jsonl, "
            "queries.jsonl and qrels/"
        )
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (source / name).is_file():
            raise DatasetError(
                f"{source / name} is missing; a BEIR folder holds corpus.jsonl, queries.jsonl "
                "and qrels/<split>.tsv"
            )
    qrels_path = _beir_split(source, split)

    corpus_path = source / "corpus.jsonl"
    corpus_source = _SourceIds(corpus_path, "_id", "passage")
    corpus_texts: list[str] = []
    for number, item in _json_lines(corpus_path):
        source_id = _id_text(item.get("_id"))
        if source_id is None:
            raise DatasetError(f"{corpus_path} line {number}: field '_id' is missing, blank or "
                               "not a string/integer; give every passage an _id")
        text = _text_field(corpus_path, number, item, "text")
        title = item.get("title")
        corpus_source.add(number, source_id, item["_id"])
        corpus_texts.append(f"{title}\n{text}" if isinstance(title, str) and title else text)
    corpus_ids = corpus_source.id_map(passages=True)

    queries_path = source / "queries.jsonl"
    query_source = _SourceIds(queries_path, "_id", "query")
    query_rows: list[tuple[str, str | None, list[str]]] = []
    for number, item in _json_lines(queries_path):
        source_id = _id_text(item.get("_id"))
        if source_id is None:
            raise DatasetError(f"{queries_path} line {number}: field '_id' is missing, blank or "
                               "not a string/integer; give every query an _id")
        answer = item.get("answer")
        metadata = item.get("metadata")
        if answer is None and isinstance(metadata, dict):
            answer = metadata.get("answer")
        query_source.add(number, source_id, item["_id"])
        where = f"{queries_path} line {number}"
        query_rows.append(
            (_text_field(queries_path, number, item, "text"),
             answer if isinstance(answer, str) and answer.strip() else None,
             source_tags(item, where) + source_tags(metadata, f"{where} metadata"))
        )
    query_ids = query_source.id_map()

    judged = _read_qrels(qrels_path, query_ids, corpus_ids)
    judged_queries = {qid for qid, _, _ in judged}
    kept = [
        (qid, text, answer, list(dict.fromkeys(tags)))
        for qid, (text, answer, tags) in zip(query_ids.ids, query_rows, strict=True)
        if qid in judged_queries
    ]
    renumbered = _write_id_map(destination, {"queries": query_ids, "corpus": corpus_ids})
    write_dataset(
        destination,
        queries=[(qid, text, tags) if any(t for *_, t in kept) else (qid, text)
                 for qid, text, _, tags in kept],
        corpus=pa.table({"id": pa.array(corpus_ids.ids, pa.int64()),
                         "text": pa.array(corpus_texts, pa.string())}),
        answers=[(qid, answer) for qid, _, answer, _ in kept if answer is not None],
        qrels=judged,
        qas=[(qid, qid) for qid, _, answer, _ in kept if answer is not None],
    )
    return ConvertSummary(
        questions=len(kept),
        passages=len(corpus_texts),
        answers=sum(1 for _, _, answer, _ in kept if answer is not None),
        qrels=len(judged),
        renumbered=renumbered,
    )


#: Column names a qrels header line uses (BEIR's ``query-id corpus-id score``, TREC's, ...).
_HEADER_NAME = re.compile(
    r"(query|corpus|doc|document|passage)?[-_ ]?id|qid|pid|docno|iter|iteration|score|"
    r"rel|relevance|label|grade",
    re.IGNORECASE,
)
_QRELS_FORMAT = "'query-id<TAB>corpus-id<TAB>score' (BEIR) or 'query-id 0 corpus-id score' (TREC)"


def _read_qrels(path: Path, query_ids: _IdMap, corpus_ids: _IdMap) -> list[tuple[int, int, int]]:
    """The (qid, pid, score) judgements of a BEIR or TREC qrels file, checked line by line.

    Lines hold ``query-id corpus-id [score]`` (BEIR, tab-separated) or
    ``query-id iteration corpus-id score`` (TREC, tabs or spaces). The first line is skipped
    as a header only when it looks like one: neither of its ids is known and it names
    columns (``query-id``, ``corpus-id``, ``score``, ...) or has a non-integer score.
    """
    judged: list[tuple[int, int, int]] = []
    first_line: dict[tuple[int, int], int] = {}
    seen_line = False
    for number, line in _text_lines(path):
        if not line.strip():
            continue
        stripped = line.strip()
        fields = [field.strip() for field in stripped.split("\t")] if "\t" in stripped \
            else stripped.split()
        if len(fields) == 4:
            query_field, corpus_field, score_field = fields[0], fields[2], fields[3]
        elif len(fields) in (2, 3):
            query_field, corpus_field = fields[0], fields[1]
            score_field = fields[2] if len(fields) == 3 else "1"
        else:
            raise DatasetError(
                f"{path} line {number}: expected {_QRELS_FORMAT}, got {stripped!r}"
            )
        qid, pid = query_ids.get(query_field), corpus_ids.get(corpus_field)
        if not seen_line:
            seen_line = True
            if qid is None and pid is None and (
                any(_HEADER_NAME.fullmatch(field) for field in fields)
                or (len(fields) > 2 and _as_integer(score_field) is None)
            ):
                continue  # the header line
        score = _as_integer(score_field)
        if score is None:
            raise DatasetError(
                f"{path} line {number}: score {score_field!r} is not an integer; "
                f"expected {_QRELS_FORMAT}"
            )
        if qid is None:
            raise DatasetError(f"{path} line {number}: query-id {query_field!r} is not "
                               "in queries.jsonl; fix the id or add the query")
        if pid is None:
            raise DatasetError(f"{path} line {number}: corpus-id {corpus_field!r} is not "
                               "in corpus.jsonl; fix the id or add the passage")
        first = first_line.setdefault((qid, pid), number)
        if first != number:
            raise DatasetError(
                f"{path} line {number}: query-id {query_field!r} and corpus-id "
                f"{corpus_field!r} are judged twice (first on line {first}); "
                "keep one line per pair"
            )
        judged.append((qid, pid, score))
    if not judged:
        raise DatasetError(
            f"{path} holds no judgements; add lines {_QRELS_FORMAT}"
        )
    return judged


def _beir_split(source: Path, split: str | None) -> Path:
    folder = source / "qrels"
    available = sorted(path.stem for path in folder.glob("*.tsv")) if folder.is_dir() else []
    if split is not None:
        if split not in available:
            raise DatasetError(
                f"{folder / (split + '.tsv')} does not exist (splits found: "
                f"{', '.join(available) or 'none'}); pass one of them with --split"
            )
        return folder / f"{split}.tsv"
    if not available:
        raise DatasetError(f"{folder} holds no <split>.tsv file; a BEIR folder has qrels/test.tsv")
    if len(available) == 1:
        return folder / f"{available[0]}.tsv"
    if "test" in available:
        return folder / "test.tsv"
    raise DatasetError(
        f"{folder} holds several splits ({', '.join(available)}) and no test.tsv; "
        "choose one with --split"
    )


# --- simple JSONL QA ---------------------------------------------------------------------------

#: The keys of a line of a JSONL QA file.
QA_KEYS = ("id", "question", "answer", "passages", "passage_ids", "category", "tags")
#: Keys other tools use (ragas, ...) and the QA key that means the same.
_KEY_ALIASES = {
    "contexts": "passages",
    "context": "passages",
    "reference_contexts": "passages",
    "ground_truth": "answer",
    "ground_truths": "answer",
    "reference": "answer",
    "answers": "answer",
    "query": "question",
    "user_input": "question",
    "qid": "id",
    "question_id": "id",
    "_id": "id",
    "pids": "passage_ids",
    "doc_ids": "passage_ids",
    "corpus_ids": "passage_ids",
}


def convert_jsonl(
    source: Path, destination: Path, *, corpus_file: Path | None = None
) -> ConvertSummary:
    """Convert a JSONL QA file: one object per line.

    Keys (:data:`QA_KEYS`): ``question``
    (required), ``answer`` (optional; blank means no answer), ``passages`` (relevant
    passage texts) and/or ``passage_ids`` (ids of passages in ``corpus_file``, a JSONL of
    ``{"id", "text"}`` objects that may also hold distractors), and an optional ``id``
    (then on every line; otherwise questions are numbered 1..n). Ids are integers or
    strings; a table whose ids are not all distinct integers is renumbered 1..n and the
    mapping written to ``id_map.parquet``, as for BEIR. Identical passage texts share one
    id; every listed passage is relevant with grade 1. A key that names data the format
    holds under another name (ragas's ``contexts``, ``ground_truth``, ...) is an error
    saying which key to use, since converting without it would lose that data; any other
    key is metadata, left out and listed in :attr:`ConvertSummary.ignored_keys`.
    """
    if source.is_dir():
        hint = (
            "; it looks like a BEIR folder: use --from beir"
            if (source / "corpus.jsonl").is_file()
            else "; for a BEIR folder use --from beir"
        )
        raise DatasetError(
            f"{source} is a folder; --from jsonl takes a JSONL QA file "
            f"(one JSON object per line){hint}"
        )
    corpus_texts: list[str] = []
    corpus_ids = _IdMap([])
    if corpus_file is not None:
        corpus_source = _SourceIds(corpus_file, "id", "passage")
        for number, item in _json_lines(corpus_file):
            source_id = _id_text(item.get("id", item.get("_id")))
            if source_id is None:
                raise DatasetError(f"{corpus_file} line {number}: field 'id' is missing, blank "
                                   "or not a string/integer; give every passage an id")
            corpus_source.add(number, source_id, item.get("id", item.get("_id")))
            corpus_texts.append(_text_field(corpus_file, number, item, "text"))
        corpus_ids = corpus_source.id_map(passages=True)
    corpus: dict[int, str] = dict(zip(corpus_ids.ids, corpus_texts, strict=True))
    by_text: dict[str, int] = {}
    for pid, text in corpus.items():
        by_text.setdefault(text, pid)

    lines = list(_json_lines(source))
    if not lines:
        raise DatasetError(f"{source} holds no questions; write one JSON object per line")
    ignored: dict[str, None] = {}
    for number, item in lines:
        ignored.update(dict.fromkeys(_check_qa_keys(source, number, item)))
    with_id = [number for number, item in lines if "id" in item]
    if with_id and len(with_id) != len(lines):
        missing = next(number for number, item in lines if "id" not in item)
        raise DatasetError(f"{source} line {missing}: has no 'id' but other lines do; "
                           "give every line an id or none")
    query_source = _SourceIds(source, "id", "question")
    for number, item in lines:
        if with_id:
            source_id = _id_text(item["id"])
            if source_id is None:
                raise DatasetError(f"{source} line {number}: field 'id' is {item['id']!r}; "
                                   "use an integer or a non-blank string")
            query_source.add(number, source_id, item["id"])
    query_ids = query_source.id_map() if with_id else _IdMap(
        [str(index) for index in range(1, len(lines) + 1)]
    )

    next_pid = max(corpus, default=0) + 1
    queries: list[tuple[int, str, list[str]]] = []
    answers: list[tuple[int, str]] = []
    qrels: list[tuple[int, int]] = []
    for qid, (number, item) in zip(query_ids.ids, lines, strict=True):
        queries.append((qid, _text_field(source, number, item, "question"),
                        source_tags(item, f"{source} line {number}")))
        answer = item.get("answer")
        if answer is not None:
            answer = _text_field(source, number, item, "answer")
            if answer.strip():
                answers.append((qid, answer))
        relevant: list[int] = []
        texts = item.get("passages", [])
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise DatasetError(f"{source} line {number}: field 'passages' must be a list of "
                               "strings (the relevant passage texts)")
        for text in texts:
            known = by_text.get(text)
            if known is None:
                known, next_pid = next_pid, next_pid + 1
                corpus[known] = text
                by_text[text] = known
            relevant.append(known)
        listed_ids = item.get("passage_ids", [])
        if not isinstance(listed_ids, list):
            raise DatasetError(f"{source} line {number}: field 'passage_ids' must be a list "
                               "of passage ids (integers or strings)")
        for raw in listed_ids:
            source_id = _id_text(raw)
            listed = None if source_id is None else corpus_ids.get(source_id)
            if listed is None:
                where = f"in {corpus_file}" if corpus_file else "(no --corpus file given)"
                raise DatasetError(f"{source} line {number}: passage id {raw!r} is not a "
                                   f"known passage {where}; pass --corpus with that passage")
            relevant.append(listed)
        qrels += [(qid, pid) for pid in dict.fromkeys(relevant)]
    if not corpus:
        raise DatasetError(
            f"{source}: no line lists relevant passages ('passages' or 'passage_ids') and no "
            "--corpus file gives any, so the corpus would be empty; add 'passages' to the lines"
        )

    renumbered = _write_id_map(destination, {"queries": query_ids, "corpus": corpus_ids})
    write_dataset(
        destination,
        # Untagged questions are written without the column: a file without tags
        # converts as it did before tags existed.
        queries=queries if any(tags for *_, tags in queries) else [q[:2] for q in queries],
        corpus=sorted(corpus.items()),
        answers=answers,
        qrels=qrels,
        qas=[(qid, qid) for qid, _ in answers],
    )
    return ConvertSummary(
        questions=len(queries),
        passages=len(corpus),
        answers=len(answers),
        qrels=len(qrels),
        renumbered=renumbered,
        ignored_keys=tuple(ignored),
    )


def _check_qa_keys(source: Path, number: int, item: dict[str, Any]) -> list[str]:
    """The line's metadata keys; a key that holds data under another name is an error.

    ragas's ``contexts`` or ``ground_truth`` dropped silently would convert into a
    dataset without passages or answers, so those name the key to rename to.
    """
    known = ", ".join(QA_KEYS)
    metadata = []
    for key in item:
        if key in QA_KEYS:
            continue
        alias = _KEY_ALIASES.get(key)
        if alias is None:
            metadata.append(key)
            continue
        raise DatasetError(
            f"{source} line {number}: unknown key {key!r} (known keys: {known}); "
            f"rename it to {alias!r}"
        )
    if "question" not in item:
        raise DatasetError(
            f"{source} line {number}: field 'question' is missing (known keys: {known}); "
            "give every line a question"
        )
    return metadata
