"""Deprecated alias of :mod:`pytest_ragev.pipelines.remote` (the remote pipelines).

Kept for one release so that imports written against 0.1 keep working.
"""

from __future__ import annotations

import warnings

from pytest_ragev.pipelines.remote import *  # noqa: F403

warnings.warn(
    "pytest_ragev.remote is deprecated; import pytest_ragev.pipelines.remote instead",
    DeprecationWarning,
    stacklevel=2,
)
