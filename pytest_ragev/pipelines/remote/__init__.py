"""Remote pipelines: the RAG generator's chat model, deployed RAG services over HTTP,
and user factories named ``module:callable``.

Their requests go through :mod:`pytest_ragev.clients` (retries, circuit breaker,
secrets). Standard library only; nothing here is imported when the plugin merely loads.
"""

from __future__ import annotations

from pathlib import Path

from pytest_ragev.core.errors import ConfigError, PipelineError, name_variant
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.pipelines.protocol import Pipeline
from pytest_ragev.pipelines.remote.chat import ChatClient, ChatConfig, ChatResult
from pytest_ragev.pipelines.remote.factory import AnswerPipeline, FactoryPipeline, load_factory
from pytest_ragev.pipelines.remote.http_rag import HttpRagPipeline

__all__ = [
    "AnswerPipeline",
    "ChatClient",
    "ChatConfig",
    "ChatResult",
    "FactoryPipeline",
    "HttpRagPipeline",
    "build_remote_pipeline",
    "load_factory",
]


def build_remote_pipeline(
    settings: PipelineSettings, *, source: Path | str | None = None
) -> Pipeline:
    """The pipeline for ``name = "http"`` or ``name = "module:callable"``.

    ``source`` names the config file in error messages (default ``base_dir/ragev.toml``).
    """
    where = source if source is not None else Path(settings.base_dir) / "ragev.toml"
    try:
        if settings.name == "http":
            return HttpRagPipeline(settings, source=where)
        if ":" in settings.name:
            return load_factory(settings.name, settings, source=where)
    except (ConfigError, PipelineError) as error:
        if settings.variant is None:
            raise
        # Name the [[variants]] entry whose settings are wrong.
        raise type(error)(name_variant(str(error), where, settings.variant)) from error.__cause__
    raise ConfigError(
        f"{where}: [pipeline] name = {settings.name!r} is not a remote pipeline; use \"http\" "
        "or \"module:callable\""
    )
