"""The objects behind the routes of ``ragev serve``, and who is calling.

One :class:`Service` per application (``app.state.service``, handed to endpoints by
:func:`pytest_ragev.server.dependencies.get_service`): the settings, the SQLite store,
the catalog, the runner, a short-lived cache of keys, and the task questions the routes
of the API and of the dashboard both ask (whose task is it, what are its samples, its
variants, its runs).
"""

from __future__ import annotations

import json
import time
import tomllib
from typing import Any

from fastapi import Request

from pytest_ragev.core.errors import RagevError
from pytest_ragev.report.reader import runs_from_report
from pytest_ragev.server import lock
from pytest_ragev.server.catalog import Catalog
from pytest_ragev.server.envelope import ApiError
from pytest_ragev.server.keys import (
    Action,
    Principal,
    StoredKey,
    key_from_headers,
    split_key,
    verify,
)
from pytest_ragev.server.runner import Runner
from pytest_ragev.server.settings import ServerSettings
from pytest_ragev.server.store import Store

#: The dashboard's login cookie: a session token (never the key) the store maps to a key.
SESSION_COOKIE = "ragev_session"
#: How long a key read from the store is trusted, in seconds (see Service.stored_key).
KEY_TTL = 2.0
#: Seconds a request's write waits for a database another process holds locked, before
#: it answers 503; the runner's writes wait as long, then retry until they go through.
BUSY_TIMEOUT = 5.0


