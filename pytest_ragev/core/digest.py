"""Content digests: sha256 over canonical JSON, the one way the package hashes a value.

Settings hashes, knowledge-base and answer-cache keys all go through :func:`sha256_json`,
so the same value always gives the same key, whichever part of the package asks.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """``value`` as JSON with sorted keys, no whitespace, UTF-8 as is.

    Values JSON cannot hold (paths, dates) are written as their ``str()``, so a settings
    snapshot that still holds a ``Path`` hashes like the one that holds its text.
    """
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)


def sha256_json(value: Any) -> str:
    """The sha256 hex digest of :func:`canonical_json` of ``value``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def text_digest(text: str) -> str:
    """The first 16 hex digits of the sha256 of ``text``'s UTF-8 bytes: a short name for a
    text that a file keeps only in part (a baseline's long answers)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
