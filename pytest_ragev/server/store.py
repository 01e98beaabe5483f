"""The server's durable state: one SQLite database (stdlib ``sqlite3``, WAL) in the workspace.

Three tables: ``keys`` (salted digests, roles, tenants), ``tasks`` (one row per
evaluation, everything the API answers with) and ``sessions`` (dashboard logins).
Each thread gets its own connection; WAL lets the request loop read while the runner
threads write. ``synchronous=NORMAL``: a committed row survives a crash of the
process (``kill -9``), which is what a restart must not lose.

A write waits up to ``busy_timeout`` seconds for a lock another process holds; the
API's store waits briefly (a request answers 503 rather than hang), the runner's long
(it retries until the cause is gone). :func:`storage_problem` says, in one line with
the fix, why the database could not be used: locked, a full disk, a read-only folder.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_ragev.server.keys import StoredKey

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS keys (
    id TEXT PRIMARY KEY,
    salt BLOB NOT NULL,
    digest BLOB NOT NULL,
    role TEXT NOT NULL,
    capability TEXT NOT NULL,
    tenant INTEGER NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    tenant_id INTEGER NOT NULL,
    dataset_id TEXT NOT NULL,
    config TEXT NOT NULL,
    knowledge_base_id TEXT NOT NULL,
    chat_id TEXT,
    rerank_id TEXT,
    variants TEXT NOT NULL DEFAULT '[]',
    limit_n INTEGER,
    profile TEXT,
    status INTEGER NOT NULL,
    err_msg TEXT NOT NULL DEFAULT '',
    total INTEGER NOT NULL DEFAULT 0,
    finished INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL,
    start_time TEXT NOT NULL,
    end_time TEXT,
    duration REAL,
    params TEXT,
    metric TEXT,
    verdict TEXT,
    run_id TEXT,
    embedding_id TEXT,
    phase TEXT,
    judge_id TEXT,
    pid INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tasks_by_tenant ON tasks (tenant_id, created_ms DESC);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks (status, created_ms);
CREATE TABLE IF NOT EXISTS sessions (
    digest TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    expires REAL NOT NULL
);
"""

#: Columns of ``tasks`` stored as JSON text.
_JSON_COLUMNS = ("variants", "params", "metric", "verdict", "phase")
#: Columns added to ``tasks`` after schema 1 was first written: added in place when an
#: older database lacks them (nullable, so older rows read as before).
_ADDED_COLUMNS = {"embedding_id": "TEXT", "phase": "TEXT", "judge_id": "TEXT"}
#: Columns a list view needs (no params: they are the large part of a row).
_SUMMARY_COLUMNS = (
    "id", "tenant_id", "dataset_id", "config", "knowledge_base_id", "embedding_id", "chat_id",
    "rerank_id", "judge_id", "variants", "limit_n", "profile", "status", "err_msg", "total",
    "finished", "created_ms", "start_time", "end_time", "duration", "metric", "verdict", "phase",
)


#: A task's ``task`` and ``request`` objects as SQLite builds them (schemas.task_json and
#: schemas.request_json build the same from a parsed row; a unit test holds them equal).
_TASK_JSON = (
    "json_object('id', id, 'tenant_id', tenant_id, 'dataset_id', dataset_id, "
    "'start_time', start_time, 'status', status, 'err_msg', err_msg, 'total', total, "
    "'finished', finished, 'end_time', end_time, 'duration', duration)")
_REQUEST_JSON = (
    "json_object('config', config, 'knowledge_base_id', knowledge_base_id, "
    "'embedding_id', embedding_id, 'chat_id', chat_id, 'rerank_id', rerank_id, "
    "'judge_id', judge_id, "
    "'variant', json(variants), 'limit', limit_n, 'profile', profile)")


