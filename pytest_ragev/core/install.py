"""The pip command that installs an extra of this package, as the user installed it.

No package index serves pytest-ragev yet, so ``pip install 'pytest-ragev[vectors]'``
fails for everyone who installed it from a clone. pip records where a package came
from (``direct_url.json``, PEP 610): a local folder (a clone, editable or not) is named
by its path, so the command a message prints is one that works where it is read.
"""

from __future__ import annotations

import functools
import json
import shlex
from importlib import metadata
from urllib.parse import unquote, urlparse

#: The distribution's name on an index (and in pip's records).
DISTRIBUTION = "pytest-ragev"


@functools.cache
def _source() -> tuple[str, bool] | None:
    """The local folder pip installed this package from, and whether editable; None
    when it came from an index, a wheel file, or cannot be told."""
    try:
        # Every record of the name: run from a clone, its build's ``*.egg-info`` (which
        # holds no direct_url.json) comes before the installed ``*.dist-info``.
        texts = [dist.read_text("direct_url.json")
                 for dist in metadata.distributions(name=DISTRIBUTION)]
        text = next((text for text in texts if text), None)
        record = json.loads(text) if text else None
    except (ValueError, OSError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("dir_info"), dict):
        return None  # an archive or a VCS URL: no folder to name
    url = urlparse(str(record.get("url", "")))
    if url.scheme != "file":
        return None
    return unquote(url.path), bool(record["dir_info"].get("editable"))


def install_command(extra: str, *, reinstall: bool = False) -> str:
    """``pip install`` of ``extra`` from where this package was installed: the clone's
    folder when pip installed it from one (``-e`` kept), else the index name."""
    source = _source()
    flags = "--force-reinstall " if reinstall else ""
    if source is None:
        return f"pip install {flags}'{DISTRIBUTION}[{extra}]'"
    folder, editable = source
    return f"pip install {flags}{'-e ' if editable else ''}{shlex.quote(f'{folder}[{extra}]')}"
