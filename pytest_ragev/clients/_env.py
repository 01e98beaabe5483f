"""``${VAR}`` references in header values: expanded at call time, never stored expanded."""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping

from pytest_ragev.core.errors import PipelineError
from pytest_ragev.core.redact import REFERENCE, Secret, is_secret_key, redact

#: Schemes of a credential header's value (``Bearer <token>``): the token alone is a
#: secret too, since a server may echo it without the scheme.
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey", "api-key"})
#: Shorter parts are not scrubbed on their own (they would blank out ordinary words).
_MIN_PART = 6


def credential_parts(value: str) -> list[str]:
    """The parts of a credential header's value a server may echo alone: the token after
    the scheme (``Bearer sk-...``), and for ``Basic`` the decoded ``user:password`` and
    the password."""
    scheme, _, rest = value.strip().partition(" ")
    rest = rest.strip()
    if scheme.lower() not in _AUTH_SCHEMES or len(rest) < _MIN_PART:
        return []
    parts = [rest]
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(rest, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return parts
        password = decoded.partition(":")[2]
        parts += [part for part in (decoded, password) if len(part) >= _MIN_PART]
    return parts


def expand_headers(headers: Mapping[str, str], *, where: str) -> tuple[dict[str, str], list[str]]:
    """Headers with ``${VAR}`` expanded from the environment, and the expanded values.

    The second item lists every substituted value (and literal credentials, with the
    token of ``Bearer <token>`` on its own: :func:`credential_parts`), so error messages
    and replies can be scrubbed of them; both hold them as :class:`Secret` (``repr()`` is
    ``***``).
    """
    __tracebackhide__ = True
    expanded: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in headers.items():

        def substitute(match: re.Match[str], header: str = name) -> str:
            __tracebackhide__ = True
            var = match.group(1)
            found = os.environ.get(var)
            if found is None:
                raise PipelineError(
                    f"{where}: header {header!r} refers to ${{{var}}}, which is not set in the "
                    f"environment; export {var}=... before running pytest"
                )
            secrets.append(Secret(found))
            return found

        filled = REFERENCE.sub(substitute, value)
        # A value with a substituted variable, or a literal credential, is kept hidden.
        hidden = filled != value or is_secret_key(name)
        expanded[name] = Secret(filled) if hidden else filled
        if hidden and filled == value and value:
            secrets.append(Secret(value))
        if hidden:
            secrets.extend(Secret(part) for part in credential_parts(filled))
    return expanded, secrets


def snapshot_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers as written, with literal credentials replaced by ``***``.

    This is :func:`~pytest_ragev.core.redact.redact` (the settings' own rules): a credential
    header whose value is only a ``${VAR}`` template is shown; ``"Bearer sk-... ${X}"``
    holds a literal and is not.
    """
    snapshot: dict[str, str] = redact(dict(headers))
    return snapshot


def unset_references(headers: Mapping[str, str]) -> list[str]:
    """The ``${VAR}`` names in ``headers`` that the environment does not set, in order."""
    missing: list[str] = []
    for value in headers.values():
        for var in REFERENCE.findall(value):
            if var not in os.environ and var not in missing:
                missing.append(var)
    return missing
