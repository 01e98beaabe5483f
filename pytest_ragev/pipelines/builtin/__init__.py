"""The evaluation knowledge base and the built-in pipeline.

``build_pipeline(settings)`` returns the pipeline for ``[pipeline] name = "builtin"``;
the session calls ``build_knowledge_base`` once per distinct KB settings and then
``answer`` per question (from a thread pool when ``--ragev-concurrency`` > 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pytest_ragev.core.types import Answer, PipelineSettings, QAPair
from pytest_ragev.pipelines.builtin.pipeline import BuiltinConfig, BuiltinPipeline, KnowledgeBase

__all__ = ["BuiltinConfig", "BuiltinPipeline", "KnowledgeBase", "Pipeline", "build_pipeline"]


class Pipeline(Protocol):
    """What the plugin's glue calls on any pipeline (built-in or remote)."""

    def snapshot(self) -> dict[str, Any]:
        """Resolved knobs with defaults, JSON-safe, secrets never."""
        ...

    def kb_key(self) -> str | None:
        """A hash of the knobs that shape the knowledge base; ``None``: no KB."""
        ...

    def answer_key(self) -> str:
        """A hash of every knob that affects answers (for the answer cache)."""
        ...

    def answer(self, case: QAPair, kb: Any) -> Answer:
        """The answer to one question; thread-safe."""
        ...

    def close(self) -> None:
        """Release models and clients."""
        ...


def build_pipeline(
    settings: PipelineSettings, *, source: Path | str | None = None
) -> BuiltinPipeline:
    """The built-in pipeline for ``settings`` (validated: ConfigError on a bad knob)."""
    where = source if source is not None else Path(settings.base_dir) / "ragev.toml"
    return BuiltinPipeline(settings, source=where)


