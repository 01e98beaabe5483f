"""pytest entry point of pytest-ragev (``pytest11: ragev``)."""

from __future__ import annotations
