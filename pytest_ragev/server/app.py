"""The ASGI application of ``ragev serve``: the evaluation API and the dashboard (FastAPI).

``uvicorn`` imports :func:`app_from_environment` by name (``ragev serve`` passes the
settings in ``$RAGEV_SERVE_SETTINGS``); tests and embedders call :func:`create_app`.
Every answer is JSON in the original's envelope (``{"success": true, "data": ...}``
or ``{"success": false, "error": {"code", "message", "details"}}``) except the
dashboard's HTML pages; bad input is a 4xx naming the field, never a traceback.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import secrets
import time
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qs, urlencode

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.redact import is_secret_key
from pytest_ragev.core.tables import suggest
from pytest_ragev.core.task import make_task_id
from pytest_ragev.report.reader import runs_from_report
from pytest_ragev.server import dashboard
from pytest_ragev.server.catalog import Catalog, FieldError
from pytest_ragev.server.keys import Principal, StoredKey, key_from_headers, split_key, verify
from pytest_ragev.server.runner import Conflict, Runner
from pytest_ragev.server.schemas import (
    CancelEvaluation,
    CreateEvaluation,
    DetailEnvelope,
    ErrorEnvelope,
    ListEnvelope,
    PageEnvelope,
    TaskEnvelope,
)
from pytest_ragev.server.settings import ServerSettings
from pytest_ragev.server.store import Store, TaskFilter, now_iso

access_log = logging.getLogger("ragev.access")
log = logging.getLogger("ragev.server")

#: The original's error codes (``internal/errors``), by HTTP status.
_CODES = {400: 1000, 401: 1001, 403: 1002, 404: 1003, 405: 1004, 409: 1005, 413: 1000,
          422: 1010, 500: 1007}
_SESSION_COOKIE = "ragev_session"
_KEY_TTL = 2.0
#: What each error status means, as the OpenAPI document says it.
_ERROR_MEANINGS = {
    400: "bad input in the body or a query parameter (malformed JSON, a wrong type, an "
         "unknown field or name; error.details.field names it), or a server catalog that "
         "does not load",
    401: "missing, invalid or revoked API key",
    403: "the key may not run evaluations: that needs an admin key with run_evaluations "
         "or full_access",
    404: "no such task (another tenant's task answers the same)",
    409: "the task has already finished",
    413: "request body larger than the server's limit (64 KiB by default)",
}
#: The security schemes of the API: the original's header, or a bearer token.
SECURITY_SCHEMES = {
    "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key",
               "description": "an API key of `ragev serve keys create`"},
    "Bearer": {"type": "http", "scheme": "bearer",
               "description": "the same API key, as `Authorization: Bearer <key>`"},
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error responses a route really sends, for its OpenAPI entry."""
    return {status: {"model": ErrorEnvelope, "description": _ERROR_MEANINGS[status]}
            for status in statuses}
_CREATE_FIELDS = tuple(CreateEvaluation.model_fields)
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
#: The inline scripts of a plugin HTML report (it writes them bare: ``<script>...</script>``;
#: the report's own text is escaped, so no question can open one).
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def report_headers(page: str) -> dict[str, str]:
    """The headers of a run's HTML report: its own inline scripts may run (the sortable,
    filterable questions table), by hash, and nothing else; the document is sandboxed
    without ``allow-same-origin``, so those scripts get an origin of their own: no
    cookie, no request to this server, no reach into the dashboard around them."""
    hashes = sorted({
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest())
        .decode("ascii") + "'"
        for script in _INLINE_SCRIPT.findall(page)
    })
    scripts = f"script-src {' '.join(hashes)}; " if hashes else ""
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; {scripts}"
            "frame-ancestors 'self'; base-uri 'none'; form-action 'none'; "
            "sandbox allow-scripts"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


