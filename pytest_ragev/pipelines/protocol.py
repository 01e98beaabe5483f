"""The one protocol every pipeline implements: built-in, ``http`` and ``module:callable``."""

from __future__ import annotations

from typing import Any, Protocol

from pytest_ragev.core.types import Answer, QAPair


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
