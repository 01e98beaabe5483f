"""The public-API guard of these tests allows every module the docs name, and only those."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

from tests.plugin.conftest import PUBLIC

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
#: Modules that pytest loads by name (``-p``, the entry point) and no user imports.
LOADED_BY_PYTEST = ("pytest_ragev.plugin", "pytest_ragev.server")
_DOTTED = re.compile(r"\bpytest_ragev(?:\.[A-Za-z_]\w*)+")


def _module_of(dotted: str) -> str:
    """The longest importable module of a dotted name (``pytest_ragev.metrics.tokenize``
    -> ``pytest_ragev.metrics``)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        try:
            if importlib.util.find_spec(candidate) is not None:
                return candidate
        except ModuleNotFoundError:
            continue
    return parts[0]


def _named_in_docs() -> dict[str, list[str]]:
    named: dict[str, list[str]] = {}
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for dotted in _DOTTED.findall(line):
                if not dotted.startswith(LOADED_BY_PYTEST):
                    named.setdefault(dotted, []).append(f"{doc.name}:{number}")
    return named


def test_every_module_the_docs_name_is_allowed_and_has_what_they_name() -> None:
    named = _named_in_docs()
    # docs/baselines.md's Python API: the pattern finds what it must.
    assert "pytest_ragev.gate" in named
    missing = {where[0]: dotted for dotted, where in named.items()
               if _module_of(dotted) not in PUBLIC}
    assert not missing, f"the docs name modules the guard of tests/plugin refuses: {missing}"
    for dotted, where in named.items():
        module = _module_of(dotted)
        value: object = importlib.import_module(module)
        for attribute in dotted[len(module) + 1:].split(".") if dotted != module else ():
            assert hasattr(value, attribute), f"{where[0]}: {dotted} does not exist"
            value = getattr(value, attribute)


def test_every_allowed_module_exists() -> None:
    for module in sorted(PUBLIC):
        assert importlib.util.find_spec(module) is not None, module
