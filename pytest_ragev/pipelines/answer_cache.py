"""Answers cached on disk per (dataset fingerprint, settings hash, question id).

One SQLite database per cache, ``directory/answers.sqlite``, in WAL mode: a table of
(key, checksum, body) rows. The body is the answer as compact JSON compressed with zlib
(level 1: some 20 µs an answer for a third of the size, which also keeps rows from
straddling pages); the checksum is a BLAKE2b digest of key and body. SQLite, in the
standard library, gives what a cache shared by xdist workers and concurrent runs needs
without code of ours: transactions across processes, readers that never block the
writer, lookups by key without loading an index, and committed rows that survive a
killed process (so an interrupted run resumes). The store is smaller than the answers'
JSON.

A second table, ``text_scores``, keeps the scores of (answer, reference) pairs: the six
text metrics for the evaluation's ``TextScoreMemo``, the ``similarity`` of a pair for
its similarity scorer; float64 values (48 bytes for six) and a 16-byte checksum per
pair, under a key that digests both texts and everything else the numbers depend on
(``pytest_ragev.metrics.memo``).

It is an optimisation, so nothing about it fails a run: a row whose checksum or JSON
does not match is a miss (one warning; the answer is recomputed and rewritten), a
database file that is not a database is moved aside and started afresh (one warning),
and a folder that is read-only or full warns once and the run goes on without the cache
(reads still served when only writing fails).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import struct
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any

from pytest_ragev.core.attribution import is_passage_id
from pytest_ragev.core.digest import canonical_json
from pytest_ragev.core.errors import CacheWarning
from pytest_ragev.core.types import Answer, Chunk, ChunkLike, Retrieved

#: Bumped when the entry layout or the way keys are digested changes; part of every key,
#: so old entries are misses, never served. 3: keys digested by ``core.digest.sha256_json``.
FORMAT = 3
#: The database file inside the cache folder.
DATABASE = "answers.sqlite"
#: How long a writer waits for another process's transaction before giving up (seconds).
BUSY_TIMEOUT = 60.0

_SCHEMA = ("CREATE TABLE IF NOT EXISTS answers "
           "(key BLOB PRIMARY KEY, sum BLOB NOT NULL, body BLOB NOT NULL)")
# The text metrics of an (answer, reference) pair, keyed by a digest of both texts and
# of everything else they depend on (see pytest_ragev.evaluation.TextScoreMemo).
_SCORES_SCHEMA = ("CREATE TABLE IF NOT EXISTS text_scores "
                  "(key BLOB PRIMARY KEY, body BLOB NOT NULL)")
#: Six float64 values and a 16-byte checksum of the key and the values.
#: Keys looked up in one statement (SQLite allows 32,766 parameters since 3.32).
_LOOKUP_BATCH = 500


def answer_cache_key(fingerprint: str, settings_key: str, qid: int, repeat: int = 0) -> str:
    """The sha256 hex key of one answer; changes when any of the parts changes.

    ``sha256_json([FORMAT, fingerprint, settings_key, qid])`` for a question's first
    answer, ``sha256_json([FORMAT, fingerprint, settings_key, qid, repeat])`` for its
    answer number ``repeat + 1`` (``--ragev-repeat``): the first answer keeps the key it
    had before repeats existed. Computed from the hash of everything before the qid,
    which a run's questions share: a third of the cost of hashing the whole text again
    for each of them.
    """
    digest = _key_prefix(FORMAT, fingerprint, settings_key).copy()
    tail = f"{int(qid)}]" if not repeat else f"{int(qid)},{int(repeat)}]"
    digest.update(tail.encode("ascii"))
    key: str = digest.hexdigest()
    return key


@functools.lru_cache(maxsize=64)
def _key_prefix(form: int, fingerprint: str, settings_key: str) -> Any:
    """The sha256 state after the canonical JSON of the key up to its qid
    (``[3,"<fingerprint>","<settings key>",``); callers hash a copy of it."""
    text = canonical_json([form, fingerprint, settings_key, 0])
    return hashlib.sha256(text[: text.rindex(",") + 1].encode("utf-8"))


def _checksum(key: bytes, body: bytes) -> bytes:
    return hashlib.blake2b(key + b"\0" + body, digest_size=16).digest()


def row_checksum(key: bytes, body: bytes) -> bytes:
    """The checksum an ``answers`` row keeps of its key and body (``ragev cache merge``
    copies only the rows it matches)."""
    return _checksum(key, body)


def set_up_database(connection: Any) -> None:
    """Make ``connection``'s database a cache: WAL mode and both tables (see
    :func:`_set_up`)."""
    _set_up(connection)


def _default_warn(message: str) -> None:
    # A cache warning must never fail a run, not even under -W error.
    with contextlib.suppress(Exception):
        warnings.warn(CacheWarning(message), stacklevel=4)


class AnswerCache:
    """A cache of answers in one SQLite file; safe to share between threads and processes.

    ``warn`` receives each one-line warning (default: a :class:`CacheWarning`); each
    kind of trouble (damaged rows, an unusable database, failed writes) warns once per
    cache object.
    """

    def __init__(self, directory: Path, *, warn: Callable[[str], None] | None = None) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DATABASE
        self._warn = warn or _default_warn
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._connection: Any = None
        self._pid = 0
        self._readable = True
        self._writable = True
        #: Rows found damaged (each a miss) since this object was made.
        self.damaged = 0
        #: Text-metric entries found damaged (each pair scored again).
        self.damaged_text_scores = 0

    def __repr__(self) -> str:
        return f"AnswerCache({str(self.directory)!r})"

    def get(self, key: str) -> Answer | None:
        """The cached answer for ``key``, or ``None`` (missing, damaged or unreadable)."""
        raw = _key_bytes(key)
        if raw is None:
            return None
        with self._lock:
            row = self._run("read", "SELECT sum, body FROM answers WHERE key = ?", (raw,))
        if row is None:
            return None
        checksum, body = row
        answer = None
        if bytes(checksum) == _checksum(raw, bytes(body)):
            try:
                answer = _decode(json.loads(zlib.decompress(body).decode("utf-8")), key)
            except (ValueError, TypeError, KeyError, AttributeError, zlib.error):
                answer = None
        if answer is None:
            self.damaged += 1
            self._once("damaged", f"ragev: a damaged entry in the answer cache {self.path} "
                       "was ignored (checksum or content mismatch); its answer is recomputed")
            with self._lock:
                self._run("write", "DELETE FROM answers WHERE key = ?", (raw,))
        return answer

    def put(self, key: str, answer: Answer) -> None:
        """Store ``answer``; ``TypeError`` when its meta or retrieved items are not JSON-safe.

        Never raises for the store itself: a failed write warns once and is skipped.
        """
        raw = _key_bytes(key)
        if raw is None:
            raise ValueError(f"answer cache key {key!r} is not a hex digest; use answer_cache_key")
        if not isinstance(answer.text, str):
            raise TypeError(f"Answer.text is {type(answer.text).__name__}, not str")
        entry = {
            "format": FORMAT,
            "key": key,
            "text": answer.text,
            "retrieved": [_encode_item(item) for item in answer.retrieved],
            "meta": _json_safe(dict(answer.meta), "meta"),
        }
        body = zlib.compress(
            json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), 1)
        with self._lock:
            self._run("write", "INSERT OR REPLACE INTO answers (key, sum, body) VALUES (?, ?, ?)",
                      (raw, _checksum(raw, body), body))

    def get_text_scores(self, keys: Sequence[bytes]) -> dict[bytes, tuple[float, ...]]:
        """The stored scores of those ``keys`` (32-byte digests) that have them.

        A damaged entry (its checksum does not match) is left out and removed, as a
        damaged answer is: its pair is scored again.
        """
        found: dict[bytes, tuple[float, ...]] = {}
        damaged: list[tuple[bytes]] = []
        for start in range(0, len(keys), _LOOKUP_BATCH):
            batch = tuple(keys[start:start + _LOOKUP_BATCH])
            marks = ",".join("?" * len(batch))
            with self._lock:
                rows = self._run("read_all", "SELECT key, body FROM text_scores WHERE key IN "
                                 f"({marks})", batch)
            for key, body in rows or ():
                key, body = bytes(key), bytes(body)
                values = body[:-16]
                if (len(body) > 16 and len(values) % 8 == 0
                        and body[-16:] == _checksum(key, values)):
                    found[key] = struct.unpack(f"<{len(values) // 8}d", values)
                else:
                    damaged.append((key,))
        if damaged:
            self.damaged_text_scores += len(damaged)
            self._once("damaged scores", f"ragev: damaged text-metric entries in {self.path} "
                       "were ignored (checksum mismatch); those pairs are scored again")
            with self._lock:
                self._run("write_many", "DELETE FROM text_scores WHERE key = ?", damaged)
        return found

    def put_text_scores(self, entries: Sequence[tuple[bytes, Sequence[float]]]) -> None:
        """Store scores: ``(key, values)`` each (six text metrics, one similarity), in one
        transaction. Never raises for the store itself (a failed write warns once and is
        skipped)."""
        rows = []
        for key, values in entries:
            packed = struct.pack(f"<{len(values)}d", *values)
            rows.append((key, packed + _checksum(key, packed)))
        if rows:
            with self._lock:
                self._run("write_many", "INSERT OR REPLACE INTO text_scores (key, body) "
                          "VALUES (?, ?)", rows)

    def close(self) -> None:
        """Close the database (a later call opens it again)."""
        with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None and self._pid == os.getpid():
                with contextlib.suppress(Exception):
                    connection.close()

    # -- the database
    def _run(self, kind: str, sql: str, parameters: Sequence[Any]) -> Any:
        """Run one statement (under ``self._lock``); ``None`` and a warning on any failure.

        ``kind``: ``"read"`` (the first row), ``"read_all"`` (every row), ``"write"``, or
        ``"write_many"`` (the statement once per row of ``parameters``, one transaction).
        """
        reading = kind.startswith("read")
        if not (self._readable if reading else self._writable):
            return None
        import sqlite3

        for attempt in range(2):
            connection = self._connect()
            if connection is None:
                return None
            try:
                if kind == "write_many":
                    with connection:  # BEGIN ... COMMIT (ROLLBACK on an error)
                        connection.execute("BEGIN IMMEDIATE")  # the write lock, waited for
                        connection.executemany(sql, parameters)
                    return None
                cursor = connection.execute(sql, parameters)
                if kind == "read":
                    return cursor.fetchone()
                return cursor.fetchall() if kind == "read_all" else None
            except sqlite3.DatabaseError as error:
                if attempt == 0 and _is_corrupt(error):
                    self._set_aside(error)
                    continue
                if reading:
                    self._readable = False
                self._writable = False
                self._once("unusable", f"ragev: the answer cache {self.path} failed "
                           f"({_describe(error)}); going on without it")
                return None
        return None

    def _connect(self) -> Any:
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        # After a fork the parent's connection must not be used: open our own.
        self._connection = None
        try:
            import sqlite3
        except ImportError:  # a Python built without sqlite3
            self._readable = self._writable = False
            self._once("unusable", "ragev: this Python has no sqlite3 module; answers are "
                       "not cached")
            return None
        for attempt in range(2):
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT,
                                             isolation_level=None, check_same_thread=False)
                try:
                    _set_up(connection)
                except BaseException:
                    connection.close()
                    raise
            except sqlite3.DatabaseError as error:
                if attempt == 0 and _is_corrupt(error):
                    self._set_aside(error)
                    continue
                self._disable(error)
                return None
            except OSError as error:
                self._disable(error)
                return None
            self._connection, self._pid = connection, os.getpid()
            return connection
        return None

    def _set_aside(self, error: Exception) -> None:
        """Move a database that is not one aside (``answers.sqlite.damaged``) and start anew."""
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
        self._connection = None
        self._once("corrupt", f"ragev: the answer cache {self.path} is damaged "
                   f"({_describe(error)}); moved aside to {DATABASE}.damaged, starting afresh")
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.replace(f"{self.path}{suffix}", f"{self.path}.damaged{suffix}")

    def _disable(self, error: Exception) -> None:
        self._readable = self._writable = False
        self._once("unusable", f"ragev: the answer cache {self.path} cannot be used "
                   f"({_describe(error)}); going on without it")

    def _once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self._warn(message)


def _set_up(connection: Any) -> None:
    """WAL mode and the table, retried while another process holds the lock.

    Two xdist workers opening a new database at once race here: switching to WAL and a
    ``CREATE TABLE IF NOT EXISTS`` that must upgrade its read to a write can answer
    "database is locked" at once, without SQLite's busy handler (which only covers
    waiting for a lock, not a snapshot gone stale). So wait and try again, up to
    :data:`BUSY_TIMEOUT`, as the busy handler would have.
    """
    import sqlite3

    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.005
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a commit survives a killed process (not a power cut).
            connection.execute("PRAGMA synchronous=NORMAL")
            # BEGIN IMMEDIATE takes the write lock first, under the busy handler.
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(_SCHEMA)
                connection.execute(_SCORES_SCHEMA)
                connection.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):
                    connection.execute("ROLLBACK")
                raise
            return
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


def _is_busy(error: Exception) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text


def _key_bytes(key: str) -> bytes | None:
    if len(key) != 64:
        return None
    try:
        return bytes.fromhex(key)
    except ValueError:
        return None


def _is_corrupt(error: Exception) -> bool:
    text = str(error).lower()
    return "not a database" in text or "malformed" in text


def _describe(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def _encode_item(item: Retrieved) -> Any:
    # ints and strs stay themselves (JSON keeps them apart); chunks become objects.
    if isinstance(item, bool):
        raise TypeError("a retrieved item is a bool; use passage ids (int), texts or chunks")
    if isinstance(item, int | str):
        return item
    # Chunk first (checked in order): the runtime Protocol check costs some 50 µs an item.
    if isinstance(item, (Chunk, ChunkLike)):
        passage_id = getattr(item, "passage_id", None)
        score = getattr(item, "score", None)
        if passage_id is not None and not is_passage_id(passage_id):
            raise TypeError(f"chunk passage_id {passage_id!r} is not an int")
        # numbers.Real: FAISS-style pipelines give numpy.float32 scores.
        if score is not None and (isinstance(score, bool) or not isinstance(score, Real)):
            raise TypeError(f"chunk score {score!r} is not a number")
        return {"text": str(item.text),
                "passage_id": None if passage_id is None else int(passage_id),
                "score": None if score is None else _number(float(score))}
    if is_passage_id(item):  # a numpy integer id, stored as the plain int it stands for
        return int(item)
    raise TypeError(f"cannot cache a retrieved item of type {type(item).__name__}")


def _number(value: float) -> Any:
    # JSON has no NaN/inf: keep them as tagged strings so they come back as floats.
    return value if math.isfinite(value) else {"float": repr(value)}


def _decode_number(value: Any) -> float | None:
    kind = type(value)
    if value is None:
        return None
    if kind is float:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    if kind is dict:
        return float(value["float"])
    raise TypeError("bad score")


def _decode(entry: Any, key: str) -> Answer | None:
    # Every answer of a cached rerun comes through here: types are checked with
    # ``type(x) is``, which is exact for what json.loads makes (it never makes a
    # subclass, and a bool is not an int there), at a third of isinstance's cost
    # with a union; the chunks are made positionally (about 21 -> 17 µs for ten chunks).
    if type(entry) is not dict or entry.get("format") != FORMAT or entry.get("key") != key:
        return None
    text = entry["text"]
    meta = entry["meta"]
    items = entry["retrieved"]
    if type(text) is not str or type(meta) is not dict or type(items) is not list:
        return None
    retrieved: list[Retrieved] = []
    append = retrieved.append
    for item in items:
        kind = type(item)
        if kind is int or kind is str:
            append(item)
        elif kind is dict:
            chunk_text = item.get("text")
            passage_id = item.get("passage_id")
            if type(chunk_text) is not str or (passage_id is not None
                                               and type(passage_id) is not int):
                return None
            append(Chunk(chunk_text, passage_id, _decode_number(item.get("score"))))
        else:
            return None
    return Answer(retrieved=retrieved, text=text, meta=meta)


def _json_safe(value: Any, where: str) -> Any:
    """``value`` if it survives a JSON round trip unchanged; ``TypeError`` naming the spot."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"Answer.{where} = {value!r} is not JSON-safe (NaN/inf); use None")
        return value
    if isinstance(value, list):
        return [_json_safe(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                raise TypeError(f"Answer.{where} has the non-string key {name!r}; JSON keys "
                                "are strings")
            out[name] = _json_safe(item, f"{where}[{name!r}]")
        return out
    raise TypeError(
        f"Answer.{where} holds a {type(value).__name__} ({str(value)[:40]!r}), which is not "
        "JSON-safe; store str, int, float, bool, None, lists and dicts"
    )