def now_iso() -> str:
    """The current time as the report writes it (UTC, milliseconds)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class TaskFilter:
    """What ``GET /api/v1/evaluations`` narrows the list to."""

    tenant: int
    status: int | None = None
    dataset_id: str | None = None
    config: str | None = None


class StoreError(Exception):
    """The database file cannot be used (another schema version, not a database)."""


def storage_problem(exc: BaseException, where: Path) -> str | None:
    """One line saying why the database or the workspace could not be written, with the
    fix; ``None`` for an error that is not about the storage (a bug)."""
    if isinstance(exc, sqlite3.Error):
        text = str(exc).lower()
        if "locked" in text or "busy" in text:
            return (f"the server's database {where} is locked by another process; try "
                    "again once it lets go")
        if "full" in text:
            return f"the disk of {where} is full; free space and try again"
        if "readonly" in text or "read-only" in text:
            return f"{where} is read-only; make it writable and try again"
        if "unable to open" in text or "disk i/o" in text:
            return (f"the server cannot use its database {where} ({exc}); check that the "
                    "workspace is there, writable and has space, then try again")
        return None
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"the disk of {where} is full; free space and try again"
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return f"{where} is not writable ({exc.strerror}); make it writable and try again"
    return None


class Store:
    """The database of one workspace; safe to share between threads."""

    def __init__(self, path: Path, *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            conn = self._conn()
            with conn:
                conn.executescript(_SCHEMA)
                row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
                if row is None:
                    conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
                elif row[0] != str(SCHEMA_VERSION):
                    raise StoreError(
                        f"{self.path}: database schema {row[0]}, this pytest-ragev uses "
                        f"{SCHEMA_VERSION}; use a new --workspace"
                    )
                present = {str(r[1]) for r in conn.execute("PRAGMA table_info(tasks)")}
                for name, kind in _ADDED_COLUMNS.items():
                    if name not in present:
                        conn.execute(f"ALTER TABLE tasks ADD COLUMN {name} {kind}")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable SQLite database ({exc})") from None

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection (at shutdown)."""
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.ProgrammingError):  # another thread's
                    conn.close()
            self._all.clear()
        self._local = threading.local()

    def journal_mode(self) -> str:
        """The journal mode in force (``wal``)."""
        return str(self._conn().execute("PRAGMA journal_mode").fetchone()[0])

    # ------------------------------------------------------------------ keys
    def add_key(self, key: StoredKey) -> None:
        """Store a new key's record."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO keys (id, salt, digest, role, capability, tenant, name, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key.key_id, key.salt, key.digest, key.role, key.capability, key.tenant,
                 key.name, now_iso()),
            )

    def key(self, key_id: str) -> StoredKey | None:
        """The stored key ``key_id`` (revoked ones too), or ``None``."""
        row = self._conn().execute("SELECT * FROM keys WHERE id = ?", (key_id,)).fetchone()
        if row is None:
            return None
        return StoredKey(
            key_id=row["id"], salt=bytes(row["salt"]), digest=bytes(row["digest"]),
            role=row["role"], capability=row["capability"], tenant=int(row["tenant"]),
            name=row["name"], revoked=row["revoked_at"] is not None,
        )

    def keys(self) -> list[dict[str, Any]]:
        """Every key's public fields, oldest first."""
        rows = self._conn().execute(
            "SELECT id, role, capability, tenant, name, created_at, revoked_at FROM keys "
            "ORDER BY created_at, id"
        ).fetchall()
        return [dict(row) for row in rows]

    def revoke_key(self, key_id: str) -> bool:
        """Revoke ``key_id``; False when there is no such key or it was revoked already."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now_iso(), key_id),
            )
            return cursor.rowcount == 1

    # -------------------------------------------------------------- sessions
    @staticmethod
    def _session_digest(token: str) -> str:
        return hashlib.sha256(token.encode("utf-8")).hexdigest()

    def add_session(self, token: str, key_id: str, lifetime: float) -> None:
        """Remember a dashboard login (only the token's digest is stored)."""
        with self._write() as conn:
            conn.execute("DELETE FROM sessions WHERE expires < ?", (time.time(),))
            conn.execute(
                "INSERT INTO sessions VALUES (?, ?, ?)",
                (self._session_digest(token), key_id, time.time() + lifetime),
            )

    def session_key(self, token: str) -> str | None:
        """The key id of a live dashboard session, or ``None``."""
        row = self._conn().execute(
            "SELECT key_id FROM sessions WHERE digest = ? AND expires > ?",
            (self._session_digest(token), time.time()),
        ).fetchone()
        return None if row is None else str(row[0])

    def drop_session(self, token: str) -> None:
        """Log a dashboard session out."""
        with self._write() as conn:
            conn.execute("DELETE FROM sessions WHERE digest = ?", (self._session_digest(token),))

    # ----------------------------------------------------------------- tasks
    def add_task(self, task: Mapping[str, Any]) -> None:
        """Insert a new task row (JSON columns given as Python values)."""
        values = {k: (_dumps(v) if k in _JSON_COLUMNS else v) for k, v in task.items()}
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        with self._write() as conn:
            conn.execute(f"INSERT INTO tasks ({names}) VALUES ({marks})", tuple(values.values()))

    def update_task(self, task_id: str, **fields: Any) -> None:
        """Set some columns of one task (JSON columns given as Python values)."""
        if not fields:
            return
        values = {k: (_dumps(v) if k in _JSON_COLUMNS else v) for k, v in fields.items()}
        assignments = ", ".join(f"{name} = ?" for name in values)
        with self._write() as conn:
            conn.execute(
                f"UPDATE tasks SET {assignments} WHERE id = ?", (*values.values(), task_id)
            )

    def claim_cancel(self, task_id: str) -> None:
        """Mark a task as asked to stop."""
        self.update_task(task_id, cancel_requested=1)

    def task(self, task_id: str, *, tenant: int | None = None) -> dict[str, Any] | None:
        """One task row (JSON columns parsed), or ``None``; with ``tenant``, only its own."""
        sql = "SELECT * FROM tasks WHERE id = ?"
        args: tuple[Any, ...] = (task_id,)
        if tenant is not None:
            sql += " AND tenant_id = ?"
            args = (task_id, tenant)
        row = self._conn().execute(sql, args).fetchone()
        return None if row is None else _row(row)

    def tasks(
        self, where: TaskFilter, *, offset: int = 0, limit: int = 20
    ) -> tuple[int, list[dict[str, Any]]]:
        """``(total, rows)`` of one page of a tenant's tasks, newest first."""
        condition, args = self._condition(where)
        conn = self._conn()
        total = int(conn.execute(f"SELECT COUNT(*) FROM tasks WHERE {condition}", args)
                    .fetchone()[0])
        rows = conn.execute(
            f"SELECT {', '.join(_SUMMARY_COLUMNS)} FROM tasks WHERE {condition} "
            "ORDER BY created_ms DESC, id DESC LIMIT ? OFFSET ?",
            (*args, limit, offset),
        ).fetchall()
        return total, [_row(row) for row in rows]

    @staticmethod
    def _condition(where: TaskFilter) -> tuple[str, list[Any]]:
        clauses: list[str] = ["tenant_id = ?"]
        args: list[Any] = [where.tenant]
        if where.status is not None:
            clauses.append("status = ?")
            args.append(where.status)
        if where.dataset_id is not None:
            clauses.append("dataset_id = ?")
            args.append(where.dataset_id)
        if where.config is not None:
            clauses.append("config = ?")
            args.append(where.config)
        return " AND ".join(clauses), args

    def summaries_json(
        self, where: TaskFilter, *, offset: int = 0, limit: int = 20
    ) -> tuple[int, list[str]]:
        """:meth:`tasks`, each row already as the list endpoint's JSON object.

        SQLite builds the JSON (``json_object``) and the stored JSON columns go in as
        they are, so listing 1,000 tasks parses and re-serialises nothing in Python.
        """
        condition, args = self._condition(where)
        conn = self._conn()
        total = int(conn.execute(f"SELECT COUNT(*) FROM tasks WHERE {condition}", args)
                    .fetchone()[0])
        rows = conn.execute(
            f"SELECT json_object('task', {_TASK_JSON}, 'metric', json(metric), "
            f"'request', {_REQUEST_JSON}, 'verdict', json(verdict), 'phase', json(phase)) "
            f"FROM tasks WHERE {condition} ORDER BY created_ms DESC, id DESC LIMIT ? OFFSET ?",
            (*args, limit, offset),
        ).fetchall()
        return total, [str(row[0]) for row in rows]

    def detail_json(self, task_id: str, tenant: int) -> tuple[int, str] | None:
        """The status and the detail endpoint's ``data`` of the tenant's task as JSON text,
        built by SQLite from the stored JSON columns (nothing parsed and encoded again in
        Python: the endpoint pollers hit while a task runs); ``None``: no such task of
        this tenant. ``queue_position`` is ``null``: a queued task's is the caller's."""
        row = self._conn().execute(
            "SELECT status, json_object("
            f"'task', {_TASK_JSON}, 'params', json(params), 'metric', json(metric), "
            f"'request', {_REQUEST_JSON}, 'verdict', json(verdict), 'queue_position', NULL, "
            "'phase', json(phase)) FROM tasks WHERE id = ? AND tenant_id = ?",
            (task_id, tenant),
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def history(self, tenant: int, dataset_id: str, config: str,
                limit: int | None = None) -> list[dict[str, Any]]:
        """Finished tasks of one dataset, config and question limit (``None``: full runs),
        oldest first (for trend charts: a run of the first 3 questions is no point on the
        line of the full runs)."""
        rows = self._conn().execute(
            "SELECT id, created_ms, start_time, metric, limit_n FROM tasks WHERE tenant_id = ? "
            "AND dataset_id = ? AND config = ? AND status = 2 AND limit_n IS ? "
            "ORDER BY created_ms, id",
            (tenant, dataset_id, config, limit),
        ).fetchall()
        return [_row(row) for row in rows]

    def series_names(self, tenant: int) -> list[tuple[str, str, int | None]]:
        """The distinct ``(dataset_id, config, limit)`` triples with finished tasks."""
        rows = self._conn().execute(
            "SELECT DISTINCT dataset_id, config, limit_n FROM tasks WHERE tenant_id = ? "
            "AND status = 2 ORDER BY dataset_id, config, limit_n IS NOT NULL, limit_n",
            (tenant,),
        ).fetchall()
        return [(str(row[0]), str(row[1]), None if row[2] is None else int(row[2]))
                for row in rows]

    def unfinished(self) -> list[dict[str, Any]]:
        """Tasks not yet finished (status 0 or 1), oldest first."""
        rows = self._conn().execute(
            "SELECT * FROM tasks WHERE status IN (0, 1) ORDER BY created_ms, id"
        ).fetchall()
        return [_row(row) for row in rows]

    def pending_ids(self) -> list[str]:
        """Ids of tasks waiting to run (status 0, not started), oldest first."""
        rows = self._conn().execute(
            "SELECT id FROM tasks WHERE status = 0 AND pid IS NULL ORDER BY created_ms, id"
        ).fetchall()
        return [str(row[0]) for row in rows]


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False)


def _row(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    for name in _JSON_COLUMNS:
        if name in out and out[name] is not None:
            out[name] = json.loads(out[name])
    return out

