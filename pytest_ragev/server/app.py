"""The ASGI application of ``ragev serve``: the evaluation API and the dashboard (FastAPI).

``uvicorn`` imports :func:`app_from_environment` by name (``ragev serve`` passes the
settings in ``$RAGEV_SERVE_SETTINGS``); tests and embedders call :func:`create_app`.
Every answer is JSON in the original's envelope (``{"success": true, "data": ...}``
or ``{"success": false, "error": {"code", "message", "details"}}``) except the
dashboard's HTML pages; bad input is a 4xx naming the field, never a traceback.

The routes live in two routers, :mod:`.api` (the evaluation API) and :mod:`.pages`
(the dashboard); what they need comes through ``Depends`` (:mod:`.dependencies`). This
module puts them together: the application, its lifespan (the runner), the error
handlers, the OpenAPI document, and the :class:`~.guard.Guard` around it all.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from fastapi.routing import APIRoute, APIRouter
from starlette.exceptions import HTTPException as StarletteHTTPException

from pytest_ragev.core.tables import suggest
from pytest_ragev.server import api, pages
from pytest_ragev.server.dependencies import required_action
from pytest_ragev.server.envelope import ApiError, error_response
from pytest_ragev.server.fastpath import DetailFastPath
from pytest_ragev.server.guard import ASGIApp, Guard
from pytest_ragev.server.schemas import CreateEvaluation
from pytest_ragev.server.service import Service
from pytest_ragev.server.settings import ServerSettings
from pytest_ragev.server.store import storage_problem

log = logging.getLogger("ragev.server")

#: The routers of the application, included in this order and without a prefix.
ROUTERS: tuple[APIRouter, ...] = (api.router, pages.router)
#: The security schemes of the API: the original's header, or a bearer token.
SECURITY_SCHEMES = {
    "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key",
               "description": "an API key of `ragev serve keys create`"},
    "Bearer": {"type": "http", "scheme": "bearer",
               "description": "the same API key, as `Authorization: Bearer <key>`"},
}
_CREATE_FIELDS = tuple(CreateEvaluation.model_fields)


def create_app(settings: ServerSettings) -> FastAPI:
    """The application for ``settings`` (the runner starts with the app's lifespan)."""
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
        exception_handlers={
            ApiError: answer_api_error,
            RequestValidationError: answer_invalid_request,
            StarletteHTTPException: answer_http_error,
            sqlite3.Error: answer_storage_error,
            OSError: answer_storage_error,
            Exception: answer_internal_error,
        },
    )
    app.state.service = Service(settings)
    for router in ROUTERS:
        app.include_router(router)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe_api(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Run the task runner while the application serves; close the store after it."""
    service: Service = app.state.service
    settings = service.settings
    service.runner.start()
    log.info("ragev serve: workspace %s, configs %s, max %d parallel",
             settings.workspace, settings.configs, settings.max_parallel)
    try:
        yield
    finally:
        service.close()


def operations() -> Iterator[APIRoute]:
    """Every path operation of the application, in the order it matches them."""
    # Read from the routers, not from app.routes: newer FastAPI keeps an included router
    # there as one entry of its own instead of copying its routes.
    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute):
                yield route


# ------------------------------------------------------------------ errors
async def answer_api_error(request: Request, exc: ApiError) -> Response:
    """An :class:`ApiError` in the original's envelope."""
    return error_response(exc.status, exc.message, field=exc.field, headers=exc.headers)


async def answer_storage_error(request: Request, exc: Exception) -> Response:
    """The database or the workspace refused (locked, a full or read-only disk): 503 in
    the envelope, with the cause and its fix; nothing was changed."""
    service: Service = request.app.state.service
    problem = storage_problem(exc, service.settings.workspace)
    if problem is None:
        return await answer_internal_error(request, exc)
    log.warning("%s %s: %s", request.method, request.url.path, problem)
    return error_response(503, problem, headers={"Retry-After": "5"})


async def answer_internal_error(request: Request, exc: Exception) -> Response:
    """A bug: 500 in the envelope, one line in the log, never a traceback."""
    log.error("%s %s: internal error %s: %s", request.method, request.url.path,
              type(exc).__name__, str(exc)[:200])
    return error_response(500, "internal error; the server log has one line about it")


async def answer_invalid_request(request: Request, exc: RequestValidationError) -> Response:
    """Bad input: 400 with the first problem, naming its field (FastAPI would say 422)."""
    field, message = _validation_message(exc)
    return error_response(400, message, field=field)


async def answer_http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """Starlette's own errors (no such route, a method the path does not define) in the
    envelope; a 405 lists, in ``Allow``, every method the path does define."""
    if exc.status_code == 404:
        return error_response(404, f"no route {request.url.path}")
    if exc.status_code == 400:  # Starlette could not read the body (the Guard checks most)
        return error_response(400, f"body: {exc.detail}; send a JSON object", field="body")
    if exc.status_code == 405:
        allowed = sorted({
            method for route in operations() if route.path_regex.match(request.url.path)
            for method in route.methods or ()
        })
        return error_response(405, f"{request.method} is not allowed on {request.url.path}; "
                                   f"use {', '.join(allowed)}",
                              headers={"Allow": ", ".join(allowed)})
    return error_response(exc.status_code, str(exc.detail))


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


# ----------------------------------------------------------------- OpenAPI
def describe_api(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``app`` as the API behaves: its key schemes, each
    operation's security (none for ``/healthz``), and no 422 (FastAPI lists one for
    every route with parameters; this API answers bad input with 400)."""
    document = get_openapi(title=app.title, version=app.version,
                           description=app.description, routes=app.routes)
    components = document.setdefault("components", {})
    components["securitySchemes"] = SECURITY_SCHEMES
    for route in operations():
        if not route.include_in_schema:
            continue
        keyed = required_action(route) is not None
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


# -------------------------------------------------------------- uvicorn
def asgi(settings: ServerSettings) -> ASGIApp:
    """:func:`create_app` behind the pollers' fast path, inside the :class:`Guard` (what
    uvicorn serves)."""
    app = create_app(settings)
    return Guard(DetailFastPath(app, app.state.service), max_body=settings.max_body,
                 max_depth=settings.max_depth)


def app_from_environment() -> ASGIApp:
    """The factory uvicorn calls: the settings come from ``$RAGEV_SERVE_SETTINGS``."""
    return asgi(ServerSettings.from_env())
