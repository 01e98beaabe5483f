"""Paths as reports and committed files write them.

A report is read on another machine, a baseline is committed: the paths in them are
relative to a folder the reader knows (pytest's rootdir, the config file's folder), in
posix form, whenever the file lies under it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def portable_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` in posix form, with ``..`` where it lies outside it
    (``../data/faq``); absolute only where no relative path exists (another drive).

    Keeps machine paths out of committed baselines, and the settings hash the same on
    every checkout, wherever the dataset lies beside the config file.
    """
    try:
        return path.relative_to(base).as_posix() or "."
    except ValueError:
        pass
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:  # Windows: another drive has no relative path
        return str(path)


def display_roots(rootdir: str, config_dir: Path) -> tuple[Path, ...]:
    """Where report paths are shown from: the rootdir (what the user types from), then
    the config folder; never the filesystem root."""
    roots = [Path(rootdir)] if rootdir else []
    roots.append(config_dir)
    return tuple(root for root in roots if root.is_absolute() and len(root.parts) > 1)


def shown_path(path: Path, roots: Sequence[Path]) -> str:
    """``path`` as a report writes it: relative to the first of ``roots`` it lies under
    (posix separators), else as it is."""
    for root in roots:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            continue
    return str(path)


def relative_text(line: str, roots: Sequence[Path]) -> str:
    """A line with its absolute paths under ``roots`` made relative: the gate names the
    files it read and wrote by the paths it opened."""
    for root in roots:
        line = line.replace(str(root) + os.sep, "")
    return line
