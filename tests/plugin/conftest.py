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


@functools.cache
def _private_imports(path: Path) -> tuple[str, ...]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    allowed = PUBLIC
    return tuple(sorted({n for n in names if n.startswith("pytest_ragev") and n not in allowed}))


@pytest.fixture(autouse=True)
def _plugin_tests_use_the_public_api(request: pytest.FixtureRequest) -> None:
    private = _private_imports(Path(request.node.path))
    if private:
        pytest.fail(
            f"{request.node.path.name} imports {', '.join(private)}; end-to-end tests use the "
            "public API only (test internals in tests/unit/)",
            pytrace=False,
        )
