"""Answer caches of several machines made one: ``ragev cache merge``.

Each shard of a sharded run (``--ragev-shard K/N``) caches the answers it got in its own
``.pytest_cache/d/ragev/answers/answers.sqlite``. A CI job uploads that folder as an
artifact; the merge job makes one store of them, the union by the cache's own key, for
the next run to restore: no SQLite file is ever shared over a network filesystem, whose
locks SQLite cannot trust.

A row is copied only when its checksum matches (a damaged row is counted and left out:
the next run answers that question again); a key the target already holds keeps its
row (answers under one key are the same answer: the key covers the dataset, every
answer-shaping knob, the code and the qid). The text-metric rows (``text_scores``) are
merged the same way; their readers check their own checksums.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.pipelines.answer_cache import DATABASE, row_checksum, set_up_database

#: Rows read and written per batch.
_BATCH = 5000


@dataclass(frozen=True)
class MergedCache:
    """What a merge did: rows added to the target, rows it already had, damaged rows
    left out (answers), and text-metric rows added."""

    added: int
    present: int
    damaged: int
    text_scores: int

    @property
    def line(self) -> str:
        """One line for the terminal."""
        return (f"{self.added} answers added, {self.present} already there, {self.damaged} "
                f"damaged left out; {self.text_scores} text-metric rows added")


def database_of(path: Path) -> Path:
    """The SQLite file of a cache given as its folder or as the file itself."""
    return path / DATABASE if path.is_dir() else path


def _open_source(path: Path) -> sqlite3.Connection:
    database = database_of(path)
    if not database.is_file():
        raise ConfigError(f"{path}: no answer cache there (no {DATABASE}); pass the folder "
                          "a run cached its answers in (.pytest_cache/d/ragev/answers)")
    try:
        # Not read-only: a copied WAL database needs its -shm made, and is checkpointed.
        connection = sqlite3.connect(database)
        tables = {row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{database} is not an answer cache ({exc}); pass the folder a "
                          "run cached its answers in") from None
    if "answers" not in tables:
        connection.close()
        raise ConfigError(f"{database} has no answers table, so it is not pytest-ragev's "
                          "answer cache; pass the folder a run cached its answers in")
    # A TEXT value where a BLOB belongs is a damaged row, not a decoding error.
    connection.text_factory = bytes
    return connection


def merge_caches(sources: Sequence[Path], target: Path) -> MergedCache:
    """Add every sound row of the caches ``sources`` (folders or ``answers.sqlite``
    files) to the cache in folder ``target`` (made when missing), in one transaction
    per source: an interrupted merge leaves the target as it was before that source.
    :class:`ConfigError` (one line) for a source that is not an answer cache."""
    target_db = (target / DATABASE).resolve()
    opened = []
    try:
        for source in sources:
            if database_of(source).resolve() == target_db:
                raise ConfigError(f"{source} is the target itself; merge the other caches "
                                  "into it")
            opened.append(_open_source(source))
        target.mkdir(parents=True, exist_ok=True)
        into = sqlite3.connect(target_db, isolation_level=None)
        try:
            set_up_database(into)
            added = present = damaged = scores = 0
            for reading in opened:
                into.execute("BEGIN IMMEDIATE")
                try:
                    counts = _copy(reading, into)
                    into.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        into.execute("ROLLBACK")
                    raise
                added, present, damaged, scores = (
                    added + counts[0], present + counts[1], damaged + counts[2],
                    scores + counts[3])
        finally:
            into.close()
    finally:
        for connection in opened:
            connection.close()
    return MergedCache(added=added, present=present, damaged=damaged, text_scores=scores)


def _copy(source: sqlite3.Connection, into: sqlite3.Connection) -> tuple[int, int, int, int]:
    added = present = damaged = 0
    rows = source.execute("SELECT key, sum, body FROM answers")
    while batch := rows.fetchmany(_BATCH):
        sound = [(key, check, body) for key, check, body in batch
                 if isinstance(key, bytes) and isinstance(body, bytes)
                 and row_checksum(key, body) == check]
        damaged += len(batch) - len(sound)
        before = into.total_changes
        into.executemany("INSERT OR IGNORE INTO answers (key, sum, body) VALUES (?, ?, ?)",
                         sound)
        new = into.total_changes - before
        added += new
        present += len(sound) - new
    scores = 0
    tables = {row[0] for row in source.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    if b"text_scores" in tables:
        rows = source.execute("SELECT key, body FROM text_scores")
        while batch := rows.fetchmany(_BATCH):
            before = into.total_changes
            into.executemany("INSERT OR IGNORE INTO text_scores (key, body) VALUES (?, ?)",
                             batch)
            scores += into.total_changes - before
    return added, present, damaged, scores


__all__ = ["MergedCache", "database_of", "merge_caches"]
