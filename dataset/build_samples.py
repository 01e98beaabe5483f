"""Build ``dataset/samples/*.parquet`` from the reviewable text in ``dataset/source/*.toml``.

Run from the repository root::

    .venv/bin/python dataset/build_samples.py          # (re)write dataset/samples/
    .venv/bin/python dataset/build_samples.py --check  # exit 1 if samples/ is stale

The same five files ship inside the package (``pytest_ragev/server/sample/``, the
built-in sample ``ragev serve`` evaluates after a plain ``pip install``): both copies
are written, and ``--check`` checks both.

Ids are assigned in file order (English first, then Chinese): passages 1..N, questions
1..M, answers 100 + qid (a different range, so a qid/aid mix-up cannot go unnoticed).
In qrels the first passage a question lists gets grade 2, supporting ones grade 1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from pytest_ragev.dataset import load_dataset, write_dataset

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "source" / "english.toml", HERE / "source" / "chinese.toml")
SAMPLES = HERE / "samples"
#: The copy inside the package (package data of ``pytest_ragev.server``).
PACKAGED = HERE.parent / "pytest_ragev" / "server" / "sample"
ANSWER_ID_OFFSET = 100
MIN_PASSAGE_CHARS, MAX_PASSAGE_CHARS = 200, 900


class SourceError(Exception):
    """The TOML source breaks one of the dataset's rules."""


def _is_chinese(text: str) -> bool:
    return any("\u4e00" <= char <= "\u9fff" for char in text)


def collect(sources: tuple[Path, ...] = SOURCES) -> dict[str, Any]:
    """Read the sources, check them, and return the five tables as row lists."""
    passages: dict[str, tuple[int, str]] = {}
    questions: list[tuple[str, str, list[str]]] = []
    for source in sources:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
        for entry in data.get("passage", []):
            key, text = entry["key"], entry["text"].strip()
            if key in passages:
                raise SourceError(f"{source.name}: passage key {key!r} is used twice")
            if not MIN_PASSAGE_CHARS <= len(text) <= MAX_PASSAGE_CHARS:
                raise SourceError(
                    f"{source.name}: passage {key!r} has {len(text)} characters; keep passages "
                    f"between {MIN_PASSAGE_CHARS} and {MAX_PASSAGE_CHARS}"
                )
            if _is_chinese(text) and not text.endswith("。"):
                raise SourceError(f"{source.name}: Chinese passage {key!r} must end with 。")
            passages[key] = (len(passages) + 1, text)
        for entry in data.get("question", []):
            keys = list(entry["passages"])
            missing = [key for key in keys if key not in passages]
            if missing or not keys:
                raise SourceError(
                    f"{source.name}: question {entry['text']!r} lists unknown passages {missing}"
                )
            if not entry.get("answer", "").strip():
                raise SourceError(f"{source.name}: question {entry['text']!r} has no answer")
            questions.append((entry["text"].strip(), entry["answer"].strip(), keys))

    queries, answers, qrels, qas = [], [], [], []
    for qid, (question, answer, keys) in enumerate(questions, start=1):
        aid = ANSWER_ID_OFFSET + qid
        queries.append((qid, question))
        answers.append((aid, answer))
        qas.append((qid, aid))
        qrels += [(qid, passages[key][0], 2 if rank == 0 else 1) for rank, key in enumerate(keys)]
    return {
        "queries": queries,
        "corpus": [passages[key] for key in passages],
        "answers": answers,
        "qrels": qrels,
        "qas": qas,
    }


def build(destination: Path) -> None:
    """Write the five files into ``destination``."""
    write_dataset(destination, **collect())


def main(argv: list[str] | None = None) -> int:
    """Build the samples, or with ``--check`` verify that the committed files are current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    try:
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                build(Path(tmp) / "samples")
                expected = load_dataset(Path(tmp) / "samples").fingerprint
            for folder in (SAMPLES, PACKAGED):
                actual = load_dataset(folder).fingerprint
                if expected != actual:
                    print(f"{folder} is stale: run dataset/build_samples.py", file=sys.stderr)
                    return 1
                print(f"{folder} is up to date (fingerprint {actual})")
            return 0
        build(SAMPLES)
        build(PACKAGED)
    except SourceError as exc:
        print(f"build_samples: {exc}", file=sys.stderr)
        return 2
    dataset = load_dataset(SAMPLES)
    print(f"wrote {SAMPLES}")
    for line in dataset.stats.lines():
        print(f"  {line}")
    chinese = sum(1 for pair in dataset.pairs if _is_chinese(pair.question))
    multi = sum(1 for pair in dataset.pairs if len(pair.pids) > 1)
    longest = max(len(text) for text in dataset.corpus.texts)
    over_512 = sum(1 for text in dataset.corpus.texts if len(text) > 512)
    print(f"  English/Chinese questions: {len(dataset.pairs) - chinese}/{chinese}")
    print(f"  questions with several relevant passages: {multi}")
    print(f"  passages over 512 characters: {over_512} (longest {longest})")
    share = dataset.stats.unreferenced_passages / dataset.stats.passages
    print(f"  distractor share: {share:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
