"""The exceptions pytest-ragev raises for bad input.

Every message is one line that names the file, the field (column, key) and the fix,
so the plugin and the ``ragev`` command can print it as it is, without a traceback.
"""

from __future__ import annotations


class RagevError(Exception):
    """Base class: a problem with the user's input, reported as one line."""


class DatasetError(RagevError):
    """A dataset folder or one of its Parquet files is unusable."""


class ConfigError(RagevError):
    """A ``ragev.toml`` key, a command-line option or a pipeline setting is wrong."""


class PipelineError(RagevError):
    """A pipeline could not be built or failed to answer (HTTP errors, bad responses).

    A request that failed for good says how: ``status`` is the last HTTP status
    (``None``: no response at all, or not a request's failure) and ``transport`` is true
    when every retry was spent on connection errors, timeouts, 5xx or 429.
    """

    def __init__(self, *args: object, status: int | None = None, transport: bool = False
                 ) -> None:
        super().__init__(*args)
        self.status = status
        self.transport = transport


class BaselineError(RagevError):
    """A baseline snapshot is unreadable or cannot be compared with the current run."""


class CacheWarning(UserWarning):
    """A cache (knowledge base, answers) was damaged or unusable; the run goes on without it."""


def name_variant(message: str, source: object, variant: str | None) -> str:
    """``message`` (which starts ``{source}: ``) naming the ``[[variants]]`` entry it is about.

    ``"ragev.toml: [pipeline] top_k ..."`` becomes ``"ragev.toml: variant 'fast': [pipeline]
    top_k ..."``; the message is returned unchanged when ``variant`` is ``None``.
    """
    if variant is None:
        return message
    prefix = f"{source}: "
    rest = message[len(prefix):] if message.startswith(prefix) else message
    return f"{prefix}variant {variant!r}: {rest}"
