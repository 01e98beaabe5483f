"""Who answers a question: the built-in pipeline, an HTTP service or a user factory.

Every pipeline implements :class:`Pipeline`; :func:`build_pipeline` picks the one a
``[pipeline] name`` asks for and validates its knobs (one-line :class:`ConfigError`).
"""

from __future__ import annotations

from pathlib import Path

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.pipelines.builtin import BuiltinPipeline
from pytest_ragev.pipelines.protocol import Pipeline, Preflight
from pytest_ragev.pipelines.remote import FactoryPipeline, HttpRagPipeline, build_remote_pipeline

__all__ = ["Pipeline", "Preflight", "build_pipeline", "is_io_bound"]


def is_io_bound(pipe: Pipeline) -> bool:
    """Whether ``pipe`` mostly waits on a service (an ``http`` pipeline, a factory, the
    built-in one with a remote chat model): such pipelines run more calls at once."""
    if isinstance(pipe, HttpRagPipeline | FactoryPipeline):
        return True
    return isinstance(pipe, BuiltinPipeline) and pipe.io_bound


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
