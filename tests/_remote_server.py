"""A real HTTP server on 127.0.0.1 that replays scripted replies, for the remote tests."""

from __future__ import annotations

import base64
import json
import socket
import struct
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


# -- a model server: /v1/embeddings and /rerank with deterministic vectors and scores ----------

#: Width of the vectors the model server answers (unless the request asks ``dimensions``).
MODEL_DIMENSIONS = 32


def _words(text: str) -> list[str]:
    return [word for word in "".join(ch.lower() if ch.isalnum() else " " for ch in text).split()]


def model_vector(model: str, text: str, dimensions: int = MODEL_DIMENSIONS) -> list[float]:
    """The deterministic vector the model server gives ``text`` under ``model``: signed
    feature hashing of its words (and of its characters' bigrams, for text without spaces),
    seeded with the model's name, so two models give two sets of vectors."""
    import hashlib

    vector = [0.0] * dimensions
    words = _words(text)
    features = words + [word[i:i + 2] for word in words for i in range(len(word) - 1)
                        if not word.isascii()]
    for feature in features:
        digest = hashlib.sha256(f"{model}\0{feature}".encode()).digest()
        slot = int.from_bytes(digest[:4], "little") % dimensions
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    return vector


def rerank_score(query: str, document: str) -> float:
    """The deterministic score the model server gives a document: the share of the
    question's distinct words it contains, in [0, 1]."""
    asked = set(_words(query))
    return len(asked & set(_words(document))) / len(asked) if asked else 0.0


class ModelServer:
    """A ``default`` reply for :class:`ScriptedServer` that speaks ``POST .../embeddings``
    (OpenAI shape) and ``POST .../rerank`` (the Cohere shape for ``documents``, the TEI
    shape for ``texts``), and ``GET .../models``; it counts requests per kind and the most
    requests it held at once. Scripted replies (faults) still come first."""

    def __init__(self, server: ScriptedServer, *, delay_s: float = 0.0) -> None:
        self.server = server
        self.delay_s = delay_s
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server.default = self

    def count(self, kind: str) -> int:
        """Requests received whose path ends with ``kind`` (``embeddings``, ``rerank``)."""
        return sum(1 for seen in self.server.seen if seen.path.rstrip("/").endswith(kind))

    def embedded_texts(self) -> list[str]:
        return [text for seen in self.server.seen if seen.path.endswith("embeddings")
                and isinstance(seen.body, dict) for text in seen.body.get("input", [])]

    def __call__(self, seen: Seen) -> Reply:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            return self._reply(seen)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, seen: Seen) -> Reply:
        body = seen.body if isinstance(seen.body, dict) else {}
        if seen.method == "GET" and seen.path.endswith("/models"):
            return Reply(200, {"object": "list", "data": [{"id": "served"}]})
        if seen.path.endswith("/embeddings"):
            texts = body.get("input", [])
            texts = [texts] if isinstance(texts, str) else texts
            width = body.get("dimensions") or MODEL_DIMENSIONS
            vectors = [model_vector(str(body.get("model")), text, width) for text in texts]
            if body.get("encoding_format") == "base64":  # little-endian float32, as OpenAI
                vectors = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
                           for v in vectors]
            data = [{"object": "embedding", "index": i, "embedding": vector}
                    for i, vector in enumerate(vectors)]
            return Reply(200, {"object": "list", "data": data[::-1], "model": body.get("model"),
                               "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}})
        if seen.path.endswith("/rerank"):
            query = str(body.get("query", ""))
            if "texts" in body:  # text-embeddings-inference
                return Reply(200, [{"index": i, "score": rerank_score(query, text)}
                                   for i, text in enumerate(body["texts"])])
            results = [{"index": i, "relevance_score": rerank_score(query, text)}
                       for i, text in enumerate(body.get("documents", []))]
            return Reply(200, {"results": sorted(results, key=lambda r: -r["relevance_score"])})
        return Reply(404, {"error": {"message": f"no route {seen.path}"}})


def free_port() -> int:
    """A port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_url() -> str:
    """A 127.0.0.1 URL nobody listens on (its port was free a moment ago)."""
    return f"http://127.0.0.1:{free_port()}"
