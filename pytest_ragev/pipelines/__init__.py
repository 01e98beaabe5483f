"""Who answers a question: the built-in pipeline, an HTTP service, a user factory, or
an answers file made elsewhere (``replay``).

Every pipeline implements :class:`Pipeline`; :func:`build_pipeline` picks the one a
``[pipeline] name`` asks for and validates its knobs (one-line :class:`ConfigError`).
"""

from __future__ import annotations

from pathlib import Path

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.pipelines.answers import (
    ANSWER_COLUMNS,
    AnswersFile,
    answer_row,
    answers_schema,
    record_row,
    write_answers,
    write_run_answers,
)
from pytest_ragev.pipelines.builtin import BuiltinPipeline
from pytest_ragev.pipelines.concurrency import (
    IO_BOUND_CONCURRENCY,
    PipelineKind,
    default_concurrency,
    is_io_bound,
    pipeline_kind,
)
from pytest_ragev.pipelines.protocol import Pipeline, Preflight, QuestionCheck
from pytest_ragev.pipelines.remote import build_remote_pipeline
from pytest_ragev.pipelines.replay import MissingAnswer, ReplayPipeline

__all__ = [
    "ANSWER_COLUMNS",
    "IO_BOUND_CONCURRENCY",
    "AnswersFile",
    "MissingAnswer",
    "Pipeline",
    "PipelineKind",
    "Preflight",
    "QuestionCheck",
    "ReplayPipeline",
    "answer_row",
    "answers_schema",
    "build_pipeline",
    "default_concurrency",
    "is_io_bound",
    "pipeline_kind",
    "record_row",
    "write_answers",
    "write_run_answers",
]


def build_pipeline(settings: PipelineSettings, *, source: Path | str | None = None) -> Pipeline:
    """The pipeline ``settings.name`` names: ``"builtin"``, ``"http"``, ``"replay"`` or
    ``"module:callable"``.

    ``source`` names the config file in error messages (default ``base_dir/ragev.toml``).
    Called only when no ``conftest.py`` answers the questions, so an unknown name says so.
    """
    where = source if source is not None else Path(settings.base_dir) / "ragev.toml"
    if settings.name == "builtin":
        return BuiltinPipeline(settings, source=where)
    if settings.name == "replay":
        return ReplayPipeline(settings, source=where)
    if settings.name == "http" or ":" in settings.name:
        return build_remote_pipeline(settings, source=where)
    raise ConfigError(
        f"{where}: [pipeline] name = {settings.name!r} is not a pipeline and no conftest.py "
        "implements pytest_ragev_answer; use \"builtin\", \"http\", \"replay\" or "
        "\"module:callable\", or implement the hook"
    )
