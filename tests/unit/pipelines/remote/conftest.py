"""Fixtures of the remote clients' unit tests."""

from __future__ import annotations

import pytest

from pytest_ragev.pipelines.remote import _retry


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The retry waits of the remote clients, recorded instead of slept through.

    A module whose tests only need the retries fast says ``pytestmark =
    pytest.mark.usefixtures("waits")``; a test that checks the waits requests the list.
    """
    recorded: list[float] = []
    monkeypatch.setattr(_retry, "_sleep", recorded.append)
    return recorded
