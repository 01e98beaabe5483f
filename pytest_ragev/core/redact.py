"""Secrets: which keys name one, and copies of settings with every secret hidden.

Settings snapshots land in reports and committed baselines, and ``repr()`` of settings
objects in tracebacks (``pytest -l``): every one of them goes through :func:`redact`.
A credential held at run time is a :class:`Secret`, whose ``repr()`` is ``***``.
URLs carry credentials too (``https://user:password@host``, ``?api_key=...``): any
string value is cleaned of those (:func:`redact_urls`), whatever its key.
"""

from __future__ import annotations

import itertools
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Words that make a key name a secret wherever they appear in it (``client_secret``,
#: ``db_password``, ``Proxy-Authorization``). Key names are split into words at ``_``,
#: ``-``, ``.``, spaces and camelCase humps before matching.
_SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "secret", "secrets", "credential", "credentials",
    "authorization", "bearer", "apikey", "cookie",
})
#: Key names that are secrets as a whole word (``auth = "user:pass"``), not as a part.
#: (A lone ``key`` or ``token`` is a secret too: the ``<word>_key`` / ``<word>_token``
#: rules of :func:`is_secret_key` already decide those.)
_SECRET_NAMES = frozenset({"auth"})
#: A last word that ends a secret even when glued to the word before (``authtoken``).
_SECRET_SUFFIXES = ("apikey", "password", "passwd", "passphrase", "secret", "token")
#: ``<word>_token`` knobs that count or name tokenizer tokens, not credentials.
_TOKEN_KNOBS = frozenset({
    "max", "min", "num", "n", "total", "eos", "bos", "pad", "unk", "sep", "cls", "mask",
    "stop", "start", "end", "special",
})
#: ``<word>_key`` knobs that name a field or a lookup key, not a credential.
_KEY_KNOBS = frozenset({
    "sort", "cache", "answer", "kb", "group", "partition", "primary", "foreign", "join",
    "index", "lookup", "dedup", "hash", "shard", "routing", "id", "field", "dict", "metadata",
    "order", "record", "row", "doc", "document", "result", "response", "json", "text",
    "content", "score", "passage", "query", "question", "context", "contexts",
})
#: ``<word>_key`` anywhere in a key names a credential (``private_key_pem``).
_KEY_QUALIFIERS = frozenset({
    "api", "private", "access", "secret", "signing", "encryption", "ssh", "client", "master",
    "license", "service", "account", "auth", "session", "subscription", "admin", "app",
})
#: Last words of keys that name where a secret lives (``api_key_env``): safe to show.
_POINTER_WORDS = frozenset({"env", "file"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")
#: ``${VAR}``: a reference to an environment variable, expanded only when used; group 1
#: is the variable's name.
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: What may surround the references of a value that holds no literal secret.
_TEMPLATE_REST = re.compile(r"^(?:(?:bearer|basic|token|digest|apikey|api-key)(?=\s|$))?[\W_]*$",
                            re.I)
REDACTED = "***"
#: A URL: scheme, authority (up to the path, query or fragment) and the rest up to the
#: fragment. Only the authority's userinfo and the query's values are ever changed.
_URL = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^\s/?#]*)([^\s#]*)")
#: One ``name=value`` parameter of a query string.
_QUERY_PARAMETER = re.compile(r"(?<=[?&;])([^=&;#\s]+)=([^&;#\s]*)")


class Secret(str):
    """A credential: the real value for ``str()``, f-strings and HTTP, ``***`` for ``repr()``.

    Frame locals shown by ``pytest -l``, assertion rewriting and debug dumps use
    ``repr()``, so a key held in a :class:`Secret` never reaches them.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(REDACTED)


def _words(key: str) -> list[str]:
    return [word for word in _NOT_WORD.split(_CAMEL.sub("_", key).lower()) if word]


def is_secret_key(key: str) -> bool:
    """Whether a settings or header key names a secret (``api_key``, ``X-Auth-Token``).

    Whole words decide, not substrings: ``max_tokens``, ``tokenize`` and ``keyword_weight``
    are knobs; ``api_key``, ``private_key``, ``access_token``, ``password``, ``client_secret``,
    ``credentials``, ``passphrase`` and ``Authorization`` are secrets. ``<field>_key`` and
    ``<count>_token`` knobs (``sort_key``, ``text_key``, ``pad_token``) are not, and keys
    that point at a secret (``api_key_env``, ``password_file``) are safe to show.
    """
    words = _words(key)
    if not words or words[-1] in _POINTER_WORDS or words[-2:] == ["env", "var"]:
        return False
    if any(word in _SECRET_WORDS for word in words):
        return True
    pairs = itertools.pairwise(words)
    if any(word == "key" and before in _KEY_QUALIFIERS for before, word in pairs):
        return True
    last = words[-1]
    if last == "pass" and len(words) > 1:  # db_pass, smtp_pass
        return True
    before = words[-2] if len(words) > 1 else None
    if last == "key":
        return before is None or before not in _KEY_KNOBS
    if last == "token":
        return before is None or before not in _TOKEN_KNOBS
    if len(words) == 1 and last in _SECRET_NAMES:
        return True
    return any(last.endswith(suffix) and last != suffix for suffix in _SECRET_SUFFIXES)


def is_reference_only(value: str) -> bool:
    """Whether ``value`` holds ``${VAR}`` references and no literal secret.

    ``"${RAG_TOKEN}"``, ``"Bearer ${RAG_TOKEN}"`` and ``"${USER}:${PASS}"`` are templates,
    recorded as written; ``"sk-abc${X}"`` or ``"Bearer sk-abc"`` hold a literal and are not.
    """
    if not REFERENCE.search(value):
        return False
    rest = REFERENCE.sub(" ", value).strip()
    return bool(_TEMPLATE_REST.match(rest))


def _url_credentials(match: re.Match[str]) -> tuple[str, str, list[str]]:
    """``(redacted authority, redacted rest, the credentials found)`` of one URL."""
    authority, rest = match.group(2), match.group(3)
    found: list[str] = []
    userinfo, at, host = authority.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if at and colon and password and not is_reference_only(password):
        found.append(password)
        authority = f"{user}:{REDACTED}@{host}"

    def parameter(part: re.Match[str]) -> str:
        name, value = part.group(1), part.group(2)
        if value and is_secret_key(name) and not is_reference_only(value):
            found.append(value)
            return f"{name}={REDACTED}"
        return part.group(0)

    query_at = rest.find("?")
    if query_at >= 0:
        rest = rest[:query_at] + _QUERY_PARAMETER.sub(parameter, rest[query_at:])
    return authority, rest, found


def redact_urls(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``.

    A URL's password (``http://user:***@host``) and the values of query parameters whose
    name :func:`is_secret_key` accepts (``?api_key=***``) go; the user name, host, path and
    other parameters stay, so the URL still says where requests went.
    """
    if "://" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        authority, rest, _ = _url_credentials(match)
        return f"{match.group(1)}{authority}{rest}"

    return _URL.sub(replace, text)


def url_secrets(text: str) -> list[str]:
    """The credentials :func:`redact_urls` hides in ``text``, as written and percent-decoded
    (for scrubbing them out of error messages)."""
    found: list[str] = []
    for match in _URL.finditer(text):
        for value in _url_credentials(match)[2]:
            found.append(value)
            decoded = urllib.parse.unquote(value)
            if decoded != value:
                found.append(decoded)
    return found


def _hide(value: Any) -> Any:
    # The value of a secret key: templates and empty values stay, every literal goes.
    if value is None or value == "":
        return value
    if isinstance(value, str):
        return value if is_reference_only(value) else REDACTED
    if isinstance(value, Mapping):
        return {str(key): _hide(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_hide(item) for item in value]
    return REDACTED


def redact(value: Any) -> Any:
    """A copy of a settings value with every secret replaced by ``***``.

    A secret is the value of a key :func:`is_secret_key` accepts, unless it is only a
    ``${VAR}`` template (:func:`is_reference_only`): the template names a variable and
    holds no secret. Keys that *point at* a secret (``api_key_env``) stay visible. Every
    other string loses the credentials of the URLs it holds (:func:`redact_urls`).
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            key_str = str(key)
            out[key_str] = _hide(item) if is_secret_key(key_str) else redact(item)
        return out
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return redact_urls(value)
    return value
