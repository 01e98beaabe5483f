"""Repository-level conftest: the test suite drives the plugin through ``pytester``."""

from __future__ import annotations
