"""The one protocol every pipeline implements: built-in, ``http`` and ``module:callable``."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

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


@runtime_checkable
class Preflight(Protocol):
    """What a pipeline that calls a service offers before the first question: the
    environment it needs, and one look at the service (the plugin calls both at session
    start, so a missing key or a dead endpoint is one line, not a failure per question)."""

    def missing_environment(self) -> list[str]:
        """One line per environment variable the pipeline needs and cannot find."""
        ...

    def preflight(self, case: QAPair) -> str | None:
        """``None`` when the service answers (asked about ``case`` if it must be), else
        why no question can be answered."""
        ...


@runtime_checkable
class QuestionCheck(Protocol):
    """What a pipeline whose answers were made elsewhere (``replay``) offers before the
    first question: whether its answers fit the run's questions and configurations."""

    def check_questions(
        self, qids: Collection[int], configurations: Collection[str | None]
    ) -> str | None:
        """``None`` when every answer it holds belongs to one of ``qids`` (the dataset's
        questions) and ``configurations`` (the config file's, ``None`` the base one),
        else the one-line problem and its fix."""
        ...
