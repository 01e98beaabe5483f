"""Who answers a question: the built-in pipeline, an HTTP service or a user factory.

Every pipeline implements :class:`Pipeline`; :func:`build_pipeline` picks the one a
``[pipeline] name`` asks for and validates its knobs (one-line :class:`ConfigError`).
"""

from __future__ import annotations

from pathlib import Path

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.pipelines.builtin import BuiltinPipeline
from pytest_ragev.pipelines.concurrency import (
    IO_BOUND_CONCURRENCY,
    PipelineKind,
    default_concurrency,
    is_io_bound,
    pipeline_kind,
)
from pytest_ragev.pipelines.protocol import Pipeline, Preflight
from pytest_ragev.pipelines.remote import build_remote_pipeline

__all__ = [
    "IO_BOUND_CONCURRENCY",
    "Pipeline",
    "PipelineKind",
    "Preflight",
    "build_pipeline",
    "default_concurrency",
    "is_io_bound",
    "pipeline_kind",
]


def build_pipeline(settings: PipelineSettings, *, source: Path | str | None = None) -> Pipeline:
    """The pipeline ``settings.name`` names: ``"builtin"``, ``"http"`` or ``"module:callable"``.

    ``source`` names the config file in error messages (default ``base_dir/ragev.toml``).
    Called only when no ``conftest.py`` answers the questions, so an unknown name says so.
    """
    where = source if source is not None else Path(settings.base_dir) / "ragev.toml"
    if settings.name == "builtin":
        return BuiltinPipeline(settings, source=where)
    if settings.name == "http" or ":" in settings.name:
        return build_remote_pipeline(settings, source=where)
    raise ConfigError(
        f"{where}: [pipeline] name = {settings.name!r} is not a pipeline and no conftest.py "
        "implements pytest_ragev_answer; use \"builtin\", \"http\" or \"module:callable\", "
        "or implement the hook"
    )
