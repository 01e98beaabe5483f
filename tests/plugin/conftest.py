"""End-to-end tests: real pytest runs through pytester, using the public API only."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

#: The modules a user may import: the package faces the docs name, and the modules the
#: docs send users to (CacheWarning's module, jieba's set-up).
#: tests/plugin/test_public_api.py checks that every module the docs name is here.
PUBLIC = frozenset({
    "pytest_ragev", "pytest_ragev.cli", "pytest_ragev.dataset", "pytest_ragev.gate",
    "pytest_ragev.metrics", "pytest_ragev.pipelines",
    "pytest_ragev.pipelines.builtin", "pytest_ragev.pipelines.remote", "pytest_ragev.report",
    "pytest_ragev.core.errors", "pytest_ragev.core.segment", "pytest_ragev.clients",
})


#: The shared test modules (``tests/_*.py``) end-to-end tests may import. The guard reads
#: each one a test imports as it reads the test, so a helper brings in nothing private.
SHARED = frozenset({
    "tests._data", "tests._judge_server", "tests._oracle", "tests._pytester",
    "tests._remote_server",
})
#: The repository's root: ``tests.x`` is the file ``ROOT / "tests" / "x.py"``.
ROOT = Path(__file__).resolve().parents[2]


def _imported(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            if node.module == "tests":  # from tests import _oracle
                names += [f"tests.{alias.name}" for alias in node.names]
    return names


@functools.cache
def _private_imports(path: Path) -> tuple[str, ...]:
    """What ``path`` imports that an end-to-end test may not, directly or through a helper."""
    refused: set[str] = set()
    for name in _imported(ast.parse(path.read_text(encoding="utf-8"))):
        if name.startswith("pytest_ragev") and name not in PUBLIC:
            refused.add(name)
        elif name in SHARED:
            helper = ROOT.joinpath(*name.split(".")).with_suffix(".py")
            refused.update(f"{private} (through {name})" for private in _private_imports(helper))
        elif name.startswith("tests.") and not name.startswith("tests.plugin."):
            # tests.plugin.* are end-to-end modules under this guard themselves.
            refused.add(f"{name} (not a shared helper: SHARED in tests/plugin/conftest.py)")
    return tuple(sorted(refused))


@pytest.fixture(autouse=True)
def _plugin_tests_use_the_public_api(request: pytest.FixtureRequest) -> None:
    private = _private_imports(Path(request.node.path))
    if private:
        pytest.fail(
            f"{request.node.path.name} imports {', '.join(private)}; end-to-end tests use the "
            "public API only (test internals in tests/unit/)",
            pytrace=False,
        )
