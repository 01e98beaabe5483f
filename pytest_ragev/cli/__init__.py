"""The ``ragev`` command: ``ragev <group> <command> ...``.

Commands come in groups (``ragev dataset validate``, ``ragev dataset stats``, ...). A part
of the project adds its own group with :func:`register_group`::

    def configure(commands: CommandAdder) -> None:
        show = commands.add("show", help="print a report", handler=_show)
        show.add_argument("path")

    register_group("report", help="inspect reports", configure=configure)

or, to keep ``ragev --help`` fast, by naming the configure function lazily
(``configure="pytest_ragev.report._cli:configure"``) in :data:`BUILTIN_GROUPS`.
A handler receives the parsed ``argparse.Namespace`` and returns the exit code. Any
:class:`~pytest_ragev.core.errors.RagevError` it raises becomes one line on stderr,
``ragev: error: <message>``, and exit code 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pytest_ragev.core.errors import RagevError

if TYPE_CHECKING:
    from pytest_ragev.dataset import Dataset

#: A command's implementation: parsed arguments in, exit code out.
Handler = Callable[[argparse.Namespace], int]


class CommandAdder:
    """Handed to a group's ``configure`` function to add the group's commands."""

    def __init__(
        self,
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
        group_parser: argparse.ArgumentParser | None = None,
    ) -> None:
        self._subparsers = subparsers
        self._group_parser = group_parser

    def add(
        self, name: str, *, help: str, handler: Handler, description: str | None = None
    ) -> argparse.ArgumentParser:
        """Add ``ragev <group> <name>``; returns its parser for ``add_argument`` calls."""
        parser = self._subparsers.add_parser(
            name, help=help, description=description or help[:1].upper() + help[1:] + "."
        )
        parser.set_defaults(_ragev_handler=handler)
        return parser

    def run_group(self, handler: Handler) -> argparse.ArgumentParser:
        """Make ``ragev <group>`` itself a command (``ragev serve --port 8000``) beside its
        sub-commands; returns the group's parser for its options."""
        if self._group_parser is None:
            raise RuntimeError("run_group needs the group's parser")
        self._group_parser.set_defaults(_ragev_handler=handler)
        return self._group_parser


#: ``configure`` may be the function itself or a lazy ``"module:function"`` reference.
Configure = Callable[[CommandAdder], None] | str


@dataclass(frozen=True)
class CommandGroup:
    """One ``ragev <name> ...`` group."""

    name: str
    help: str
    configure: Configure

    def resolve(self) -> Callable[[CommandAdder], None]:
        """The configure function (importing its module if it was given by name)."""
        if callable(self.configure):
            return self.configure
        module_name, _, attribute = self.configure.partition(":")
        function: Callable[[CommandAdder], None] = getattr(
            importlib.import_module(module_name), attribute
        )
        return function


_GROUPS: dict[str, CommandGroup] = {}


def register_group(name: str, *, help: str, configure: Configure) -> None:
    """Add (or replace) the command group ``ragev <name>``."""
    _GROUPS[name] = CommandGroup(name=name, help=help, configure=configure)


