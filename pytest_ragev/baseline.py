"""Deprecated alias of :mod:`pytest_ragev.gate.baseline` (baseline snapshots).

Kept for one release so that imports written against 0.1 keep working.
"""

from __future__ import annotations

import warnings

from pytest_ragev.gate.baseline import *  # noqa: F403

warnings.warn(
    "pytest_ragev.baseline is deprecated; import pytest_ragev.gate.baseline instead",
    DeprecationWarning,
    stacklevel=2,
)
