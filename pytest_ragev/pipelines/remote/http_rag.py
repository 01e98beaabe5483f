"""``[pipeline] name = "http"``: evaluate a deployed RAG service over HTTP.

Each question becomes one JSON request built from the ``body`` template; the answer and
the retrieved contexts are read from the JSON reply with small paths (see ``_paths``).
A ``user:password@`` in ``url`` is sent as HTTP Basic authentication (``urllib`` cannot
send it itself) and never recorded: snapshots, ``repr()`` and errors show ``***``.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragev.clients import (
    DEFAULT_LIMIT,
    PREFLIGHT_TIMEOUT_S,
    Breaker,
    Response,
    RetryPolicy,
    expand_headers,
    send,
    snapshot_headers,
    unset_references,
)
from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import PipelineError
from pytest_ragev.core.redact import Secret, redact_urls, url_secrets
from pytest_ragev.core.tables import Table, check_placeholders, fill
from pytest_ragev.core.types import Answer, Chunk, PipelineSettings, QAPair, Retrieved
from pytest_ragev.pipelines.remote._paths import JsonPath, PathMissError, PathSyntaxError

HTTP_KEYS = (
    "name", "url", "method", "headers", "body", "answer_path", "contexts_path", "ids_path",
    "usage_path", "timeout", "max_retries", "retry_backoff", "max_consecutive_failures",
)
#: Refusals of the preflight request that every question would meet too.
_PREFLIGHT_FATAL = frozenset({401, 403, 404, 405})
_PLACEHOLDERS = ("question", "qid")
_METHODS = ("POST", "PUT", "GET")
DEFAULT_BODY: Mapping[str, Any] = {"query": "{question}"}


class HttpRagPipeline:
    """Sends every question to ``url`` and reads answer, contexts and ids from the reply.

    Holds no mutable state after construction, so :meth:`answer` is thread-safe.
    """

    def __init__(self, settings: PipelineSettings, *, source: Path | str) -> None:
        opts = Table(settings.options, where="[pipeline]", source=source)
        opts.check_keys(HTTP_KEYS)
        url = opts.string("url", required=True)
        assert url is not None
        if not url.startswith(("http://", "https://")):
            raise opts.fail("url", url, "write the full endpoint, e.g. "
                                        "url = \"http://127.0.0.1:8080/api/v1/chat\"")
        # Shown in its errors: the URL without its credentials.
        check_placeholders(opts, "url", redact_urls(url), allowed=_PLACEHOLDERS)
        target, basic = _split_credentials(url)
        method = (opts.string("method", "POST") or "").upper()
        if method not in _METHODS:
            raise opts.fail("method", settings.options.get("method"),
                            "use one of " + ", ".join(_METHODS))
        if "body" in settings.options:
            body = settings.options["body"]
            if method == "GET":
                raise opts.fail("body", body, "a GET request carries no body; put {question} "
                                              "in url or use method = \"POST\"")
            if not isinstance(body, Mapping | list):
                raise opts.fail("body", body, "write it as a table, e.g. "
                                              "body = { query = \"{question}\" }")
        else:
            body = None if method == "GET" else dict(DEFAULT_BODY)
        if body is not None:
            _check_body(opts, body)
        self.url = redact_urls(url)
        self.method = method
        self.body: Any = body
        self.headers = opts.string_table("headers")
        if basic is not None and any(name.lower() == "authorization" for name in self.headers):
            raise opts.fail("url", self.url, "the URL holds user:password and headers set "
                            "Authorization too; give the credentials in one place")
        # The request URL (userinfo removed) and the credentials from the URL, held as
        # Secrets out of repr(); every error message is scrubbed of them.
        self._target = target
        self._basic = basic
        self._url_secrets = [Secret(value) for value in url_secrets(url)]
        if basic is not None:
            self._url_secrets.append(basic)
        answer_path = _path(opts, "answer_path", "answer")
        assert answer_path is not None
        self.answer_path: JsonPath = answer_path
        contexts = _path(opts, "contexts_path", None)
        ids = _path(opts, "ids_path", None)
        self.contexts_path = contexts
        self.ids_path = ids
        #: Where the reply's token counts are (an OpenAI-style ``usage`` object), if anywhere.
        self.usage_path = _path(opts, "usage_path", None)
        timeout = opts.number("timeout", 60.0, low=0.0, low_open=True, example="60")
        retries = opts.integer("max_retries", 3, low=0, example="3")
        backoff = opts.number("retry_backoff", 0.5, low=0.0, example="0.5")
        assert timeout is not None and retries is not None and backoff is not None
        self.policy = RetryPolicy(timeout=timeout, max_retries=retries, backoff=backoff)
        stop_after = opts.integer("max_consecutive_failures", DEFAULT_LIMIT, low=0, example="5")
        assert stop_after is not None
        self.breaker = Breaker(stop_after, knob="[pipeline] max_consecutive_failures")

    def __repr__(self) -> str:
        return f"HttpRagPipeline(url={self.url!r}, method={self.method!r})"


    def snapshot(self) -> dict[str, Any]:
        """Every knob with defaults; headers as written (``${VAR}``), literal credentials hidden."""
        return {
            "name": "http",
            **self._answer_knobs(),
            "timeout": self.policy.timeout,
            "max_retries": self.policy.max_retries,
            "retry_backoff": self.policy.backoff,
            "max_consecutive_failures": self.breaker.limit,
        }

    def _answer_knobs(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "method": self.method,
            "headers": snapshot_headers(self.headers),
            "body": self.body,
            "answer_path": self.answer_path.text,
            "contexts_path": self.contexts_path.text if self.contexts_path else None,
            "ids_path": self.ids_path.text if self.ids_path else None,
            # Only when set: answer keys (and cached answers) of configs without it stay.
            **({"usage_path": self.usage_path.text} if self.usage_path else {}),
        }

    def kb_key(self) -> str | None:
        """The service owns its knowledge base: none is built here."""
        return None

    def answer_key(self) -> str:
        """sha256 of the knobs that shape the request and the reading of the reply."""
        return sha256_json({"name": "http", **self._answer_knobs()})

    def request_body(self, case: QAPair) -> Any:
        """The JSON body for ``case`` (``None`` for GET)."""
        if self.body is None:
            return None
        return _render(self.body, case)

    def request_url(self, case: QAPair) -> str:
        """``url`` with ``{question}``/``{qid}`` filled in, URL-encoded (without a
        ``user:password@``, which travels as a header)."""
        return fill(self._target, {"question": urllib.parse.quote(case.question, safe=""),
                                   "qid": str(case.qid)})

    def missing_environment(self) -> list[str]:
        """One line per ``${VAR}`` of the headers that the environment does not set."""
        return [f"[pipeline] headers refer to ${{{var}}}, which is not set; export {var}=... "
                "before running pytest" for var in unset_references(self.headers)]

    def preflight(self, case: QAPair) -> str | None:
        """Ask the service about ``case`` once before the run: ``None`` when it answers,
        else why no question could be answered (one line). No connection or no answer in
        time (one retry), and 401, 403, 404 or 405 stop the run; any other reply, an error
        about this question included, shows a service that is there. The answer itself is
        not used: the question is asked again in its turn."""
        __tracebackhide__ = True  # its locals hold the expanded headers (pytest -l)
        policy = RetryPolicy(timeout=min(self.policy.timeout, PREFLIGHT_TIMEOUT_S),
                                    max_retries=min(self.policy.max_retries, 1),
                                    backoff=self.policy.backoff)
        try:
            self._send(case, policy, f"[pipeline] http preflight (qid {case.qid})", None)
        except PipelineError as error:
            if error.status is None or error.status in _PREFLIGHT_FATAL:
                return str(error)  # no response at all, or a refusal every question meets
        return None

    def _send(self, case: QAPair, policy: RetryPolicy, what: str,
              breaker: Breaker | None) -> Response:
        __tracebackhide__ = True  # its locals hold the expanded headers (pytest -l)
        headers, secrets = expand_headers(self.headers, where="[pipeline] headers")
        if self._basic is not None:
            headers["Authorization"] = self._basic
        secrets += self._url_secrets
        return send(
            method=self.method,
            url=self.request_url(case),
            headers=headers,
            payload=self.request_body(case),
            policy=policy,
            what=what,
            client_error_hint=_hint,
            secrets=secrets,
            breaker=breaker,
        )

    def answer(self, case: QAPair, kb: object | None = None) -> Answer:
        """Ask the service about ``case``; :class:`PipelineError` on any failure."""
        __tracebackhide__ = True  # its locals hold the expanded headers (pytest -l)
        what = f"[pipeline] http qid {case.qid}"
        response = self._send(case, self.policy, what, self.breaker)
        reply = response.body
        text = self._read(self.answer_path, "answer_path", reply, what)
        if not isinstance(text, str):
            raise PipelineError(
                f"{what}: answer_path = {self.answer_path.text!r} gave {_show(text)}, not a "
                "string; point it at the answer text"
            )
        retrieved = self._retrieved(reply, what)
        meta: dict[str, Any] = {"latency_s": response.latency_s, "attempts": response.attempts}
        if self.usage_path is not None:
            usage = self._read(self.usage_path, "usage_path", reply, what)
            if not isinstance(usage, Mapping):
                raise PipelineError(
                    f"{what}: usage_path = {self.usage_path.text!r} gave {_show(usage)}, not "
                    "an object; point it at the token counts, e.g. {\"prompt_tokens\": 12, "
                    "\"completion_tokens\": 5}"
                )
            meta["usage"] = dict(usage)
        return Answer(retrieved=retrieved, text=text, meta=meta)

    def _retrieved(self, reply: Any, what: str) -> list[Retrieved]:
        texts = ids = None
        if self.contexts_path is not None:
            texts = _list_of(self._read(self.contexts_path, "contexts_path", reply, what),
                             str, "contexts_path", self.contexts_path, what)
        if self.ids_path is not None:
            raw_ids = _list_of(self._read(self.ids_path, "ids_path", reply, what),
                               (int, str), "ids_path", self.ids_path, what)
            ids = [_passage_id(value, self.ids_path, what) for value in raw_ids]
        if texts is not None and ids is not None:
            if len(texts) != len(ids):
                raise PipelineError(
                    f"{what}: contexts_path gave {len(texts)} item(s) but ids_path "
                    f"{len(ids)}; both must walk the same list"
                )
            return [Chunk(text=t, passage_id=i) for t, i in zip(texts, ids, strict=True)]
        if texts is not None:
            return [Chunk(text=t) for t in texts]
        if ids is not None:
            return list(ids)
        return []

    @staticmethod
    def _read(path: JsonPath, key: str, reply: Any, what: str) -> Any:
        try:
            return path.get(reply)
        except PathMissError as miss:
            top = (", ".join(sorted(map(str, reply))) or "none") if isinstance(reply, Mapping) \
                else f"none, the reply is a JSON {type(reply).__name__}"
            raise PipelineError(
                f"{what}: {key} = {path.text!r} not found in the reply at {miss.at} "
                f"({miss.reason}); top-level keys: {top}"
            ) from None

    def close(self) -> None:
        """Nothing to release: every request opens and closes its own connection."""


def _path(opts: Table, key: str, default: str | None) -> JsonPath | None:
    text = opts.string(key, default)
    if text is None:
        return None
    try:
        return JsonPath.parse(text)
    except PathSyntaxError as error:
        raise opts.fail(key, text, f"{error} (paths look like data.contexts[*].text)") from None


def _check_body(opts: Table, value: Any) -> None:
    if isinstance(value, str):
        check_placeholders(opts, "body", value, allowed=_PLACEHOLDERS)
    elif isinstance(value, Mapping):
        for item in value.values():
            _check_body(opts, item)
    elif isinstance(value, list):
        for item in value:
            _check_body(opts, item)


def _render(value: Any, case: QAPair) -> Any:
    if isinstance(value, str):
        # A string that is exactly "{qid}" becomes the number, so services get an int.
        if value == "{qid}":
            return case.qid
        return fill(value, {"question": case.question, "qid": str(case.qid)})
    if isinstance(value, Mapping):
        return {key: _render(item, case) for key, item in value.items()}
    if isinstance(value, list):
        return [_render(item, case) for item in value]
    return value


def _list_of(value: Any, kind: type | tuple[type, ...], key: str, path: JsonPath,
             what: str) -> list[Any]:
    items = value if isinstance(value, list) else None
    if items is None or any(isinstance(v, bool) or not isinstance(v, kind) for v in items):
        bad = value if items is None else next(
            v for v in items if isinstance(v, bool) or not isinstance(v, kind)
        )
        raise PipelineError(
            f"{what}: {key} = {path.text!r} must give a list of "
            f"{'strings' if kind is str else 'passage ids'}, found {_show(bad)}"
        )
    return items


def _passage_id(value: int | str, path: JsonPath, what: str) -> int:
    number = value if isinstance(value, int) else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    if number is not None and number >= 0:
        return number
    shown = value if len(str(value)) <= 40 else f"{str(value)[:37]}..."
    raise PipelineError(
        f"{what}: ids_path = {path.text!r} gave {shown!r}, not a passage id; the dataset's "
        "passage ids are integers, 0 or more"
    )


def _show(value: Any) -> str:
    kind = "null" if value is None else type(value).__name__
    try:
        shown = json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):
        shown = "(nested too deeply to show)"
    return f"{kind} {shown[:60]}"


def _split_credentials(url: str) -> tuple[str, Secret | None]:
    """``url`` without a ``user:password@``, and the Basic ``Authorization`` value for it."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    target = urllib.parse.urlunsplit(parts._replace(netloc=host))
    pair = f"{urllib.parse.unquote(parts.username or '')}:" \
           f"{urllib.parse.unquote(parts.password or '')}"
    token = base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return target, Secret(f"Basic {token}")


def _hint(status: int, message: str) -> str:
    if status in (401, 403):
        return "check the credentials in [pipeline] headers"
    if status == 404:
        return "check [pipeline] url"
    if status in (400, 422):
        return "check that [pipeline] body matches what the service expects"
    return "check the [pipeline] settings against the service's API"

