"""The shared report model of the renderer tests."""

from __future__ import annotations

import pytest

from pytest_ragev.report import ReportModel
from tests.unit.report._models import full_model


@pytest.fixture(scope="module")
def model() -> ReportModel:
    return full_model()
