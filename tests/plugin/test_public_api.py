"""The public-API guard of these tests allows every module the docs name, and only those."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

import tests.plugin.conftest as guard
from tests.plugin.conftest import PUBLIC, SHARED

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


def test_every_shared_helper_exists_and_imports_only_the_public_api() -> None:
    for module in sorted(SHARED):
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        assert path.is_file(), module
        assert guard._private_imports(path) == (), module


def test_a_private_import_through_a_shared_helper_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helpers = tmp_path / "tests"
    helpers.mkdir()
    (helpers / "_data.py").write_text("import json\n", encoding="utf-8")
    (helpers / "_leaky.py").write_text("from pytest_ragev.core.types import QAPair\n",
                                       encoding="utf-8")
    test = tmp_path / "test_x.py"
    test.write_text("from tests._data import QUERIES\nfrom tests._leaky import QAPair\n"
                    "from tests.unit.gate._runs import make_run\n", encoding="utf-8")
    monkeypatch.setattr(guard, "ROOT", tmp_path)
    monkeypatch.setattr(guard, "SHARED", SHARED | {"tests._leaky"})
    assert guard._private_imports(test) == (
        "pytest_ragev.core.types (through tests._leaky)",
        "tests.unit.gate._runs (not a shared helper: SHARED in tests/plugin/conftest.py)",
    )
