"""Unit tests: one module of the package each, called directly, never through pytester."""

from __future__ import annotations

import pytest

from pytest_ragev.clients import _retry


@pytest.fixture(autouse=True)
def _unit_tests_do_not_run_pytest(request: pytest.FixtureRequest) -> None:
    # The house rule of the test tree: end-to-end runs live in tests/plugin/.
    if "pytester" in request.fixturenames:
        pytest.fail(
            f"{request.node.nodeid}: a unit test requests pytester; move it to tests/plugin/",
            pytrace=False,
        )


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The HTTP clients' retry waits, recorded instead of slept through.

    A module whose tests only need the retries fast says ``pytestmark =
    pytest.mark.usefixtures("waits")``; a test that checks the waits requests the list.
    """
    recorded: list[float] = []
    monkeypatch.setattr(_retry, "_sleep", recorded.append)
    return recorded
