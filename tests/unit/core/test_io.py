"""Unit tests of the atomic writes' file permissions."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragev.core.io import atomic_write_json, atomic_write_text

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_the_mode_a_plain_open_gives(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "out" / "report.json"
    atomic_write_json(target, {"a": 1})
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert mode(target) == mode(plain) == 0o644


def test_umask_is_respected(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "r.md", "text")
    finally:
        os.umask(old)
    assert mode(tmp_path / "r.md") == 0o640


def test_existing_file_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "baseline.json"
    target.write_text("{}")
    os.chmod(target, 0o664)
    atomic_write_text(target, "{\"new\": true}\n")
    assert mode(target) == 0o664
    assert target.read_text() == "{\"new\": true}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]  # no temp file left
