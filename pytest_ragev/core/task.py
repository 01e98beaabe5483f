"""Task ids: the name of one evaluation, as the original names it.

``evaluation_{unix_ms}_{8 hex}_{dataset_id}``, or with an owner (the person who ran it,
the service's tenant) ``evaluation_{owner}_{unix_ms}_{8 hex}_{dataset_id}``. The plugin
and ``ragev serve`` both name their tasks here.
"""

from __future__ import annotations

import getpass
import os
import secrets
import time
from collections.abc import Mapping

#: Set it to a name to put that name in the task id (CI: the person who pushed).
TASK_USER_ENV = "RAGEV_TASK_USER"


def task_user(asked: bool, environ: Mapping[str, str] | None = None) -> str | None:
    """The name the task id carries: ``$RAGEV_TASK_USER``, else the OS user when
    ``[report] task_user = true``, else none (a report shared outside the machine does
    not say who ran it)."""
    named = (os.environ if environ is None else environ).get(TASK_USER_ENV, "").strip()
    if named:
        return named
    if not asked:
        return None
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def make_task_id(dataset_id: str, owner: str | int | None = None, *,
                 now_ms: int | None = None) -> str:
    """``evaluation_{unix_ms}_{8 hex}_{dataset_id}``; with ``owner`` (a user name, kept
    to letters, digits, ``-`` and ``.``; or a tenant number) the original's
    ``evaluation_{owner}_{unix_ms}_{8 hex}_{dataset_id}``. ``now_ms`` is the creation
    time in milliseconds (default: now)."""
    stamp = int(time.time() * 1000) if now_ms is None else now_ms
    tail = f"{stamp}_{secrets.token_hex(4)}_{dataset_id}"
    if owner is None:
        return f"evaluation_{tail}"
    name = str(owner)
    name = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in name) or "unknown"
    return f"evaluation_{name}_{tail}"
