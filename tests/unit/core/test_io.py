"""Unit tests of the atomic writes' file permissions."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.core.io import atomic_write_json, atomic_write_text, dumps_json

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


def test_record_lists_are_one_compact_object_per_line() -> None:
    data = {"run": {"questions": [{"qid": 1, "q": "什么是 RAG？"}, {"qid": 2, "q": "Was ist das?"}],
                    "settings": {"top_k": 5}},
            "questions": [], "other": [{"a": 1}]}
    text = dumps_json(data, records=("questions",))
    assert json.loads(text) == data
    assert '    "questions": [\n      {"qid":1,"q":"什么是 RAG？"},\n      {"qid":2,' in text
    # Other lists keep the indented layout; an empty record list stays [].
    assert '"other": [\n    {\n      "a": 1' in text and '"questions": [],' in text
    assert dumps_json(data) == json.dumps(data, ensure_ascii=False, indent=2) + "\n"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["questions", "samples", "x", "\u0000", '"']), inner,
                      max_size=4),
    max_leaves=20,
)


@given(_json)
def test_dumps_json_with_records_parses_to_the_same_value(value: object) -> None:
    assert json.loads(dumps_json(value, records=("questions", "samples"))) == value
