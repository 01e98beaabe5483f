"""The pollers' request, answered without FastAPI's routing: ``GET /api/v1/evaluation``.

While a task runs, every client of the original polls ``GET /api/v1/evaluation?task_id=``
(50 pollers at 10 a second are 500 requests a second). FastAPI spends most of a
request's CPU matching routes and resolving dependencies, CPU the running evaluation
shares on a small machine. This ASGI layer answers the common case itself: a key in a
header that may read, one ``task_id`` of the key's tenant, a task that is running or has
ended. The answer is the bytes the endpoint sends (``api.detail``: SQLite writes the
``data`` from the stored JSON), so the two cannot differ; a unit test holds them equal.

Everything else goes to the application, which answers it as always: no key or a bad
one (401), a key that may not read (403), a dashboard login (cookie), another query, a
missing or another tenant's task (404), a queued task (its queue position), a database
that cannot be read (503).
"""

from __future__ import annotations

import sqlite3
from urllib.parse import parse_qsl

from pytest_ragev.server.guard import ASGIApp, Receive, Scope, Send
from pytest_ragev.server.keys import key_from_headers, split_key, verify
from pytest_ragev.server.service import Service

#: The detail endpoint's paths (the original's ends in a slash; both answer).
DETAIL_PATHS = frozenset({"/api/v1/evaluation", "/api/v1/evaluation/"})
#: The longest ``task_id`` the endpoint takes (``schemas.TaskIdQuery``).
MAX_TASK_ID = 300


class DetailFastPath:
    """Answers ``GET /api/v1/evaluation`` of a started task; passes everything else on."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "GET"
                and scope["path"] in DETAIL_PATHS):
            body = self.answer(scope)
            if body is not None:
                await send({"type": "http.response.start", "status": 200, "headers": [
                    (b"content-length", str(len(body)).encode()),
                    (b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    def answer(self, scope: Scope) -> bytes | None:
        """The answer's body, or ``None`` when the application must answer."""
        x_api_key = authorization = None
        for name, value in scope.get("headers", ()):
            # The first of each, as Starlette's ``request.headers.get`` reads them.
            if name == b"x-api-key" and x_api_key is None:
                x_api_key = value.decode("latin-1")
            elif name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
        text = key_from_headers(x_api_key, authorization)
        parts = split_key(text) if text is not None else None
        if parts is None:
            return None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        if len(query) != 1 or query[0][0] != "task_id":
            return None
        task_id = query[0][1]
        if not 0 < len(task_id) <= MAX_TASK_ID:
            return None
        try:
            stored = self.service.stored_key(parts[0])
            if stored is None or not verify(stored, parts[1]):
                return None
            principal = stored.principal
            if not principal.may("read"):
                return None
            found = self.service.store.detail_json(task_id, principal.tenant)
        except (sqlite3.Error, OSError):
            return None  # the application answers the storage's trouble in the envelope
        if found is None or found[0] == 0:
            return None
        scope.setdefault("state", {})["key_id"] = stored.key_id  # for the access log
        return b'{"success":true,"data":' + found[1].encode() + b"}"
