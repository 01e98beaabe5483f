"""The outermost ASGI layer of ``ragev serve``: body limits, access log, no traceback.

It wraps the whole FastAPI application, Starlette's own error middleware included
(:func:`pytest_ragev.server.app.asgi`), so every request gets its one access-log line
and nothing a handler raises reaches uvicorn (which would log a traceback). Bodies are
bounded in size and in how deeply their JSON nests (a parser recursing into a
thousand-level array is slow and, past Python's limit, answers without naming the
field).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlencode

from pytest_ragev.core.redact import is_secret_key
from pytest_ragev.server.envelope import error_response

access_log = logging.getLogger("ragev.access")
log = logging.getLogger("ragev.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def json_depth(body: bytes) -> int:
    """How deeply the JSON text ``body`` nests arrays and objects (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


class Guard:
    """Outermost layer: body limits, one log line per request, no traceback ever.

    Bodies are read here in full (they are small: ``max_body`` bytes at most), so a
    too-large one is answered 413 before any handler runs, whether or not the client
    sent a ``Content-Length``, and one whose JSON nests deeper than ``max_depth`` 400
    naming the body. The log line names the key that sent the request when a route
    found one (``scope["state"]["key_id"]``).
    """

    def __init__(self, app: ASGIApp, *, max_body: int, max_depth: int = 32) -> None:
        self.app = app
        self.max_body = max_body
        self.max_depth = max_depth

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
            elif body and (deepest := json_depth(body)) > self.max_depth:
                await _send_json(sending, 400, f"body: JSON nested {deepest} levels deep, more "
                                               f"than {self.max_depth}; send a JSON object of "
                                               "the fields the endpoint takes", field="body")
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


async def _send_json(send: Send, status: int, message: str, *,
                     field: str | None = None) -> None:
    response = error_response(status, message, field=field)
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
