"""The one TOML-table reader: checked reads, one-line errors, and nested-table helpers."""

from __future__ import annotations

import math

import pytest

from pytest_ragev.core.digest import sha256_json as settings_hash
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.tables import Table, changed_keys, deep_merge, flatten, suggest


def test_reads_return_defaults_and_checked_values() -> None:
    table = Table({"k": 3, "名前": "検索", "on": True, "x": 0.5}, where="[pipeline]",
                  source="ragev.toml")
    assert table.integer("k", 1, low=1) == 3 and table.integer("missing", 7, low=1) == 7
    assert table.string("名前") == "検索" and table.boolean("on") is True
    assert table.number("x", None, low=0.0, high=1.0) == 0.5
    assert table.choice("mode", "fast", ("fast", "slow"), what="mode") == "fast"
    table.check_keys(["k", "名前", "on", "x"])


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (lambda t: t.integer("k", 1, low=5, example="8"),
         "ragev.toml: [pipeline] k = 3 is invalid; use a whole number >= 5, e.g. k = 8"),
        (lambda t: t.number("x", None, low=0.0, high=0.5, high_open=True, example="0.1"),
         "ragev.toml: [pipeline] x = 0.5 is invalid; use a number in [0, 0.5), e.g. x = 0.1"),
        (lambda t: t.number("x", None, low=1.0),
         "ragev.toml: [pipeline] x = 0.5 is invalid; use a number in [1, ∞), e.g. x = 1"),
        (lambda t: t.number("on", None),
         "ragev.toml: [pipeline] on = True is invalid; use a number in (-∞, ∞), e.g. on = 1"),
        (lambda t: t.boolean("k"), "ragev.toml: [pipeline] k = 3 is invalid; write true or false"),
        (lambda t: t.choice("mode", "a", ("fast", "slow"), what="mode"),
         "ragev.toml: [pipeline] mode = 'fsat' is invalid; not a mode; did you mean 'fast'? "
         "use one of: fast, slow"),
        (lambda t: t.check_keys(["k", "x", "on", "mode", "chunk_size"]),
         "ragev.toml: unknown key [pipeline] 'chunk_sise'; did you mean 'chunk_size'?"),
        (lambda t: t.sub("k"), "ragev.toml: [pipeline.k] must be a table, got int"),
    ],
)
def test_every_mistake_is_one_line_naming_file_key_and_fix(read, message: str) -> None:  # type: ignore[no-untyped-def]
    table = Table({"k": 3, "x": 0.5, "on": True, "mode": "fsat", "chunk_sise": 1},
                  where="[pipeline]", source="ragev.toml")
    with pytest.raises(ConfigError) as info:
        read(table)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_non_finite_numbers_are_refused() -> None:
    table = Table({"x": math.nan, "y": math.inf}, where="[gate]", source="ragev.toml")
    for key in ("x", "y"):
        with pytest.raises(ConfigError, match=f"{key} = .* is invalid"):
            table.number(key, None)


def test_suggest_names_the_close_choice_or_lists_them() -> None:
    assert suggest("recal", ["recall", "precision"]) == "did you mean 'recall'?"
    assert suggest("zzz", ["b", "a"], noun="metrics") == "valid metrics: a, b"


def test_changed_knobs_walks_nested_tables() -> None:
    base = {"pipeline": {"top_k": 5, "chat": {"model": "a", "temperature": 0.0}}, "x": 1}
    variant = {"pipeline": {"top_k": 5, "chat": {"model": "b", "temperature": 0.0}, "rerank": True}}
    assert changed_keys(base, variant) == ["pipeline.chat.model", "pipeline.rerank", "x"]
    assert changed_keys(base, base) == []


def test_merge_flatten_and_hash() -> None:
    merged = deep_merge({"a": 1, "chat": {"model": "x", "t": 0}}, {"chat": {"t": 1}})
    assert merged == {"a": 1, "chat": {"model": "x", "t": 1}}
    assert flatten(merged) == {"a": 1, "chat.model": "x", "chat.t": 1}
    assert settings_hash({"a": 1, "b": 2}) == settings_hash({"b": 2, "a": 1})
    assert settings_hash({"a": 1}) != settings_hash({"a": 2})
