"""Deprecated alias of :mod:`pytest_ragev.pipelines.builtin` (the built-in pipeline).

Kept for one release so that imports written against 0.1 keep working.
"""

from __future__ import annotations

import warnings

from pytest_ragev.pipelines.builtin import *  # noqa: F403

warnings.warn(
    "pytest_ragev.kb is deprecated; import pytest_ragev.pipelines.builtin instead",
    DeprecationWarning,
    stacklevel=2,
)
