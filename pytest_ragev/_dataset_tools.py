"""Dataset tools behind ``ragev dataset sample`` and ``ragev dataset convert``.

``sample`` shrinks a dataset (N questions, their passages and answers, plus a share of
distractor passages); ``convert`` turns the BEIR layout or a simple JSONL QA file into
the five Parquet files. Both write through :func:`pytest_ragev.dataset.write_dataset`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pytest_ragev._errors import ConfigError, DatasetError
from pytest_ragev.dataset import DATASET_FILES, Dataset, write_dataset

#: The share of distractor passages ``sample`` adds, relative to the relevant ones (the seed's 20%).
DEFAULT_DISTRACTOR_SHARE = 0.2


def check_destination(source: Path, destination: Path, *, force: bool) -> None:
    """Refuse to overwrite a dataset (or the source) unless ``force`` is given."""
    if destination.exists() and not destination.is_dir():
        raise ConfigError(f"destination {destination} is a file; pass a folder path")
    if source.resolve() == destination.resolve():
        raise ConfigError(
            f"destination {destination} is the source folder; write to another folder"
        )
    existing = [name for name in DATASET_FILES if (destination / name).exists()]
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
        queries=[(pair.qid, pair.question) for pair in pairs],
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


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; ``DatasetError`` for bad lines."""
    if not path.is_file():
        raise DatasetError(f"{path} does not exist; pass an existing JSONL file")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(
                    f"{path} line {number}: not valid JSON ({exc.msg}); "
                    "each line must be one JSON object"
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


class _IdMap:
    """Source ids (strings) -> int64 ids: kept when every id is an integer, else 1..n."""

    def __init__(self, source_ids: list[str]) -> None:
        self.source_ids = source_ids
        try:
            numbers = [int(value) for value in source_ids]
            self.renumbered = not all(-(2**63) <= n < 2**63 for n in numbers)
        except ValueError:
            self.renumbered = True
        if self.renumbered:
            numbers = list(range(1, len(source_ids) + 1))
        self.ids = numbers
        self._index = dict(zip(source_ids, numbers, strict=True))

    def get(self, source_id: str) -> int | None:
        return self._index.get(source_id)


def _id_text(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return str(value)


# --- BEIR --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvertSummary:
    """What a conversion wrote."""

    questions: int
    passages: int
    answers: int
    qrels: int
    renumbered: tuple[str, ...]  # tables whose source ids were replaced by 1..n


def convert_beir(source: Path, destination: Path, *, split: str | None = None) -> ConvertSummary:
    """Convert a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).

    Corpus texts become ``title + "\\n" + text`` when a title is present. Only queries that
    have a line in the split's qrels are kept (BEIR's ``queries.jsonl`` covers all splits).
    A query's reference answer is taken from an ``answer`` field (or ``metadata.answer``)
    when there is one. Non-integer ids are renumbered 1..n in file order and the mapping
    is written to ``id_map.parquet`` next to the five files.
    """
    if not source.is_dir():
        raise DatasetError(f"BEIR folder {source} does not exist; pass the folder of corpus.jsonl")
    qrels_path = _beir_split(source, split)

    corpus_path = source / "corpus.jsonl"
    corpus_source: list[str] = []
    corpus_texts: list[str] = []
    for number, item in _json_lines(corpus_path):
        source_id = _id_text(item.get("_id"))
        if source_id is None:
            raise DatasetError(f"{corpus_path} line {number}: field '_id' is missing or not a "
                               "string/integer; give every passage an _id")
        text = _text_field(corpus_path, number, item, "text")
        title = item.get("title")
        corpus_source.append(source_id)
        corpus_texts.append(f"{title}\n{text}" if isinstance(title, str) and title else text)
    corpus_ids = _IdMap(corpus_source)

    queries_path = source / "queries.jsonl"
    query_rows: list[tuple[str, str, str | None]] = []
    for number, item in _json_lines(queries_path):
        source_id = _id_text(item.get("_id"))
        if source_id is None:
            raise DatasetError(f"{queries_path} line {number}: field '_id' is missing or not a "
                               "string/integer; give every query an _id")
        answer = item.get("answer")
        metadata = item.get("metadata")
        if answer is None and isinstance(metadata, dict):
            answer = metadata.get("answer")
        query_rows.append(
            (source_id, _text_field(queries_path, number, item, "text"),
             answer if isinstance(answer, str) and answer.strip() else None)
        )
    query_ids = _IdMap([row[0] for row in query_rows])

    judged: list[tuple[int, int, int]] = []
    judged_queries: set[int] = set()
    with qrels_path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").split("\t")
            if not line.strip() or (number == 1 and not _is_int(fields[-1])):
                continue  # blank line or the "query-id corpus-id score" header
            if len(fields) not in (2, 3) or (len(fields) == 3 and not _is_int(fields[2])):
                raise DatasetError(
                    f"{qrels_path} line {number}: expected 'query-id<TAB>corpus-id<TAB>score', "
                    f"got {line.strip()!r}"
                )
            qid, pid = query_ids.get(fields[0]), corpus_ids.get(fields[1])
            if qid is None:
                raise DatasetError(f"{qrels_path} line {number}: query-id {fields[0]!r} is not "
                                   f"in {queries_path.name}; fix the id or add the query")
            if pid is None:
                raise DatasetError(f"{qrels_path} line {number}: corpus-id {fields[1]!r} is not "
                                   f"in {corpus_path.name}; fix the id or add the passage")
            judged.append((qid, pid, int(fields[2]) if len(fields) == 3 else 1))
            judged_queries.add(qid)

    kept = [
        (qid, text, answer)
        for qid, (_, text, answer) in zip(query_ids.ids, query_rows, strict=True)
        if qid in judged_queries
    ]
    renumbered = tuple(
        name for name, id_map in (("queries", query_ids), ("corpus", corpus_ids))
        if id_map.renumbered
    )
    _write_id_map(destination, {"queries": query_ids, "corpus": corpus_ids}, renumbered)
    write_dataset(
        destination,
        queries=[(qid, text) for qid, text, _ in kept],
        corpus=pa.table({"id": pa.array(corpus_ids.ids, pa.int64()),
                         "text": pa.array(corpus_texts, pa.string())}),
        answers=[(qid, answer) for qid, _, answer in kept if answer is not None],
        qrels=judged,
        qas=[(qid, qid) for qid, _, answer in kept if answer is not None],
    )
    return ConvertSummary(
        questions=len(kept),
        passages=len(corpus_texts),
        answers=sum(1 for *_, answer in kept if answer is not None),
        qrels=len(judged),
        renumbered=renumbered,
    )


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


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _write_id_map(destination: Path, maps: dict[str, _IdMap], renumbered: tuple[str, ...]) -> None:
    if not renumbered:
        return
    from pytest_ragev._dataset_write import write_table

    tables, ids, source_ids = [], [], []
    for name in renumbered:
        id_map = maps[name]
        tables += [name] * len(id_map.ids)
        ids += id_map.ids
        source_ids += id_map.source_ids
    destination.mkdir(parents=True, exist_ok=True)
    write_table(
        destination / "id_map.parquet",
        pa.table({"table": tables, "id": pa.array(ids, pa.int64()), "source_id": source_ids}),
    )


# --- simple JSONL QA ---------------------------------------------------------------------------


def convert_jsonl(
    source: Path, destination: Path, *, corpus_file: Path | None = None
) -> ConvertSummary:
    """Convert a JSONL QA file: one object per line.

    Keys: ``question`` (required), ``answer`` (optional string), ``passages`` (relevant
    passage texts) and/or ``passage_ids`` (ids into ``corpus_file``, a JSONL of
    ``{"id", "text"}`` objects that may also hold distractors), and an optional integer
    ``id`` (then on every line; otherwise questions are numbered 1..n). Identical passage
    texts share one id; every listed passage is relevant with grade 1.
    """
    corpus: dict[int, str] = {}
    by_text: dict[str, int] = {}
    if corpus_file is not None:
        for number, item in _json_lines(corpus_file):
            raw = item.get("id", item.get("_id"))
            if isinstance(raw, bool) or not isinstance(raw, int | str) or not _is_int(str(raw)):
                raise DatasetError(f"{corpus_file} line {number}: field 'id' is {raw!r}, not an "
                                   "integer; give every passage an integer id")
            pid = int(raw)
            if pid in corpus:
                raise DatasetError(f"{corpus_file} line {number}: id {pid} appears twice; "
                                   "give every passage its own id")
            text = _text_field(corpus_file, number, item, "text")
            corpus[pid] = text
            by_text.setdefault(text, pid)

    lines = list(_json_lines(source))
    if not lines:
        raise DatasetError(f"{source} holds no questions; write one JSON object per line")
    with_id = [number for number, item in lines if "id" in item]
    if with_id and len(with_id) != len(lines):
        missing = next(number for number, item in lines if "id" not in item)
        raise DatasetError(f"{source} line {missing}: has no 'id' but other lines do; "
                           "give every line an id or none")
    next_pid = max(corpus, default=0) + 1
    queries: list[tuple[int, str]] = []
    answers: list[tuple[int, str]] = []
    qrels: list[tuple[int, int]] = []
    seen_qids: set[int] = set()
    for index, (number, item) in enumerate(lines, start=1):
        qid = index
        if with_id:
            raw = item["id"]
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise DatasetError(f"{source} line {number}: field 'id' is {raw!r}, not an "
                                   "integer; use integer question ids")
            qid = raw
        if qid in seen_qids:
            raise DatasetError(f"{source} line {number}: id {qid} appears twice; "
                               "give every question its own id")
        seen_qids.add(qid)
        queries.append((qid, _text_field(source, number, item, "question")))
        answer = item.get("answer")
        if answer is not None:
            answers.append((qid, _text_field(source, number, item, "answer")))
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
        ids = item.get("passage_ids", [])
        if not isinstance(ids, list):
            raise DatasetError(f"{source} line {number}: field 'passage_ids' must be a list")
        for raw in ids:
            listed = int(raw) if isinstance(raw, int | str) and _is_int(str(raw)) else None
            if corpus_file is None or listed is None or listed not in corpus:
                where = f"in {corpus_file}" if corpus_file else "(no --corpus file given)"
                raise DatasetError(f"{source} line {number}: passage id {raw!r} is not a "
                                   f"known passage {where}; pass --corpus with that passage")
            relevant.append(listed)
        qrels += [(qid, pid) for pid in dict.fromkeys(relevant)]

    write_dataset(
        destination,
        queries=queries,
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
        renumbered=(),
    )
