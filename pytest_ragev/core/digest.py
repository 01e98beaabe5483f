"""Content digests: sha256 over canonical JSON, the one way the package hashes a value.

Settings hashes, knowledge-base and answer-cache keys all go through :func:`sha256_json`,
so the same value always gives the same key, whichever part of the package asks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
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


def update_with_sources(digest: Any, package: Path, patterns: Iterable[str]) -> None:
    """Feed ``digest`` (a hashlib object) the path, size and bytes of every file under
    ``package`` that a glob of ``patterns`` matches, in path order: the digest of the
    code those files hold. A file that cannot be read (an unusual install, a zip) counts
    as empty, so the caller's version string is then all that changes the digest."""
    for path in sorted({path for pattern in patterns for path in package.glob(pattern)}):
        try:
            data = path.read_bytes()
        except OSError:
            data = b""
        name = path.relative_to(package).as_posix().encode()
        digest.update(b"%s\0%d\0" % (name, len(data)) + data)