def build_parser() -> argparse.ArgumentParser:
    """The full ``ragev`` parser with every registered group."""
    parser = argparse.ArgumentParser(
        prog="ragev", description="Tools of pytest-ragev: inspect and prepare RAG datasets, "
        "serve the evaluation API."
    )
    groups = parser.add_subparsers(title="command groups", metavar="GROUP")
    for group in _GROUPS.values():
        group_parser = groups.add_parser(group.name, help=group.help, description=group.help)
        group_parser.set_defaults(_ragev_group_parser=group_parser)
        commands = group_parser.add_subparsers(title="commands", metavar="COMMAND")
        group.resolve()(CommandAdder(commands, group_parser))
    parser.set_defaults(_ragev_group_parser=parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ragev`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        # argparse exits 2 on a usage error (after printing it) and 0 for --help.
        return exit_.code if isinstance(exit_.code, int) else 2
    handler: Handler | None = getattr(args, "_ragev_handler", None)
    if handler is None:
        group_parser: argparse.ArgumentParser = args._ragev_group_parser
        group_parser.print_help(sys.stderr)
        return 2
    try:
        return handler(args)
    except RagevError as exc:
        _error(str(exc))
        return 2
    except KeyboardInterrupt:
        _error("interrupted")
        return 130


def _error(message: str) -> None:
    print(f"ragev: error: {message}", file=sys.stderr)


def _warn(message: str) -> None:
    print(f"ragev: warning: {message}", file=sys.stderr)


# --- ragev dataset ... -----------------------------------------------------------------------


def _load(path: str, dataset_id: str | None = None) -> Dataset:
    from pytest_ragev.dataset import load_dataset

    dataset = load_dataset(path, dataset_id)
    for warning in dataset.warnings:
        _warn(warning)
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
    from pytest_ragev.core.errors import ConfigError

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
    from pytest_ragev.dataset.convert import check_destination, sample_dataset, staged_folder

    destination = Path(args.dst)
    check_destination(Path(args.src), destination, force=args.force)
    source = _load(args.src)
    with staged_folder(destination) as staging:
        summary = sample_dataset(
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
    from pytest_ragev.core.errors import ConfigError
    from pytest_ragev.dataset.convert import (
        QA_KEYS,
        check_destination,
        convert_beir,
        convert_jsonl,
        staged_folder,
    )

    source, destination = Path(args.src), Path(args.dst)
    if args.source_format == "beir" and args.corpus is not None:
        raise ConfigError("--corpus is for --from jsonl; a BEIR folder has its corpus.jsonl")
    if args.source_format == "jsonl" and args.split is not None:
        raise ConfigError("--split is for --from beir; a JSONL QA file has no splits")
    check_destination(source, destination, force=args.force)
    # Convert into a folder beside DST and load it there: DST changes only when the
    # output loads, and a failed conversion leaves nothing behind.
    with staged_folder(destination) as staging:
        if args.source_format == "beir":
            summary = convert_beir(source, staging, split=args.split)
        else:
            corpus = Path(args.corpus) if args.corpus else None
            summary = convert_jsonl(source, staging, corpus_file=corpus)
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
            f"has no place for (known keys: {', '.join(QA_KEYS)})",
            file=sys.stderr,
        )
    return 0


def _check_written(staging: Path, destination: Path) -> None:
    """Load the staged output (printing its warnings); an error names ``destination``."""
    from pytest_ragev.core.errors import DatasetError

    try:
        _load(str(staging))
    except DatasetError as exc:
        message = str(exc).replace(str(staging), str(destination))
        raise DatasetError(
            f"the converted dataset does not load, so nothing was written: {message}"
        ) from None


def configure_dataset_group(commands: CommandAdder) -> None:
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

    convert = commands.add(
        "convert", help="convert a BEIR folder or a JSONL QA file into the five Parquet files",
        handler=_convert,
    )
    convert.add_argument(
        "--from", dest="source_format", choices=("beir", "jsonl"), required=True
    )
    convert.add_argument("src", metavar="SRC", help="the BEIR folder or the JSONL file")
    convert.add_argument("dst", metavar="DST", help="the dataset folder to write")
    convert.add_argument("--split", help="BEIR qrels split (default: the only one, or test)")
    convert.add_argument("--corpus", help="JSONL of {id, text} passages for passage_ids")
    convert.add_argument("--force", action="store_true", help="overwrite files in DST")


#: The groups ``ragev`` ships with; parts of the project add theirs here or at import time.
BUILTIN_GROUPS: tuple[CommandGroup, ...] = (
    CommandGroup("dataset", "inspect, validate, sample and convert datasets",
                 configure_dataset_group),
    CommandGroup("serve", "run the evaluation API and dashboard (needs pytest-ragev[server])",
                 "pytest_ragev.server.cli:configure"),
)
for _group in BUILTIN_GROUPS:
    register_group(_group.name, help=_group.help, configure=_group.configure)
