"""The shared outcome the renderer tests render."""

from __future__ import annotations

import pytest

from pytest_ragev.evaluation import Outcome
from tests.unit.report._models import full_model


@pytest.fixture(scope="module")
def model() -> Outcome:
    return full_model()
