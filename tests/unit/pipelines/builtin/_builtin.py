"""The built-in pipeline as its unit tests make it: from ``[pipeline]`` options, a question."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragev.core.types import PipelineSettings, QAPair
from pytest_ragev.pipelines import build_pipeline
from pytest_ragev.pipelines.builtin import KnowledgeBase


def pipeline(base_dir: Path | None = None, *, variant: str | None = None,
             **options: Any) -> Any:
    """The built-in pipeline of ``options``, as ``build_pipeline`` makes it from a ragev.toml.

    ``base_dir`` is the config's folder: model paths are read from it and errors name
    ``base_dir / "ragev.toml"``. Without it, the working folder and ``ragev.toml``.
    """
    settings = PipelineSettings(name="builtin", options=options,
                                base_dir=base_dir or Path.cwd(), variant=variant)
    source = "ragev.toml" if base_dir is None else base_dir / "ragev.toml"
    return build_pipeline(settings, source=source)


def kb_of(pipe: Any, corpus: Mapping[int, str], **kwargs: Any) -> KnowledgeBase:
    """``pipe``'s knowledge base of ``corpus`` (a fixed fingerprint; ``kwargs``: cache_dir...)."""
    kb: KnowledgeBase = pipe.build_knowledge_base(corpus, fingerprint="f" * 64, **kwargs)
    return kb


def case(question: str, qid: int = 1, pids: tuple[int, ...] = ()) -> QAPair:
    """A question to answer, with the ids of its relevant passages (none by default)."""
    return QAPair(qid=qid, question=question, pids=pids, passages=(), aid=None, answer=None)
