"""HTTP requests with retries, shared by every client of a service (chat, embeddings,
rerank, a judge) and the ``http`` pipeline.

Standard library only (``urllib.request``): a client must not pull in an HTTP stack.
Every call opens its own connection, so one :func:`send` is safe to run from many threads
at once.

Redirects are followed only within the request's origin (scheme, host and port):
``urllib`` copies every request header, ``Authorization`` included, to wherever a
``Location`` points, so a redirect to another origin would hand it the key. Such a
redirect fails with a :class:`PipelineError` instead.

``timeout`` is a deadline for the whole request (connecting, sending, every byte of the
reply), not ``urllib``'s limit on each socket operation: a server that trickles its
reply a byte at a time would otherwise hold a question for as long as it likes.
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import io
import json
import math
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from pytest_ragev.clients._breaker import Breaker
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

    ``timeout`` is the most seconds one attempt may take from connecting to the last
    byte of the reply. ``max_retries`` extra attempts follow the first one on 429, 5xx,
    connection errors and timeouts; the n-th retry waits ``backoff * 2**(n-1)``
    seconds scaled by a random factor in [0.5, 1] (jitter spreads the retries of
    parallel workers), or what the server's ``Retry-After`` asks for, never more than
    :data:`MAX_DELAY_S`.
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


#: Statuses that refuse the credentials: every later request would be refused too.
AUTH_STATUSES = frozenset({401, 403})


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
    return Scrubber(secrets)(text)


class Scrubber:
    """:func:`scrub` with the spellings of the secrets worked out once, for many texts."""

    def __init__(self, secrets: Iterable[str]) -> None:
        spellings = {spelling for secret in secrets if secret for spelling in _spellings(secret)}
        self._spellings = sorted(spellings, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._spellings)

    def found_in(self, text: str) -> bool:
        """Whether ``text`` holds a spelling of a secret."""
        return any(spelling in text for spelling in self._spellings)

    def __call__(self, text: str) -> str:
        for spelling in self._spellings:
            if spelling in text:
                text = text.replace(spelling, "***")
        return text

    def json(self, value: Any) -> Any:
        """A decoded JSON value with every string (keys too) scrubbed, containers in place.

        Iterative, not recursive: a reply may nest as deeply as the JSON parser allows.
        """
        if isinstance(value, str):
            return self(value)
        stack = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                for index, item in enumerate(node):
                    if isinstance(item, str):
                        node[index] = self(item)
                    elif isinstance(item, list | dict):
                        stack.append(item)
            elif isinstance(node, dict):
                items = list(node.items())
                node.clear()  # refilled in order, so a scrubbed key keeps its place
                for key, item in items:
                    if isinstance(item, str):
                        item = self(item)
                    elif isinstance(item, list | dict):
                        stack.append(item)
                    node[self(key) if isinstance(key, str) else key] = item
        return value


def _spellings(secret: str) -> set[str]:
    """``secret`` as written, as the ``repr()`` of a text (or its bytes) holding it, and
    as JSON writes it inside a string (a reply quoted raw)."""
    plain = str(secret)  # a Secret's own repr() is ``'***'``
    found = {plain, json.dumps(plain)[1:-1], json.dumps(plain, ensure_ascii=False)[1:-1]}
    for quoted in (repr(plain), repr(plain.encode("utf-8", "replace"))[1:]):
        inner = quoted[1:-1]
        found.add(inner)
        if quoted[0] == '"':  # in a text that also holds a '"', repr() escapes the "'"
            found.add(inner.replace("'", "\\'"))
    return found


def origin(url: str) -> tuple[str, str, int | None] | None:
    """``(scheme, host, port)`` of ``url``, the default port filled in; ``None`` if unclear."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


class CrossOriginRedirect(Exception):
    """A redirect to another origin, refused before anything was sent there."""

    def __init__(self, status: int, location: str) -> None:
        super().__init__(f"HTTP {status} redirect to another origin")
        self.status = status
        self.location = location


class RedirectRefused(PipelineError):
    """A request met a redirect to another origin and stopped there: every request to
    this URL meets it, so a preflight that meets it stops the run."""


