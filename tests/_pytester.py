"""Helpers of the end-to-end tests: a run on the project ``make_project`` wrote, a file read back.

Imported by ``tests/plugin/``, so it imports nothing of ``pytest_ragev`` (the guard in
``tests/plugin/conftest.py`` reads it as it reads a test module).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

#: The ``dist`` parameters of a test run serially and under xdist: the ``-n 2`` run starts
#: two workers, which takes seconds, so it is marked slow (``dist0``, ``dist1``).
SERIAL_AND_XDIST = [[], pytest.param(["-n", "2"], marks=pytest.mark.slow)]


def run_ragev(pytester: pytest.Pytester, *args: str, cache: bool = False) -> pytest.RunResult:
    """Run pytest in-process on pytester's ``ragev.toml`` with ``args``.

    Without ``cache`` the cache provider is off (``-p no:cacheprovider``): no answer or
    knowledge base is kept from one run of a test to the next, so each run answers anew.
    ``cache=True`` keeps ``.pytest_cache``, for the tests of the caches themselves.
    """
    plugins = () if cache else ("-p", "no:cacheprovider")
    return pytester.runpytest("--ragev-config", "ragev.toml", *plugins, *args)


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``: a report (its body under ``"data"``), a baseline, a snapshot."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def install_line(extra: str) -> str:
    """The pip command a missing-extra message should print here: this checkout's folder
    (the suite runs from ``pip install -e .`` of it, as CI does), editable when pip says
    so. Worked out from pip's own record, not by the package's code."""
    from importlib import metadata

    checkout = Path(__file__).resolve().parents[1]
    records = [dist.read_text("direct_url.json")
               for dist in metadata.distributions(name="pytest-ragev")]
    record = json.loads(next(text for text in records if text))
    editable = "-e " if record.get("dir_info", {}).get("editable") else ""
    return f"pip install {editable}'{checkout}[{extra}]'"
