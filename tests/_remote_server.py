"""A real HTTP server on 127.0.0.1 that replays scripted replies, for the remote tests."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the server sends back: status, JSON (or raw bytes) body, headers, a delay."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Seen:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class ScriptedServer:
    """Serves ``script`` replies in order, then ``default(request)`` for every later request."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.default: Callable[[Seen], Reply] = lambda seen: Reply(404, {"error": "no script"})
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                seen = Seen(self.command, self.path, dict(self.headers.items()), body)
                with server._lock:
                    server.seen.append(seen)
                    reply = server.script.pop(0) if server.script else None
                if reply is None:
                    reply = server.default(seen)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body if isinstance(reply.body, bytes) else (
                    json.dumps(reply.body).encode()
                )
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (timeout tests)

            do_POST = do_GET = do_PUT = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            # The default backlog (5) drops bursts of parallel connects; the client then
            # waits a full SYN retransmit (1 s).
            request_queue_size = 128

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve() -> Iterator[ScriptedServer]:
    """Generator body for a pytest fixture: a started server, closed afterwards."""
    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()


def free_port() -> int:
    """A port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_url() -> str:
    """A 127.0.0.1 URL nobody listens on (its port was free a moment ago)."""
    return f"http://127.0.0.1:{free_port()}"
