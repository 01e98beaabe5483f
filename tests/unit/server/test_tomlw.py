"""tomlw.dumps is the inverse of tomllib.loads for what a ragev.toml holds."""

from __future__ import annotations

import math
import tomllib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.server.tomlw import dumps

_keys = st.text(min_size=1, max_size=12)
_scalars = st.one_of(
    st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False), st.text(max_size=30),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)
_documents = st.dictionaries(_keys, _values | st.lists(
    st.dictionaries(_keys, _scalars, min_size=1, max_size=3), min_size=1, max_size=3),
    max_size=6)


def test_a_key_ending_in_a_newline_is_quoted() -> None:
    # Found by the round trip below: a regex "$" matches before a final newline.
    assert dumps({"0\n": 1}) == '"0\\n" = 1\n'
    assert tomllib.loads(dumps({"0\n": {"a": 1}})) == {"0\n": {"a": 1}}


@given(_documents)
def test_round_trip(document: dict[str, Any]) -> None:
    assert tomllib.loads(dumps(document)) == document


def test_a_ragev_config_reads_back() -> None:
    document = {
        "dataset": {"path": "/data/常见问题", "id": "faq"},
        "pipeline": {"name": "builtin", "chunk_size": 256, "separators": ["\n\n", "。"],
                     "chat": {"model": "extractive", "max_tokens": 96}},
        "thresholds": {"recall": 0.9},
        "variants": [{"name": "k-256", "pipeline": {"chunk_size": 256}}],
    }
    text = dumps(document)
    assert "[pipeline.chat]" in text and "[[variants]]" in text
    assert tomllib.loads(text) == document


def test_special_floats_and_bad_values() -> None:
    back = tomllib.loads(dumps({"a": math.inf, "b": -math.inf, "c": math.nan}))
    assert back["a"] == math.inf and back["b"] == -math.inf and math.isnan(back["c"])
    with pytest.raises(TypeError, match="NoneType"):
        dumps({"a": None})
