"""``clients._retry``: the request of every client.

The HTTP timeout is a deadline for the whole request (#16 item 6).

``urllib``'s timeout limits each socket read, so a server that trickles its reply a byte
at a time held one question for as long as it liked (13.9 s with ``timeout = 1``). A real
server on 127.0.0.1 trickles here: the status line, or the body, one byte every 0.2 s,
for longer than the timeout. The outcome is checked, not the clock: without the deadline
the request succeeds (late), with it the request fails as a timeout.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from pytest_ragev import PipelineError
from pytest_ragev.clients import _env, _retry
from tests._remote_server import Reply, ScriptedServer

BODY = b'{"answer": "Der Eiffelturm ist etwa 330 Meter hoch."}'


class Trickler:
    """Answers each connection with ``reply``, one byte per ``gap`` seconds."""

    def __init__(self, reply: bytes, gap: float = 0.2) -> None:
        self.reply = reply
        self.gap = gap
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/rag"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)  # the request (small: one recv)
                try:
                    for byte in self.reply:
                        if self.stop.wait(self.gap):
                            return
                        conn.sendall(bytes([byte]))
                except OSError:
                    continue  # the client gave up: that is the point

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.listener.close()


def _reply(body: bytes) -> bytes:
    head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head + body


def _send(url: str, timeout: float) -> _retry.Response:
    return _retry.send(method="POST", url=url, headers={}, payload={"q": "Wie hoch?"},
                       policy=_retry.RetryPolicy(timeout=timeout, max_retries=0),
                       what="http pipeline", client_error_hint=lambda status, message: "")


@pytest.mark.parametrize("part", ["status line", "body"])
def test_a_trickled_reply_fails_as_a_timeout(part: str) -> None:
    reply = _reply(BODY)
    if part == "body":
        # Everything up to the body at once; only the body trickles.
        cut = reply.index(b"\r\n\r\n") + 4
        server = _HeadThenTrickle(reply[:cut], reply[cut:])
    else:
        server = Trickler(reply)
    try:
        with pytest.raises(PipelineError) as caught:
            _send(server.url, timeout=1.0)
    finally:
        server.close()
    message = str(caught.value)
    assert "no response within timeout = 1 s" in message and "\n" not in message


def test_a_reply_in_time_is_read_whole() -> None:
    server = Trickler(_reply(BODY), gap=0.0)
    try:
        response = _send(server.url, timeout=30.0)
    finally:
        server.close()
    assert response.status == 200
    assert response.body == {"answer": "Der Eiffelturm ist etwa 330 Meter hoch."}


class _HeadThenTrickle(Trickler):
    def __init__(self, head: bytes, body: bytes) -> None:
        self.head = head
        super().__init__(body)

    def _serve(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                try:
                    conn.sendall(self.head)
                    for byte in self.reply:
                        if self.stop.wait(self.gap):
                            return
                        conn.sendall(bytes([byte]))
                except OSError:
                    continue


def test_the_deadline_is_kept_across_same_origin_redirects() -> None:
    # One deadline per request: a redirect does not restart the clock.
    request = _retry.urllib.request.Request("http://127.0.0.1:1/a")
    setattr(request, _retry._DEADLINE, time.monotonic() + 5)
    handler = _retry._SameOriginRedirects()
    new = handler.redirect_request(request, None, 302, "Found", {}, "http://127.0.0.1:1/b")
    assert new is not None
    assert getattr(new, _retry._DEADLINE) == getattr(request, _retry._DEADLINE)


# -- Retry-After, and failures that are not HTTP replies
CANARY = "sk-CANARY-7f3a9c"


def test_retry_after_parsing() -> None:
    assert _retry.parse_retry_after("3") == 3.0
    assert _retry.parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert _retry.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0
    assert _retry.parse_retry_after("soon") is None
    assert _retry.parse_retry_after(None) is None
    assert _retry.RetryPolicy(backoff=1).delay(1, 1e9) == _retry.MAX_DELAY_S


def test_unexpected_transport_errors_become_scrubbed_pipeline_errors() -> None:
    # A broken IPv6 host makes urllib raise a bare ValueError, not a URLError.
    with pytest.raises(PipelineError) as excinfo:
        _retry.send(method="POST", url=f"http://[{CANARY}/x", headers={}, payload={"a": 1},
                    policy=_retry.RetryPolicy(max_retries=0), what="[pipeline] http",
                    client_error_hint=lambda status, message: "", secrets=[CANARY])
    assert str(excinfo.value).startswith(
        "[pipeline] http: the request to http://[***/x failed: ValueError: ")
    assert CANARY not in str(excinfo.value)
    with pytest.raises(PipelineError, match="the request body is not JSON"):
        _retry.send(method="POST", url="http://127.0.0.1:9/x", headers={}, payload={"a": {1, 2}},
                    policy=_retry.RetryPolicy(max_retries=0), what="w",
                    client_error_hint=lambda status, message: "")


@pytest.mark.parametrize("key", [f"{CANARY}\\x", f"{CANARY}'x"])
def test_a_key_repr_escapes_is_scrubbed_from_a_quoted_reply(
    server: ScriptedServer, key: str
) -> None:
    """A non-JSON reply is quoted with ``!r``: the escaped spelling of the key goes too."""
    server.default = lambda seen: Reply(
        200, f"""<p class="err">it's {seen.headers.get('Authorization')}</p>""".encode())
    with pytest.raises(PipelineError, match="a body that is not JSON") as excinfo:
        _retry.send(method="POST", url=f"{server.url}/x", headers={"Authorization": key},
                    payload={"a": 1}, policy=_retry.RetryPolicy(max_retries=0), what="w",
                    client_error_hint=lambda status, message: "", secrets=[_env.Secret(key)])
    assert "CANARY" not in str(excinfo.value) and "***" in str(excinfo.value)


def test_a_key_spelled_with_json_escapes_is_still_scrubbed(server: ScriptedServer) -> None:
    # The fast path skips the scrubbing walk only for a reply whose text holds neither a
    # spelling of a secret nor an escape: "\u0073k-..." is the key once decoded.
    escaped = "\\u0073" + CANARY[1:]
    server.default = lambda seen: Reply(200, ('{"answer": "' + escaped + '"}').encode())
    response = _retry.send(method="POST", url=f"{server.url}/x", headers={}, payload={"a": 1},
                           policy=_retry.RetryPolicy(max_retries=0), what="w",
                           client_error_hint=lambda status, message: "",
                           secrets=[_env.Secret(CANARY)])
    assert response.body == {"answer": "***"}
    server.default = lambda seen: Reply(200, {"data": [{"embedding": [0.5, -0.25]}]})
    clean = _retry.send(method="POST", url=f"{server.url}/x", headers={}, payload={"a": 1},
                        policy=_retry.RetryPolicy(max_retries=0), what="w",
                        client_error_hint=lambda status, message: "",
                        secrets=[_env.Secret(CANARY)])
    assert clean.body == {"data": [{"embedding": [0.5, -0.25]}]}
