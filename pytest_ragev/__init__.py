"""pytest-ragev: regression-test RAG configurations with pytest.

The light value types are imported eagerly; the metric engine (numpy, jieba) loads
on first use of :func:`score` or :func:`aggregate`, so importing the plugin stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

from pytest_ragev.core.errors import ConfigError, DatasetError, PipelineError, RagevError
from pytest_ragev.core.types import (
    GENERATION_METRICS,
    JUDGED_METRICS,
    METRIC_NAMES,
    QUALITY_METRICS,
    RETRIEVAL_METRICS,
    Answer,
    Chunk,
    CustomMetric,
    MetricCase,
    MetricInput,
    MetricValue,
    PipelineSettings,
    QAPair,
    Verdict,
)
from pytest_ragev.core.version import __version__

if TYPE_CHECKING:
    from pytest_ragev.metrics import aggregate, score

#: Marker for implementations of the ``pytest_ragev_*`` hooks (the same as ``pytest.hookimpl``).
hookimpl = pluggy.HookimplMarker("pytest")

__all__ = [
    "GENERATION_METRICS",
    "JUDGED_METRICS",
    "METRIC_NAMES",
    "QUALITY_METRICS",
    "RETRIEVAL_METRICS",
    "Answer",
    "Chunk",
    "ConfigError",
    "CustomMetric",
    "DatasetError",
    "MetricCase",
    "MetricInput",
    "MetricValue",
    "PipelineError",
    "PipelineSettings",
    "QAPair",
    "RagevError",
    "Verdict",
    "__version__",
    "aggregate",
    "hookimpl",
    "score",
]

_LAZY = {"score": "pytest_ragev.metrics", "aggregate": "pytest_ragev.metrics"}


def __getattr__(name: str) -> Any:
    # PEP 562: the metric engine is imported only when somebody asks for it.
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'pytest_ragev' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
