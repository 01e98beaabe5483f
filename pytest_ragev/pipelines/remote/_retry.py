"""HTTP requests with retries, shared by the chat client and the ``http`` pipeline.

Standard library only (``urllib.request``): a remote pipeline must not pull in an HTTP
stack. Every call opens its own connection, so one :func:`send` is safe to run from many
threads at once.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_ragev.core.errors import PipelineError

#: No single wait (backoff or ``Retry-After``) is longer than this many seconds.
MAX_DELAY_S = 60.0
#: Server error messages are trimmed to this many characters in our exceptions.
MAX_SERVER_MESSAGE = 200

# Swapped by tests to record the waits instead of sleeping through them.
_sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is retried.

    ``max_retries`` extra attempts follow the first one on 429, 5xx, connection errors
    and timeouts; the n-th retry waits ``backoff * 2**(n-1)`` seconds scaled by a random
    factor in [0.5, 1] (jitter spreads the retries of parallel workers), or what the
    server's ``Retry-After`` asks for, never more than :data:`MAX_DELAY_S`.
    """

    timeout: float = 60.0
    max_retries: int = 3
    backoff: float = 0.5

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_DELAY_S)
        exponential = self.backoff * 2.0 ** (retry - 1)
        return min(exponential * (0.5 + random.random() / 2), MAX_DELAY_S)


@dataclass(frozen=True)
class Response:
    """A successful (2xx) response: status, decoded JSON body, attempts and wall time."""

    status: int
    body: Any
    attempts: int
    latency_s: float


#: Builds the hint for a 4xx status: ``(status, server_message) -> fix``.
ClientErrorHint = Callable[[int, str], str]


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        current = time.time() if now is None else now
        return max(when.timestamp() - current, 0.0)
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def server_message(raw: bytes) -> str:
    """The error message a server put in its JSON body (OpenAI style or common variants)."""
    text = raw.decode("utf-8", errors="replace").strip()
    try:
        body = json.loads(text)
    except ValueError:
        return _one_line(text)
    found: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            found = error.get("message")
        elif isinstance(error, str):
            found = error
        for key in ("message", "detail", "msg"):
            if found is None and isinstance(body.get(key), str):
                found = body[key]
    return _one_line(found if isinstance(found, str) else text)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > MAX_SERVER_MESSAGE:
        flat = flat[: MAX_SERVER_MESSAGE - 3] + "..."
    return flat


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value replaced by ``***`` (servers may echo a key back).

    A secret is removed in every spelling a ``repr()`` gives it too: messages quote a
    server's reply or an exception with ``!r``, which escapes backslashes and quotes.
    """
    spellings = {spelling for secret in secrets if secret for spelling in _spellings(secret)}
    for spelling in sorted(spellings, key=len, reverse=True):
        text = text.replace(spelling, "***")
    return text


def _spellings(secret: str) -> set[str]:
    """``secret`` as written and as the ``repr()`` of a text (or its bytes) holding it."""
    plain = str(secret)  # a Secret's own repr() is ``'***'``
    found = {plain}
    for quoted in (repr(plain), repr(plain.encode("utf-8", "replace"))[1:]):
        inner = quoted[1:-1]
        found.add(inner)
        if quoted[0] == '"':  # in a text that also holds a '"', repr() escapes the "'"
            found.add(inner.replace("'", "\\'"))
    return found


def send(
    *,
    method: str,
    url: str,
    headers: Mapping[str, str],
    payload: Any | None,
    policy: RetryPolicy,
    what: str,
    client_error_hint: ClientErrorHint,
    secrets: Iterable[str] = (),
) -> Response:
    """Send one JSON request, retrying per ``policy``; the decoded JSON of a 2xx response.

    Raises :class:`PipelineError` (one line, prefixed with ``what``, secrets scrubbed) on a
    4xx other than 429, when the retries are exhausted, and when a 2xx body is not JSON.
    """
    __tracebackhide__ = True  # its locals hold the headers (pytest -l)
    secret_values = tuple(secrets)
    try:
        data = None if payload is None else json.dumps(payload, ensure_ascii=False).encode()
    except (TypeError, ValueError) as error:
        raise PipelineError(f"{what}: the request body is not JSON ({error})") from None
    _check_headers(headers, what)
    request_headers = {"Accept": "application/json", **headers}
    if data is not None:
        request_headers.setdefault("Content-Type", "application/json")
    started = time.perf_counter()
    attempt = 0
    while True:
        attempt += 1
        retry_after: float | None = None
        try:
            request = urllib.request.Request(url, data=data, headers=request_headers,
                                             method=method)
            with urllib.request.urlopen(request, timeout=policy.timeout) as reply:
                status = reply.status
                raw = reply.read()
        except urllib.error.HTTPError as error:
            status = error.code
            raw = _read_error_body(error)
            message = server_message(raw)
            if status != 429 and status < 500:
                hint = client_error_hint(status, message)
                detail = f": {message}" if message else ""
                raise PipelineError(
                    scrub(f"{what}: HTTP {status} from {url}{detail}; {hint}", secret_values)
                ) from None
            retry_after = parse_retry_after(error.headers.get("Retry-After"))
            failure = f"HTTP {status}" + (f": {message}" if message else "")
        except TimeoutError:
            failure = f"no response within timeout = {policy.timeout:g} s"
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                failure = f"no response within timeout = {policy.timeout:g} s"
            else:
                failure = f"cannot connect ({error.reason})"
        except (ConnectionError, http.client.HTTPException, OSError) as error:
            failure = f"connection failed ({type(error).__name__}: {error})"
        except Exception as error:  # anything else urllib raises: ours, one line, no secret
            raise PipelineError(
                f"{what}: the request to {scrub(url, secret_values)} failed: "
                f"{type(error).__name__}: {_one_line(scrub(str(error), secret_values))}"
            ) from None
        else:
            latency = time.perf_counter() - started
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise PipelineError(
                    scrub(
                        f"{what}: {url} answered HTTP {status} with a body that is not JSON: "
                        f"{_one_line(raw.decode('utf-8', errors='replace'))!r}; check that the "
                        "URL points at the API, not a web page or proxy",
                        secret_values,
                    )
                ) from None
            return Response(status=status, body=body, attempts=attempt, latency_s=latency)
        if attempt > policy.max_retries:
            raise PipelineError(
                scrub(
                    f"{what}: {url} failed after {attempt} attempt(s), last: {failure}; check "
                    "that the service is up, or raise timeout / max_retries",
                    secret_values,
                )
            )
        _sleep(policy.delay(attempt, retry_after))


def _check_headers(headers: Mapping[str, str], what: str) -> None:
    """HTTP carries header values as Latin-1 without line breaks: say so, never show them."""
    __tracebackhide__ = True
    for name, value in headers.items():
        try:
            value.encode("latin-1")
            clean = not any(c in value for c in "\r\n\0")
        except UnicodeEncodeError:
            clean = False
        if not clean:
            raise PipelineError(
                f"{what}: header {name!r} has a value HTTP cannot carry (a line break or a "
                "character outside Latin-1); fix the key or header value it is made from"
            )


def _read_error_body(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read()
    except (OSError, http.client.HTTPException):
        return b""
