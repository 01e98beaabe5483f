"""Deprecated alias of :mod:`pytest_ragev.gate` (the gate's checks).

Kept for one release so that imports written against 0.1 keep working.
"""

from __future__ import annotations

import warnings

from pytest_ragev.gate import *  # noqa: F403

warnings.warn(
    "pytest_ragev.checks is deprecated; import pytest_ragev.gate instead",
    DeprecationWarning,
    stacklevel=2,
)
