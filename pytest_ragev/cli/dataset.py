"""``ragev dataset validate|stats|show|sample|convert``: inspect and prepare datasets."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from pytest_ragev.cli import CommandAdder, warn
from pytest_ragev.core.errors import ConfigError, DatasetError
from pytest_ragev.dataset import Dataset, convert, load_dataset


def _load(path: str, dataset_id: str | None = None) -> Dataset:

    dataset = load_dataset(path, dataset_id)
    for warning in dataset.warnings:
        warn(warning)
    return dataset


def _validate(args: argparse.Namespace) -> int:
    dataset = _load(args.path)
    stats = dataset.stats
    print(
        f"ok: {args.path}: {stats.questions} questions, {stats.passages} passages, "
        f"{stats.answers} answers; fingerprint {dataset.fingerprint}"
    )
    return 0


def _stats(args: argparse.Namespace) -> int:
    dataset = _load(args.path)
    if args.json:
        print(json.dumps(dataset.stats.to_json(), ensure_ascii=False))
    else:
        print(f"dataset {dataset.dataset_id} ({dataset.path})")
        for line in dataset.stats.lines():
            print(f"  {line}")
    return 0


def _show(args: argparse.Namespace) -> int:

    dataset = _load(args.path)
    if args.n < 0:
        raise ConfigError(f"-n must be 0 or more, got {args.n}")
    pairs = list(dataset.pairs[: args.n])
    if args.qid:
        pairs = []
        for qid in args.qid:
            try:
                pairs.append(dataset.pair(qid))
            except KeyError:
                raise ConfigError(
                    f"--qid {qid}: {dataset.path} has no question with that id "
                    f"(ids run from {dataset.pairs[0].qid} to {dataset.pairs[-1].qid})"
                ) from None
    _print_pairs(pairs, sys.stdout)
    return 0


def _print_pairs(pairs: Sequence[Any], out: TextIO) -> None:
    rule = "=" * 60
    for pair in pairs:
        print(rule, file=out)
        print(f"Question (qid={pair.qid}):\n{pair.question}\n", file=out)
        if pair.pids:
            print(f"Relevant passages ({len(pair.pids)}):", file=out)
            for pid, grade, text in zip(pair.pids, pair.grades, pair.passages, strict=False):
                grade_note = "" if grade == 1.0 else f", grade {grade:g}"
                print(f"[pid={pid}{grade_note}] {text}", file=out)
        else:
            print("Relevant passages: none (no qrels)", file=out)
        if pair.answer is not None:
            print(f"\nAnswer (aid={pair.aid}):\n{pair.answer}", file=out)
        else:
            print("\nAnswer: none", file=out)
    if pairs:
        print(rule, file=out)


def _sample(args: argparse.Namespace) -> int:

    destination = Path(args.dst)
    convert.check_seed(args.seed)  # before the load, whose warnings would come first
    convert.check_destination(Path(args.src), destination, force=args.force)
    source = _load(args.src)
    with convert.staged_folder(destination) as staging:
        summary = convert.sample_dataset(
            source,
            staging,
            questions=args.questions,
            seed=args.seed,
            distractor_share=args.distractors,
        )
    print(
        f"wrote {destination}: {summary.questions} questions, "
        f"{summary.relevant_passages} relevant passages + {summary.distractors} distractors "
        f"(seed {args.seed})"
    )
    return 0


def _convert(args: argparse.Namespace) -> int:
    source, destination = Path(args.src), Path(args.dst)
    if args.source_format == "beir" and args.corpus is not None:
        raise ConfigError("--corpus is for --from jsonl; a BEIR folder has its corpus.jsonl")
    if args.source_format == "jsonl" and args.split is not None:
        raise ConfigError("--split is for --from beir; a JSONL QA file has no splits")
    convert.check_destination(source, destination, force=args.force)
    # Convert into a folder beside DST and load it there: DST changes only when the
    # output loads, and a failed conversion leaves nothing behind.
    with convert.staged_folder(destination) as staging:
        if args.source_format == "beir":
            summary = convert.convert_beir(source, staging, split=args.split)
        else:
            corpus = Path(args.corpus) if args.corpus else None
            summary = convert.convert_jsonl(source, staging, corpus_file=corpus)
        _check_written(staging, destination)
    renumbered = (
        f"; renumbered ids of {', '.join(summary.renumbered)} (see id_map.parquet)"
        if summary.renumbered
        else ""
    )
    print(
        f"wrote {destination}: {summary.questions} questions, {summary.passages} passages, "
        f"{summary.answers} answers, {summary.qrels} qrels{renumbered}"
    )
    if summary.ignored_keys:
        keys = ", ".join(repr(key) for key in summary.ignored_keys)
        print(
            f"ragev: warning: {source}: left out key(s) {keys}, which the dataset format "
            f"has no place for (known keys: {', '.join(convert.QA_KEYS)})",
            file=sys.stderr,
        )
    return 0


def _check_written(staging: Path, destination: Path) -> None:
    """Load the staged output (printing its warnings); an error names ``destination``."""

    try:
        _load(str(staging))
    except DatasetError as exc:
        message = str(exc).replace(str(staging), str(destination))
        raise DatasetError(
            f"the converted dataset does not load, so nothing was written: {message}"
        ) from None


def configure(commands: CommandAdder) -> None:
    """The ``ragev dataset`` commands."""
    validate = commands.add(
        "validate", help="check a dataset folder (exit 0 when usable, 2 otherwise)",
        handler=_validate,
    )
    validate.add_argument("path", metavar="PATH", help="the folder with the five Parquet files")

    stats = commands.add("stats", help="print the dataset's statistics", handler=_stats)
    stats.add_argument("path", metavar="PATH")
    stats.add_argument("--json", action="store_true", help="print one JSON object")

    show = commands.add(
        "show", help="print questions with their relevant passages and answer", handler=_show
    )
    show.add_argument("path", metavar="PATH")
    show.add_argument("-n", type=int, default=3, help="how many questions, by qid (default 3)")
    show.add_argument(
        "--qid", type=int, action="append", help="show this question (repeatable; overrides -n)"
    )

    sample = commands.add(
        "sample", help="write a smaller dataset: N questions, their passages, distractors",
        handler=_sample,
    )
    sample.add_argument("src", metavar="SRC")
    sample.add_argument("dst", metavar="DST")
    sample.add_argument("--questions", type=int, required=True, metavar="N")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sample.add_argument(
        "--distractors", type=float, default=0.2, metavar="SHARE",
        help="distractor passages to add, as a share of the relevant ones (default 0.2)",
    )
    sample.add_argument("--force", action="store_true", help="overwrite files in DST")

    converter = commands.add(
        "convert", help="convert a BEIR folder or a JSONL QA file into the five Parquet files",
        handler=_convert,
    )
    converter.add_argument(
        "--from", dest="source_format", choices=("beir", "jsonl"), required=True
    )
    converter.add_argument("src", metavar="SRC", help="the BEIR folder or the JSONL file")
    converter.add_argument("dst", metavar="DST", help="the dataset folder to write")
    converter.add_argument("--split", help="BEIR qrels split (default: the only one, or test)")
    converter.add_argument("--corpus", help="JSONL of {id, text} passages for passage_ids")
    converter.add_argument("--force", action="store_true", help="overwrite files in DST")
