"""The version is written once, in core/version.py: the face and the packaging read it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest_ragev
from pytest_ragev.core import version

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def test_the_face_gives_the_core_version() -> None:
    assert pytest_ragev.__version__ is version.__version__
    assert "__version__" in pytest_ragev.__all__


def test_pyproject_takes_the_version_from_core_version() -> None:
    # A literal `version = "..."` in [project] would be a second place to keep in step.
    pyproject = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "pytest_ragev.core.version.__version__"}


def test_the_version_is_a_plain_release_number() -> None:
    # setuptools reads the attribute without importing the package: keep it a literal.
    source = Path(version.__file__).read_text(encoding="utf-8")
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+(?:\.dev\d+|rc\d+)?"$', source, re.M)
