"""Unit tests: one module of the package each, called directly, never through pytester."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _unit_tests_do_not_run_pytest(request: pytest.FixtureRequest) -> None:
    # The house rule of the test tree: end-to-end runs live in tests/plugin/.
    if "pytester" in request.fixturenames:
        pytest.fail(
            f"{request.node.nodeid}: a unit test requests pytester; move it to tests/plugin/",
            pytrace=False,
        )