class Service:
    """The objects behind the routes: settings, database, catalog, runner, key cache.

    It holds the workspace's lock (:mod:`.lock`) from its start: one server per workspace.
    """

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        settings.workspace.mkdir(parents=True, exist_ok=True)
        lock.hold(settings.lock_file, url=f"http://{settings.host}:{settings.port}/")
        settings.tasks_dir.mkdir(parents=True, exist_ok=True)
        self.store = Store(settings.database, busy_timeout=BUSY_TIMEOUT)
        self.catalog = Catalog(settings.configs,
                               exclude=(settings.workspace, settings.cache))
        self.runner = Runner(settings, Store(settings.database, busy_timeout=BUSY_TIMEOUT),
                             self.catalog)
        self._keys: dict[str, tuple[float, StoredKey | None]] = {}
        self._samples: dict[str, tuple[tuple[int, int], list[dict[str, Any]]]] = {}

    def close(self) -> None:
        """Stop the runner (running evaluations are queued again), close the databases
        and let go of the workspace."""
        self.runner.stop()
        self.runner.store.close()
        self.store.close()
        lock.release(self.settings.lock_file)

    # ------------------------------------------------------------- identity
    def stored_key(self, key_id: str) -> StoredKey | None:
        """The stored record of ``key_id`` (``None`` when there is none), cached briefly."""
        # Keys change rarely (`ragev serve keys ...` in another process): a revoked key
        # stops working within KEY_TTL seconds, and a request costs no database read.
        now = time.monotonic()
        cached = self._keys.get(key_id)
        if cached is not None and now - cached[0] < KEY_TTL:
            return cached[1]
        stored = self.store.key(key_id)
        if len(self._keys) > 10_000:
            self._keys.clear()
        self._keys[key_id] = (now, stored)
        return stored

    def principal(self, request: Request, *, cookie: bool) -> Principal:
        """Who sent ``request``; 401 without a valid key (or, for reads, a dashboard login)."""
        text = key_from_headers(request.headers.get("x-api-key"),
                                request.headers.get("authorization"))
        if text is None and cookie:
            token = request.cookies.get(SESSION_COOKIE)
            key_id = self.store.session_key(token) if token else None
            stored = self.stored_key(key_id) if key_id else None
            if stored is not None and not stored.revoked:
                request.scope["state"]["key_id"] = stored.key_id
                return stored.principal
        if text is None:
            raise ApiError(401, "missing API key; send it as X-API-Key or "
                                "Authorization: Bearer <key>",
                           headers={"WWW-Authenticate": "Bearer"})
        parts = split_key(text)
        stored = self.stored_key(parts[0]) if parts else None
        if parts is None or not verify(stored, parts[1]) or stored is None:
            raise ApiError(401, "invalid or revoked API key",
                           headers={"WWW-Authenticate": "Bearer"})
        request.scope["state"]["key_id"] = stored.key_id
        return stored.principal

    def authorize(self, request: Request, action: Action) -> Principal:
        """Who sent ``request``, if that key may ``action``: 401 without a valid key, 403
        with one that may not. A dashboard login counts for reads only: creating and
        cancelling take the key itself, in a header."""
        principal = self.principal(request, cookie=action == "read")
        if principal.may(action):
            return principal
        if action == "read":
            raise ApiError(403, f"key {principal.key_id} may not read evaluations")
        raise ApiError(
            403, f"key {principal.key_id} ({principal.role}, capability "
                 f"{principal.capability}) may not run evaluations; that needs an admin key "
                 "with run_evaluations or full_access")

    def own_task(self, principal: Principal, task_id: str) -> dict[str, Any]:
        """The stored row of the caller's task ``task_id``; 404 otherwise."""
        # Another tenant's task answers exactly like a task that does not exist.
        row = self.store.task(task_id, tenant=principal.tenant)
        if row is None:
            raise ApiError(404, f"no evaluation task {task_id!r}", field="task_id")
        return row

    # ------------------------------------------------------------- samples
    def samples(self, row: dict[str, Any], variant: str | None) -> list[dict[str, Any]]:
        """The task's per-question records: the final report's, or the run's lines so far
        (``--ragev-samples``), in the final report's shape."""
        folder = self.settings.tasks_dir / row["id"]
        final = row["status"] in (2, 3)
        path = folder / ("report.json" if final else "records.jsonl")
        try:
            info = path.stat()
        except OSError:
            return []
        stamp = (info.st_mtime_ns, info.st_size)
        key = f"{row['id']}:{variant}"
        cached = self._samples.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        items: list[dict[str, Any]] = []
        try:
            text = path.read_text(encoding="utf-8")
            if final:
                data = json.loads(text).get("data") or {}
                if variant is None:
                    items = list(data.get("samples") or [])
                else:
                    items = list(((data.get("variants") or {}).get(variant) or {})
                                 .get("samples") or [])
            else:
                for line in text.splitlines():
                    sample = json.loads(line)
                    if sample.get("variant") == variant:
                        if variant is None:  # as the report's samples: no variant key
                            sample.pop("variant", None)
                        items.append(sample)
                items.sort(key=lambda s: int(s.get("qid", 0)))
        except (OSError, ValueError, AttributeError):
            items = []
        if len(self._samples) > 32:
            self._samples.clear()
        self._samples[key] = (stamp, items)
        return items

    def task_variants(self, row: dict[str, Any]) -> list[str]:
        """The configurations a task runs, as ``variant`` names them (``base``: the base
        configuration): those the request chose, else the base and every variant of its
        config (the task folder's copy; the catalog's before the task started)."""
        if row["variants"]:
            return [str(name) for name in row["variants"]]
        try:
            text = (self.settings.tasks_dir / row["id"] / "config.toml").read_text("utf-8")
            variants = tomllib.loads(text).get("variants") or []
            configured = [str(v.get("name")) for v in variants if isinstance(v, dict)]
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            entry = next((e for e in self.catalog.configs_list()
                          if e.name == row["knowledge_base_id"]), None)
            configured = list(entry.variants) if entry is not None else []
        return ["base", *configured]

    def report_runs(self, row: dict[str, Any]) -> list[Any]:
        """The runs of a finished task's ``report.json`` (404 when it has none)."""
        path = self.settings.tasks_dir / row["id"] / "report.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ApiError(404, f"evaluation {row['id']!r} has no report ({exc})") from None
        try:
            return runs_from_report(data, source=f"report of {row['id']}")
        except RagevError as exc:
            raise ApiError(404, str(exc)) from None
