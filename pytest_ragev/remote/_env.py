"""``${VAR}`` references in header values: expanded at call time, never stored expanded."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from pytest_ragev._errors import PipelineError
from pytest_ragev.settings import REDACTED

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Header names whose literal (not ${VAR}) values are credentials.
_SECRET_HEADER = re.compile(r"(authorization|api[_-]?key|token|secret|cookie|password)", re.I)


def references(value: str) -> list[str]:
    """The environment variable names ``value`` refers to as ``${NAME}``."""
    return _REFERENCE.findall(value)


def expand_headers(headers: Mapping[str, str], *, where: str) -> tuple[dict[str, str], list[str]]:
    """Headers with ``${VAR}`` expanded from the environment, and the expanded values.

    The second item lists every substituted value, so error messages can scrub them.
    """
    expanded: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in headers.items():

        def substitute(match: re.Match[str], header: str = name) -> str:
            var = match.group(1)
            found = os.environ.get(var)
            if found is None:
                raise PipelineError(
                    f"{where}: header {header!r} refers to ${{{var}}}, which is not set in the "
                    f"environment; export {var}=... before running pytest"
                )
            secrets.append(found)
            return found

        expanded[name] = _REFERENCE.sub(substitute, value)
    return expanded, secrets


def snapshot_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers as written, with literal credentials (no ``${VAR}``) replaced by ``***``."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        literal_secret = _SECRET_HEADER.search(name) and not references(value)
        out[name] = REDACTED if literal_secret and value else value
    return out
