"""What a request may name: the configs, the registered datasets and the model table.

The configs folder (``ragev serve --configs DIR``) holds ``ragev.toml`` files, each
named by its path without ``.toml`` (``default``, ``team/chunk-256``). Beside them an
optional ``ragev-server.toml`` registers datasets and models::

    [datasets.faq]              # dataset_id "faq"
    path = "data/faq"           # relative to ragev-server.toml

    [chat.qwen]                 # chat_id "qwen": replaces [pipeline.chat]
    base_url = "http://127.0.0.1:8001/v1"
    model = "qwen2.5-7b-instruct"
    api_key_env = "QWEN_KEY"

    [rerank.lexical3]           # rerank_id "lexical3": merged into [pipeline]
    rerank_model = "lexical"
    rerank_top_k = 3

    [embedding.bge-m3]          # embedding_id "bge-m3": replaces [pipeline.embedding]
    base_url = "http://127.0.0.1:8080/v1"
    model = "bge-m3"

A rerank entry may name a reranker behind an API as ``rerank = { base_url, model }``
(a ``[pipeline.rerank]`` table). The model an entry names replaces the config's other
spelling of it: an embedding entry drops ``embedding_model``, a rerank entry with
``rerank`` drops ``rerank_model`` and one with ``rerank_model`` drops ``[pipeline.rerank]``.

Every config's own dataset is registered under its id too, and ``default`` is the
built-in sample when the source checkout has it. :func:`plan` turns a request into the
TOML document of one task: the ``config`` as written, with the pipeline of
``knowledge_base_id``, the dataset of ``dataset_id`` and the model overrides applied.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragev.config import load_config
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.redact import redact
from pytest_ragev.core.tables import suggest
from pytest_ragev.server.settings import SERVER_FILE

#: Models every server knows, whatever its model table says.
BUILTIN_CHAT: Mapping[str, Mapping[str, Any]] = {"extractive": {"model": "extractive"}}
BUILTIN_RERANK: Mapping[str, Mapping[str, Any]] = {"lexical": {"rerank_model": "lexical"}}
#: The sample dataset of a source checkout (``dataset/samples``), registered as ``default``.
SAMPLE = Path(__file__).resolve().parents[2] / "dataset" / "samples"
_SERVER_KEYS = ("datasets", "chat", "rerank", "embedding")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


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
    """One config file of the configs folder, parsed (or the one-line reason it is not)."""

    name: str
    path: Path
    dataset_id: str | None = None
    dataset_path: Path | None = None
    pipeline: str | None = None
    profile: str | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    variants: tuple[str, ...] = ()
    baseline: bool = False
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``GET /api/v1/configs`` shows (no paths of the server's disk)."""
        return {
            "name": self.name, "dataset_id": self.dataset_id, "pipeline": self.pipeline,
            "profile": self.profile, "thresholds": dict(self.thresholds),
            "variants": list(self.variants), "baseline": self.baseline, "error": self.error,
        }


@dataclass(frozen=True)
class Plan:
    """A request resolved against the catalog: what to run and where to write its config."""

    config: str
    knowledge_base_id: str
    dataset_id: str
    chat_id: str | None
    rerank_id: str | None
    variants: tuple[str, ...]
    limit: int | None
    profile: str | None
    document: dict[str, Any]
    folder: Path
    error: str | None = None
    embedding_id: str | None = None

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


