"""What identifies a knowledge base and an answer, so caches never serve the wrong one.

Pure functions of the settings and the pipeline object: the plugin shell decides which
pipeline answers (its own or a conftest's) and passes that in.
"""

from __future__ import annotations

from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.core.version import __version__
from pytest_ragev.pipelines.protocol import Pipeline


def options_digest(settings: PipelineSettings) -> str:
    """sha256 of the pipeline name and every knob as written: all that is known of a
    pipeline whose code cannot be hashed (a conftest's)."""
    return sha256_json({"name": settings.name, "options": dict(settings.options)})


def kb_identity(settings: PipelineSettings, pipeline: Pipeline | None) -> str:
    """Configurations with the same identity share one knowledge base.

    ``pipeline`` is the built-in pipeline that builds the KB, or ``None`` when a user's
    hook builds it: that builder may read any knob, so only identical settings share.
    """
    if pipeline is not None:
        key = pipeline.kb_key()
        if key is not None:
            return key
    return options_digest(settings)


def answer_settings_key(settings: PipelineSettings, pipeline: Pipeline | None) -> str:
    """The settings part of an answer-cache key: the plugin version and the pipeline's
    own answer key (``None``: a conftest pipeline, known only by its knobs)."""
    knobs = pipeline.answer_key() if pipeline is not None else options_digest(settings)
    return f"{__version__}:{knobs}"


def cache_enabled(
    settings: PipelineSettings, *, no_cache: bool, configured: bool | None, user_answers: bool
) -> bool:
    """Whether answers of ``settings`` are cached.

    ``--ragev-no-cache`` turns caching off, ``[run] cache`` decides when set; by default
    only the built-in pipeline is cached (its answers are a function of its settings and
    code), never a conftest hook's, whose code cannot be hashed.
    """
    if no_cache:
        return False
    if configured is not None:
        return configured
    return settings.name == "builtin" and not user_answers
