"""The package version, in a leaf module: lower layers read it without importing the face."""

from __future__ import annotations

__version__ = "0.2.0"