class Catalog:
    """The configs folder, read afresh on each call (files are few and small)."""

    def __init__(self, configs: Path) -> None:
        self.configs = Path(configs).resolve()

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

    def configs_list(self) -> list[ConfigEntry]:
        """Every config of the folder, by name."""
        entries = []
        for path in sorted(self.configs.rglob("*.toml")):
            relative = path.relative_to(self.configs)
            if path.name == SERVER_FILE or any(p.startswith(".") for p in relative.parts):
                continue
            name = relative.with_suffix("").as_posix()
            entries.append(self._entry(name, path))
        return entries

    def _entry(self, name: str, path: Path) -> ConfigEntry:
        try:
            parsed = load_config(path)
        except ConfigError as exc:
            return ConfigEntry(name=name, path=path, error=str(exc).replace(str(self.configs), "."))
        dataset_id = parsed.dataset_id or parsed.dataset_path.name
        if not _is_name(dataset_id):
            # The folder's name stands in for a missing [dataset] id, and a dataset id
            # becomes part of task ids, task folders and the plugin's item ids.
            return ConfigEntry(name=name, path=path, error=(
                f"{name}.toml: [dataset] id is not set and the dataset folder's name "
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

    def datasets(self) -> dict[str, DatasetEntry]:
        """Every registered dataset by id: ``ragev-server.toml``, then the configs', then
        the sample as ``default``."""
        out: dict[str, DatasetEntry] = {}
        server_file = self.configs / SERVER_FILE
        for name, entry in self.server_table().get("datasets", {}).items():
            raw = entry.get("path")
            if not isinstance(raw, str):
                raise ConfigError(f'{server_file}: [datasets.{name}] needs path = "<folder>"')
            out[name] = DatasetEntry(name, (server_file.parent / raw).resolve(), SERVER_FILE)
        for config in self.configs_list():
            if config.dataset_id and config.dataset_path and config.dataset_id not in out:
                out[config.dataset_id] = DatasetEntry(
                    config.dataset_id, config.dataset_path, f"config {config.name}"
                )
        if "default" not in out and SAMPLE.is_dir():
            out["default"] = DatasetEntry("default", SAMPLE, "the built-in sample")
        return out

    def models(self, kind: str) -> dict[str, Mapping[str, Any]]:
        """The ``chat``, ``rerank`` or ``embedding`` model table (built-ins first, the
        file's win; no embedding model is built in)."""
        builtin = {"chat": BUILTIN_CHAT, "rerank": BUILTIN_RERANK}.get(kind, {})
        return {**builtin, **self.server_table().get(kind, {})}

    # --------------------------------------------------------------- planning
    def plan(
        self,
        *,
        dataset_id: str | None,
        knowledge_base_id: str | None,
        chat_id: str | None,
        rerank_id: str | None,
        config: str | None,
        variants: Sequence[str] = (),
        limit: int | None = None,
        profile: str | None = None,
        embedding_id: str | None = None,
    ) -> Plan:
        """Resolve a create request; :class:`FieldError` names the field that is wrong."""
        entries = {entry.name: entry for entry in self.configs_list()}
        if not entries:
            raise FieldError("config", f"the server's configs folder has no ragev.toml files "
                                       f"({self.configs.name})")
        config_name = config or knowledge_base_id or _default_name(entries)
        config_field = "config" if config else "knowledge_base_id"
        config_entry = _pick(entries, config_name, config_field, "configs")
        kb_entry = _pick(entries, knowledge_base_id or config_name, "knowledge_base_id", "configs")

        datasets = self.datasets()
        if dataset_id is None:
            dataset_id = config_entry.dataset_id if config and config_entry.dataset_id else (
                "default")
        dataset = _pick(datasets, dataset_id, "dataset_id", "datasets")
        chat = _pick(self.models("chat"), chat_id, "chat_id", "chat models") if chat_id else None
        rerank = (_pick(self.models("rerank"), rerank_id, "rerank_id", "rerank models")
                  if rerank_id else None)
        embedding = (_pick(self.models("embedding"), embedding_id, "embedding_id",
                           "embedding models") if embedding_id else None)

        document = _read(config_entry.path)
        kb_document = document if kb_entry.path == config_entry.path else _read(kb_entry.path)
        pipeline = copy.deepcopy(kb_document.get("pipeline", {}))
        kb_variants = copy.deepcopy(kb_document.get("variants"))
        if not isinstance(pipeline, dict):
            pipeline = {}
        if chat is not None:
            pipeline["chat"] = copy.deepcopy(dict(chat))
        if rerank is not None:
            # The entry's reranker replaces the config's, however the config spells it.
            pipeline.pop("rerank" if "rerank_model" in rerank else "rerank_model", None)
            pipeline.update(copy.deepcopy(dict(rerank)))
        if embedding is not None:
            pipeline.pop("embedding_model", None)
            pipeline["embedding"] = copy.deepcopy(dict(embedding))
        document["pipeline"] = pipeline
        document.pop("variants", None)
        if kb_variants:
            document["variants"] = kb_variants
        own_dataset = config_entry.dataset_path is not None and (
            config_entry.dataset_path == dataset.path)
        document["dataset"] = {"path": str(dataset.path), "id": dataset.dataset_id}
        document.pop("report", None)
        baseline = document.get("baseline")
        if isinstance(baseline, dict) and isinstance(baseline.get("path"), str) and own_dataset:
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
            chat_id=chat_id,
            rerank_id=rerank_id,
            embedding_id=embedding_id,
            variants=tuple(variants),
            limit=limit,
            profile=profile,
            document=document,
            folder=kb_entry.path.parent,
        )


def _default_name(entries: Mapping[str, ConfigEntry]) -> str:
    if "default" in entries:
        return "default"
    if len(entries) == 1:
        return next(iter(entries))
    return "default"  # _pick then lists the configs there are


def _pick(table: Mapping[str, Any], name: str, field_name: str, noun: str) -> Any:
    if name not in table:
        raise FieldError(
            field_name,
            f"{field_name}: no {noun[:-1] if noun.endswith('s') else noun} named {name!r}; "
            f"{suggest(name, table, noun=noun)}",
        )
    return table[name]


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}  # the plugin reports the problem as the task's error
