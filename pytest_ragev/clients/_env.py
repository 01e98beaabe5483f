"""``${VAR}`` references in header values: expanded at call time, never stored expanded."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from pytest_ragev.core.errors import PipelineError
from pytest_ragev.core.redact import REFERENCE, Secret, is_secret_key, redact


def expand_headers(headers: Mapping[str, str], *, where: str) -> tuple[dict[str, str], list[str]]:
    """Headers with ``${VAR}`` expanded from the environment, and the expanded values.

    The second item lists every substituted value (and literal credentials), so error
    messages can scrub them; both hold them as :class:`Secret` (``repr()`` is ``***``).
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
