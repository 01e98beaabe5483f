"""The Guard's JSON depth: counted over the text, brackets inside strings skipped."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.server.guard import json_depth


@pytest.mark.parametrize(("text", "depth"), [
    (b"{}", 1), (b'{"a": [1, {"b": []}]}', 4), (b"[" * 40 + b"]" * 40, 40),
    (b'{"dataset_id": "[[[[{{{{"}', 1), (b'{"k": "\\"[[[\\\\", "v": [[]]}', 3),
    (b'"text"', 0), (b"", 0), ("{\"长城\": [\"[北京]\"]}".encode(), 2),
])
def test_depth(text: bytes, depth: int) -> None:
    assert json_depth(text) == depth


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(), inner, max_size=3), max_leaves=20)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(JSON)
def test_depth_of_any_json_is_its_nesting(value: object) -> None:
    assert json_depth(json.dumps(value, ensure_ascii=False).encode()) == _depth(value)