#: The attribute of a request that holds its deadline (``time.monotonic()`` seconds).
_DEADLINE = "_ragev_deadline"


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each given only the time left until the request's deadline.

    ``urllib``'s timeout limits each read; a reply trickled in one byte per read never
    hits it. Setting the socket's timeout to what is left before every read bounds the
    whole reply (the status line and headers included: they are read through here too).
    """

    def __init__(self, raw: io.RawIOBase, sock: Any, deadline: float) -> None:
        super().__init__()
        self._raw = raw
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        self._sock.settimeout(left)
        return self._raw.readinto(buffer)

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """An ``HTTPResponse`` that reads its socket through a :class:`_DeadlineReader`."""

    def __init__(self, sock: Any, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        # Nothing has been read yet: the buffer can be swapped for one over our reader.
        raw = self.fp.detach()
        self.fp = io.BufferedReader(_DeadlineReader(raw, sock, deadline))


def _connection(cls: type[http.client.HTTPConnection], deadline: float | None) -> Any:
    """``cls`` made to honour ``deadline``: connect within the time left, read through
    :class:`_DeadlineResponse`."""
    if deadline is None:
        return cls

    def connect(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        timeout = kwargs.get("timeout")
        kwargs["timeout"] = left if not isinstance(timeout, int | float) else min(timeout, left)
        connection = cls(host, **kwargs)
        connection.response_class = functools.partial(  # type: ignore[assignment]
            _DeadlineResponse, deadline=deadline)
        return connection

    return connect


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_connection(http.client.HTTPConnection, getattr(req, _DEADLINE, None)),
                            req)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        # The keyword arguments urllib's own handler passes (check_hostname up to 3.11).
        extra: dict[str, Any] = {"context": getattr(self, "_context", None)}
        if hasattr(self, "_check_hostname"):
            extra["check_hostname"] = self._check_hostname
        return self.do_open(
            _connection(http.client.HTTPSConnection, getattr(req, _DEADLINE, None)), req,
            **extra)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects that stay on the request's origin; refuses all others.

    Within the origin, 307 and 308 repeat the request with its method and body, as the
    status codes require (``urllib`` gives up on them for a POST); 301, 302 and 303 do
    what ``urllib`` and browsers do (a POST becomes a GET).
    """

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        here = origin(req.full_url)
        if here is None or origin(newurl) != here:
            fp.close()
            raise CrossOriginRedirect(code, newurl)
        if code in (307, 308):
            new: urllib.request.Request | None = urllib.request.Request(
                newurl, data=req.data, headers=dict(req.header_items()),
                origin_req_host=req.origin_req_host, unverifiable=True,
                method=req.get_method(),
            )
        else:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and hasattr(req, _DEADLINE):
            setattr(new, _DEADLINE, getattr(req, _DEADLINE))  # one deadline for the whole chain
        return new


#: ``urllib``'s default opener (proxies from the environment, https, ...) with the
#: redirect rule above in place of its own, and the request deadline.
_OPENER = urllib.request.build_opener(
    _SameOriginRedirects, _DeadlineHTTPHandler,
    *([_DeadlineHTTPSHandler] if hasattr(urllib.request, "HTTPSHandler") else []),
)


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
    breaker: Breaker | None = None,
) -> Response:
    """Send one JSON request, retrying per ``policy``; the decoded JSON of a 2xx response.

    Raises :class:`PipelineError` (one line, prefixed with ``what``, secrets scrubbed) on a
    4xx other than 429, when the retries are exhausted (with ``status`` and ``transport`` set), and
    when a 2xx body is not JSON. With a ``breaker``, a request it refuses is not sent, and
    every outcome is counted (see :mod:`._breaker`).
    """
    __tracebackhide__ = True  # its locals hold the headers (pytest -l)
    secret_values = tuple(secrets)
    scrubber = Scrubber(secret_values)
    if breaker is not None:
        breaker.check(what, scrub(url, secret_values))
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
        failed_status: int | None = None  # the status of a retryable HTTP failure
        try:
            request = urllib.request.Request(url, data=data, headers=request_headers,
                                             method=method)
            setattr(request, _DEADLINE, time.monotonic() + policy.timeout)
            with _OPENER.open(request, timeout=policy.timeout) as reply:
                status = reply.status
                raw = reply.read()
        except CrossOriginRedirect as redirect:
            raise RedirectRefused(
                scrub(
                    f"{what}: {url} answered HTTP {redirect.status}, a redirect to "
                    f"{redirect.location}, another origin; not followed, so that no "
                    "credential leaves the origin you configured: set the URL to the address "
                    "it redirects to",
                    secret_values,
                )
            ) from None
        except urllib.error.HTTPError as error:
            status = error.code
            raw = _read_error_body(error)
            message = server_message(raw)
            if status != 429 and status < 500:
                hint = client_error_hint(status, message)
                detail = f": {message}" if message else ""
                text = scrub(f"{what}: HTTP {status} from {url}{detail}; {hint}", secret_values)
                if breaker is not None:
                    if status in AUTH_STATUSES:
                        breaker.failed(scrub(f"HTTP {status}{detail}", secret_values))
                    else:
                        breaker.answered()
                raise PipelineError(text, status=status) from None
            retry_after = parse_retry_after(error.headers.get("Retry-After"))
            failure = f"HTTP {status}" + (f": {message}" if message else "")
            failed_status = status
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
            if breaker is not None:
                breaker.answered()
            try:
                text = raw.decode("utf-8")
                body = json.loads(text)
            except RecursionError:
                raise PipelineError(
                    f"{what}: {url} answered HTTP {status} with JSON nested too deeply to "
                    "read; check that the URL points at the API"
                ) from None
            except (UnicodeDecodeError, ValueError):
                raise PipelineError(
                    scrub(
                        f"{what}: {url} answered HTTP {status} with a body that is not JSON: "
                        f"{_one_line(raw.decode('utf-8', errors='replace'))!r}; check that the "
                        "URL points at the API, not a web page or proxy",
                        secret_values,
                    )
                ) from None
            # Everything read from a reply (answers, error messages that quote it, key
            # lists) comes from the scrubbed body: an echoed key reaches none of them.
            # A reply whose text holds no spelling of a secret and no escape (through
            # which JSON could spell one otherwise) has none to scrub: skipping the walk
            # saves a pass over every number of an embeddings reply.
            if scrubber and (scrubber.found_in(text) or "\\" in text):
                body = scrubber.json(body)
            return Response(status=status, body=body, attempts=attempt, latency_s=latency)
        if attempt > policy.max_retries:
            if breaker is not None:
                breaker.failed(scrub(failure, secret_values))
            raise PipelineError(
                scrub(
                    f"{what}: {url} failed after {attempt} attempt(s), last: {failure}; check "
                    "that the service is up, or raise timeout / max_retries",
                    secret_values,
                ),
                status=failed_status,
                transport=True,
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