class ApiError(Exception):
    """An answer other than 200: the status, one line, and the field it is about."""

    def __init__(self, status: int, message: str, *, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers


def error_response(status: int, message: str, *, field: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """The original's error envelope."""
    details = {"field": field} if field else None
    body = {"success": False,
            "error": {"code": _CODES.get(status, 1000), "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers)


def ok(data: Any) -> JSONResponse:
    """``{"success": true, "data": data}``."""
    return JSONResponse({"success": True, "data": data})


# ------------------------------------------------------------------ middleware
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """Outermost layer: body-size limit, one log line per request, no traceback ever.

    Bodies are read here in full (they are small: ``max_body`` bytes at most), so a
    too-large one is answered 413 before any handler runs, whether or not the client
    sent a ``Content-Length``.
    """

    def __init__(self, app: ASGIApp, *, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: list[int] = []
        scope.setdefault("state", {})

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            body = await self._body(scope, receive)
            if body is None:
                await _send_json(sending, 413, f"request body larger than {self.max_body} bytes")
            else:
                replayed = False

                async def replay() -> Message:
                    nonlocal replayed
                    if not replayed:
                        replayed = True
                        return {"type": "http.request", "body": body, "more_body": False}
                    return await receive()

                await self.app(scope, replay, sending)
        except Exception as exc:  # a bug: answer 500 once, log one line, never a traceback
            log.error("%s %s: internal error %s: %s", scope.get("method"), scope.get("path"),
                      type(exc).__name__, str(exc)[:200])
            if not status:
                await _send_json(sending, 500, "internal error; the server log has one line "
                                               "about it")
        finally:
            key_id = scope["state"].get("key_id") or "-"
            access_log.info(
                '%s "%s %s" %s %.1fms key=%s', _client(scope), scope.get("method"),
                _logged_path(scope), status[0] if status else "-",
                (time.perf_counter() - started) * 1000.0, key_id,
            )

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    if int(value) > self.max_body:
                        return None
                except ValueError:
                    pass
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


async def _send_json(send: Send, status: int, message: str) -> None:
    response = error_response(status, message)
    await send({"type": "http.response.start", "status": status,
                "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


def _logged_path(scope: Scope) -> str:
    """The path and query, with the value of any secret-looking parameter hidden."""
    path = str(scope.get("path", ""))
    query = scope.get("query_string", b"").decode("latin-1")
    if not query:
        return path
    pairs = parse_qs(query, keep_blank_values=True)
    shown = [(name, "***" if is_secret_key(name) else value)
             for name, values in pairs.items() for value in values]
    return f"{path}?{urlencode(shown)}"


# ---------------------------------------------------------------------- server
class Service:
    """The objects behind the routes: settings, database, catalog, runner, key cache."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        settings.tasks_dir.mkdir(parents=True, exist_ok=True)
        self.store = Store(settings.database)
        self.catalog = Catalog(settings.configs)
        self.runner = Runner(settings, self.store, self.catalog)
        self._keys: dict[str, tuple[float, StoredKey | None]] = {}
        self._samples: dict[str, tuple[tuple[int, int], list[dict[str, Any]]]] = {}

    # ------------------------------------------------------------- identity
    def stored_key(self, key_id: str) -> StoredKey | None:
        # Keys change rarely (`ragev serve keys ...` in another process): a revoked key
        # stops working within _KEY_TTL seconds, and a request costs no database read.
        now = time.monotonic()
        cached = self._keys.get(key_id)
        if cached is not None and now - cached[0] < _KEY_TTL:
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
            token = request.cookies.get(_SESSION_COOKIE)
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

    def reader(self, request: Request) -> Principal:
        principal = self.principal(request, cookie=True)
        if not principal.may("read"):
            raise ApiError(403, f"key {principal.key_id} may not read evaluations")
        return principal

    def runner_key(self, request: Request) -> Principal:
        principal = self.principal(request, cookie=False)
        if not principal.may("run"):
            raise ApiError(
                403, f"key {principal.key_id} ({principal.role}, capability "
                     f"{principal.capability}) may not run evaluations; that needs an admin key "
                     "with run_evaluations or full_access")
        return principal

    def authenticate(self, request: Request, access: Access) -> None:
        """Check the caller for ``access`` (401/403 otherwise) and keep who it is."""
        check = self.reader if access == "read" else self.runner_key
        request.scope["state"]["principal"] = check(request)

    @staticmethod
    def caller(request: Request) -> Principal:
        """Who sent ``request``, as :meth:`authenticate` found it."""
        principal = request.scope["state"].get("principal")
        if not isinstance(principal, Principal):  # a route without @requires: a bug
            raise RuntimeError(f"{request.url.path}: the route checks no key")
        return principal

    def own_task(self, principal: Principal, task_id: str) -> dict[str, Any]:
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
        path = self.settings.tasks_dir / row["id"] / "report.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ApiError(404, f"evaluation {row['id']!r} has no report ({exc})") from None
        try:
            return runs_from_report(data, source=f"report of {row['id']}")
        except RagevError as exc:
            raise ApiError(404, str(exc)) from None


#: Who may call a route: ``read`` (a viewer or admin key, or a dashboard login) or ``run``
#: (an admin key with run_evaluations or full_access).
Access = Literal["read", "run"]
_Endpoint = TypeVar("_Endpoint", bound=Callable[..., Any])
_ACCESS_ATTRIBUTE = "_ragev_access"


def requires(access: Access) -> Callable[[_Endpoint], _Endpoint]:
    """Mark an endpoint with the access it needs (put it below the route decorator)."""

    def mark(endpoint: _Endpoint) -> _Endpoint:
        setattr(endpoint, _ACCESS_ATTRIBUTE, access)
        return endpoint

    return mark


class AuthFirstRoute(APIRoute):
    """A route that checks the key before FastAPI reads the body and the query.

    FastAPI parses the JSON body before it resolves any dependency, so a key checked in
    a dependency or in the handler comes too late: a request with no key and a bad body
    would learn about the body (400) before hearing it may not ask (401). The check runs
    here, first, for every endpoint marked with :func:`requires`.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        access = getattr(self.endpoint, _ACCESS_ATTRIBUTE, None)
        if access is None:
            return handler

        async def checked(request: Request) -> Response:
            service: Service = request.app.state.service
            service.authenticate(request, access)
            return await handler(request)

        return checked


def _task_json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "tenant_id": row["tenant_id"], "dataset_id": row["dataset_id"],
        "start_time": row["start_time"], "status": row["status"], "err_msg": row["err_msg"],
        "total": row["total"], "finished": row["finished"], "end_time": row["end_time"],
        "duration": row["duration"],
    }


def _request_json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "config": row["config"], "knowledge_base_id": row["knowledge_base_id"],
        "chat_id": row["chat_id"], "rerank_id": row["rerank_id"],
        "variant": row["variants"] or [], "limit": row["limit_n"], "profile": row["profile"],
    }


def summary_json(row: dict[str, Any]) -> dict[str, Any]:
    """One row of the list endpoint."""
    return {"task": _task_json(row), "metric": row["metric"], "request": _request_json(row),
            "verdict": row["verdict"]}


def _field_of(loc: tuple[Any, ...]) -> str:
    # ("body", "variant", "list[str]", 0) -> "variant": the request's own field name.
    parts = [str(p) for p in loc if p not in ("body", "query", "header", "path")]
    return parts[0] if parts else "body"


def _validation_message(exc: RequestValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    kind = str(first.get("type", ""))
    field = _field_of(tuple(first.get("loc", ())))
    if kind == "json_invalid":
        where = first.get("ctx", {}).get("error", "")
        return "body", f"body: not valid JSON ({where}); send a JSON object"
    if kind == "extra_forbidden":
        name = field.rsplit(".", 1)[-1]
        return field, (f"{field}: unknown field; "
                       f"{suggest(name, _CREATE_FIELDS, noun='fields')}")
    if kind == "missing" and field == "body":
        return "body", "body: a JSON object is required"
    if kind == "model_attributes_type" or (field == "body" and kind.endswith("_type")):
        return "body", "body: send a JSON object"
    message = str(first.get("msg", "invalid value"))
    return field, f"{field}: {message[:1].lower()}{message[1:]}"


# ------------------------------------------------------------------------- app
def create_app(settings: ServerSettings) -> FastAPI:
    """The application for ``settings`` (the runner starts with the app's lifespan)."""
    service = Service(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.runner.start()
        log.info("ragev serve: workspace %s, configs %s, max %d parallel",
                 settings.workspace, settings.configs, settings.max_parallel)
        try:
            yield
        finally:
            service.runner.stop()
            service.store.close()

    app = FastAPI(
        title="pytest-ragev evaluation service",
        description=(
            "WeKnora's evaluation API on pytest-ragev: durable, with roles. Errors come in "
            "the original's envelope `{\"success\": false, \"error\": {\"code\", "
            "\"message\", \"details\"}}`; besides the responses listed per operation, an "
            "unknown path answers 404 and a method a path does not define 405 (with "
            "`Allow`)."
        ),
        version="1",
        docs_url=None, redoc_url=None,  # their pages load scripts from a CDN
        lifespan=lifespan,
    )
    app.state.service = service
    app.router.route_class = AuthFirstRoute  # every route added below

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return error_response(exc.status, exc.message, field=exc.field, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        field, message = _validation_message(exc)
        return error_response(400, message, field=field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return error_response(404, f"no route {request.url.path}")
        if exc.status_code == 405:
            allowed = sorted({
                method for route in app.router.routes
                if isinstance(route, APIRoute) and route.path_regex.match(request.url.path)
                for method in route.methods or ()
            })
            return error_response(405, f"{request.method} is not allowed on {request.url.path}; "
                                       f"use {', '.join(allowed)}",
                                  headers={"Allow": ", ".join(allowed)})
        return error_response(exc.status_code, str(exc.detail))

    # --------------------------------------------------------------- the API
    # The original's routes end in a slash (`/api/v1/evaluation/`); both spellings answer.
    @app.post("/api/v1/evaluation/", include_in_schema=False)
    @app.post("/api/v1/evaluation", response_model=TaskEnvelope,
              responses=_errors(400, 401, 403, 413),
              tags=["evaluation"], summary="create an evaluation task (returns at once)")
    @requires("run")
    async def create(body: CreateEvaluation, request: Request) -> Response:
        principal = service.caller(request)
        try:
            plan = service.catalog.plan(
                dataset_id=body.dataset_id, knowledge_base_id=body.knowledge_base_id,
                chat_id=body.chat_id, rerank_id=body.rerank_id, config=body.config,
                variants=body.variants(), limit=body.limit, profile=body.profile,
            )
        except FieldError as exc:
            raise ApiError(400, exc.message, field=exc.field) from None
        except RagevError as exc:
            raise ApiError(400, f"the server's catalog is invalid: {exc}") from None
        created_ms = int(time.time() * 1000)
        task_id = make_task_id(plan.dataset_id, principal.tenant, now_ms=created_ms)
        row = {
            "id": task_id, "tenant_id": principal.tenant, "dataset_id": plan.dataset_id,
            "config": plan.config, "knowledge_base_id": plan.knowledge_base_id,
            "chat_id": plan.chat_id, "rerank_id": plan.rerank_id,
            "variants": list(plan.variants), "limit_n": plan.limit, "profile": plan.profile,
            "status": 0, "err_msg": "", "total": 0, "finished": 0, "created_ms": created_ms,
            "start_time": now_iso(), "created_by": principal.key_id,
        }
        service.store.add_task(row)
        service.runner.wake()
        stored = service.store.task(task_id)
        assert stored is not None
        return ok(_task_json(stored))

    @app.get("/api/v1/evaluation/", include_in_schema=False)
    @app.get("/api/v1/evaluation", response_model=DetailEnvelope,
             responses=_errors(400, 401, 404),
             tags=["evaluation"], summary="an evaluation task's status, params and metrics")
    @requires("read")
    async def detail(request: Request,
                     task_id: str = Query(..., min_length=1, max_length=300)) -> Response:
        principal = service.caller(request)
        row = service.own_task(principal, task_id)
        data = {
            "task": _task_json(row), "params": row["params"], "metric": row["metric"],
            "request": _request_json(row), "verdict": row["verdict"],
            "queue_position": service.runner.queue_position(task_id)
            if row["status"] == 0 else None,
        }
        return ok(data)

    @app.get("/api/v1/evaluations", response_model=PageEnvelope,
             responses=_errors(400, 401),
             tags=["evaluation"], summary="the tenant's tasks, newest first")
    @requires("read")
    async def listing(
        request: Request,
        page: int = Query(1, ge=1, le=1_000_000),
        page_size: int = Query(20, ge=1, le=1000),
        status: int | None = Query(None, ge=0, le=3),
        dataset_id: str | None = Query(None, max_length=200),
        config: str | None = Query(None, max_length=200),
    ) -> Response:
        principal = service.caller(request)
        where = TaskFilter(principal.tenant, status, dataset_id or None, config or None)
        total, items = service.store.summaries_json(where, offset=(page - 1) * page_size,
                                                    limit=page_size)
        head = f'{{"success":true,"data":{{"total":{total},"page":{page},"page_size":{page_size},'
        body = head + '"items":[' + ",".join(items) + "]}}"
        return Response(body.encode("utf-8"), media_type="application/json")

    @app.post("/api/v1/evaluation/cancel", response_model=TaskEnvelope,
              responses=_errors(400, 401, 403, 404, 409, 413),
              tags=["evaluation"], summary="stop a running task (SIGTERM) or drop a queued one")
    @requires("run")
    async def cancel(body: CancelEvaluation, request: Request) -> Response:
        principal = service.caller(request)
        service.own_task(principal, body.task_id)
        try:
            service.runner.cancel(body.task_id)
        except Conflict:
            raise ApiError(409, f"evaluation {body.task_id!r} has already finished",
                           field="task_id") from None
        row = service.own_task(principal, body.task_id)
        return ok(_task_json(row))

    @app.get("/api/v1/evaluation/samples", response_model=PageEnvelope,
             responses=_errors(400, 401, 404),
             tags=["evaluation"], summary="per-question records of a task, by qid")
    @requires("read")
    async def samples(
        request: Request,
        task_id: str = Query(..., min_length=1, max_length=300),
        page: int = Query(1, ge=1, le=1_000_000),
        page_size: int = Query(50, ge=1, le=500),
        variant: str | None = Query(None, max_length=200),
    ) -> Response:
        principal = service.caller(request)
        row = service.own_task(principal, task_id)
        if variant:
            runs = service.task_variants(row)
            if variant not in runs:
                raise ApiError(400, f"variant: task {task_id!r} runs no variant {variant!r}; "
                                    f"{suggest(variant, runs, noun='variants')}",
                               field="variant")
        shown = None if variant in (None, "", "base") else variant
        items = service.samples(row, shown)
        start = (page - 1) * page_size
        return ok({"total": len(items), "page": page, "page_size": page_size,
                   "items": items[start:start + page_size]})

    @app.get("/api/v1/datasets", response_model=ListEnvelope, responses=_errors(400, 401),
             tags=["catalog"], summary="the registered datasets")
    @requires("read")
    async def datasets(request: Request) -> Response:
        try:
            entries = service.catalog.datasets()
        except RagevError as exc:
            raise ApiError(400, f"the server's catalog is invalid: {exc}") from None
        return ok([{"id": e.dataset_id, "source": e.source, "available": e.path.is_dir()}
                   for e in entries.values()])

    @app.get("/api/v1/configs", response_model=ListEnvelope, responses=_errors(400, 401),
             tags=["catalog"], summary="the configs the server may run, and its models")
    @requires("read")
    async def configs(request: Request) -> Response:
        entries = [entry.to_json() for entry in service.catalog.configs_list()]
        try:
            chat = sorted(service.catalog.models("chat"))
            rerank = sorted(service.catalog.models("rerank"))
        except RagevError as exc:
            raise ApiError(400, f"the server's catalog is invalid: {exc}") from None
        for entry in entries:
            entry["chat_ids"], entry["rerank_ids"] = chat, rerank
        return ok(entries)

    @app.get("/healthz", tags=["service"], summary="liveness, no key needed")
    async def healthz() -> Response:
        return ok({"status": "ok", "running": service.runner.running(),
                   "queued": len(service.store.pending_ids())})

    # ---------------------------------------------------------- the dashboard
    def page_principal(request: Request) -> Principal | None:
        try:
            return service.reader(request)
        except ApiError:
            return None

    def html(text: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(text, status_code=status, headers=_PAGE_HEADERS)

    def login_redirect(request: Request) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)

    @app.get("/", include_in_schema=False)
    async def home(request: Request, page: int = Query(1, ge=1, le=1_000_000),
                   dataset_id: str | None = Query(None, max_length=200),
                   config: str | None = Query(None, max_length=200),
                   status: int | None = Query(None, ge=0, le=3)) -> Response:
        principal = page_principal(request)
        if principal is None:
            return login_redirect(request)
        where = TaskFilter(principal.tenant, status, dataset_id or None, config or None)
        size = 50
        total, rows = service.store.tasks(where, offset=(page - 1) * size, limit=size)
        return html(dashboard.runs_page(
            [summary_json(r) for r in rows], total=total, page=page, page_size=size,
            principal=principal, filters={"dataset_id": dataset_id, "config": config,
                                          "status": status},
            series=service.store.series_names(principal.tenant)))

    @app.get("/login", include_in_schema=False)
    async def login_form(next: str | None = Query(None, max_length=2000)) -> Response:
        return html(dashboard.login_page(next_path=next))

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        text = (form.get("key") or [""])[0].strip()
        next_path = dashboard.safe_next((form.get("next") or ["/"])[0])
        parts = split_key(text)
        stored = service.stored_key(parts[0]) if parts else None
        if parts is None or stored is None or not verify(stored, parts[1]):
            return html(dashboard.login_page("That key is not valid (or was revoked).",
                                             next_path), 401)
        request.scope["state"]["key_id"] = stored.key_id
        token = secrets.token_urlsafe(32)
        lifetime = settings.session_hours * 3600.0
        service.store.add_session(token, stored.key_id, lifetime)
        response = RedirectResponse(next_path, status_code=303)
        response.set_cookie(_SESSION_COOKIE, token, max_age=int(lifetime), httponly=True,
                            samesite="strict", path="/")
        return response

    @app.post("/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        token = request.cookies.get(_SESSION_COOKIE)
        if token:
            service.store.drop_session(token)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(_SESSION_COOKIE, path="/")
        return response

    @app.get("/runs/{task_id}", include_in_schema=False)
    async def run_page(request: Request, task_id: str) -> Response:
        principal = page_principal(request)
        if principal is None:
            return login_redirect(request)
        row = service.store.task(task_id, tenant=principal.tenant)
        if row is None:
            return html(dashboard.not_found(f"No evaluation task {task_id!r}."), 404)
        folder = settings.tasks_dir / task_id
        previous = [r for r in service.store.history(principal.tenant, row["dataset_id"],
                                                     row["config"]) if r["id"] != task_id]
        return html(dashboard.run_page(
            summary_json(row), params=row["params"],
            has_report=(folder / "report.html").is_file() and row["status"] in (2, 3),
            log_tail=(_log_tail(folder) or "").replace(str(service.catalog.configs) + os.sep, "")
            if row["status"] == 3 else None,
            previous=previous[-1]["id"] if previous else None, principal=principal))

    @app.get("/runs/{task_id}/report.html", include_in_schema=False)
    async def run_report(request: Request, task_id: str) -> Response:
        principal = page_principal(request)
        if principal is None:
            return error_response(401, "log in first")
        row = service.store.task(task_id, tenant=principal.tenant)
        path = settings.tasks_dir / task_id / "report.html"
        if row is None or not path.is_file():
            return html(dashboard.not_found("This run has no HTML report."), 404)
        page = path.read_text(encoding="utf-8")
        return HTMLResponse(page, headers=report_headers(page))

    @app.get("/trends", include_in_schema=False)
    async def trends(request: Request, dataset_id: str | None = Query(None, max_length=200),
                     config: str | None = Query(None, max_length=200)) -> Response:
        principal = page_principal(request)
        if principal is None:
            return login_redirect(request)
        names = service.store.series_names(principal.tenant)
        if dataset_id and config:
            names = [(d, c) for d, c in names if d == dataset_id and c == config]
        series = [(d, c, service.store.history(principal.tenant, d, c)) for d, c in names]
        return html(dashboard.trends_page(series, principal))

    @app.get("/compare", include_in_schema=False)
    async def compare_page(request: Request, a: str = Query(..., min_length=1, max_length=300),
                           b: str = Query(..., min_length=1, max_length=300)) -> Response:
        principal = page_principal(request)
        if principal is None:
            return login_redirect(request)
        rows = []
        for task_id in (a, b):
            row = service.store.task(task_id, tenant=principal.tenant)
            if row is None:
                return html(dashboard.not_found(f"No evaluation task {task_id!r}."), 404)
            rows.append(row)
        try:
            before, after = (service.report_runs(row)[0] for row in rows)
        except ApiError as exc:
            return html(dashboard.not_found(exc.message), 404)
        return html(dashboard.compare_page(summary_json(rows[0]), summary_json(rows[1]),
                                           before, after, principal))

    @app.get("/assets/dashboard.js", include_in_schema=False)
    async def script() -> Response:
        return Response(dashboard.SCRIPT, media_type="text/javascript",
                        headers={"Cache-Control": "max-age=300",
                                 "X-Content-Type-Options": "nosniff"})

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe_api(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def describe_api(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``app`` as the API behaves: its key schemes, each
    operation's security (none for ``/healthz``), and no 422 (FastAPI lists one for
    every route with parameters; this API answers bad input with 400)."""
    document = get_openapi(title=app.title, version=app.version,
                           description=app.description, routes=app.routes)
    components = document.setdefault("components", {})
    components["securitySchemes"] = SECURITY_SCHEMES
    for route in app.routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        keyed = getattr(route.endpoint, _ACCESS_ATTRIBUTE, None) is not None
        for method in route.methods or ():
            operation = document["paths"].get(route.path_format, {}).get(method.lower())
            if operation is None:
                continue
            operation["security"] = [{"ApiKey": []}, {"Bearer": []}] if keyed else []
            operation.get("responses", {}).pop("422", None)
    schemas = components.get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return document


def _log_tail(folder: Path, lines: int = 30) -> str | None:
    logs = sorted(folder.glob("pytest-*.log"), key=lambda p: int(p.stem.split("-")[-1]))
    if not logs:
        return None
    try:
        text = logs[-1].read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return "\n".join(text.splitlines()[-lines:])


def asgi(settings: ServerSettings) -> ASGIApp:
    """:func:`create_app` inside the :class:`Guard` (what uvicorn serves)."""
    return Guard(create_app(settings), max_body=settings.max_body)


def app_from_environment() -> ASGIApp:
    """The factory uvicorn calls: the settings come from ``$RAGEV_SERVE_SETTINGS``."""
    return asgi(ServerSettings.from_env())
