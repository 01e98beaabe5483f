"""KnobOptions: a read-only [pipeline] table that records the keys the project's code reads."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core.knobs import KnobOptions, plain_options, tracked, untracked
from pytest_ragev.core.types import PipelineSettings

TABLE = {"quality": "gut", "top_k": 5, "chat": {"model": "qwen"}, "api_key": "sk-geheim"}


def fresh() -> tuple[KnobOptions, set[str]]:
    reads: set[str] = set()
    return KnobOptions(TABLE, reads), reads


def call(**knobs: Any) -> dict[str, Any]:
    return knobs


@pytest.mark.parametrize(("use", "read"), [
    (lambda o: o["quality"], {"quality"}),
    (lambda o: o.get("top_k", 3), {"top_k"}),
    (lambda o: o.get("fehlt"), {"fehlt"}),
    (lambda o: "chat" in o, {"chat"}),
    (lambda o: o["chat"]["model"], {"chat"}),
    (lambda o: (len(o), list(o), sorted(o.keys()), repr(o), o == TABLE), set()),
])
def test_a_lookup_records_the_key_it_reads(use: Callable[[KnobOptions], Any],
                                           read: set[str]) -> None:
    options, reads = fresh()
    use(options)
    assert reads == read


@pytest.mark.parametrize("take", [
    dict, lambda o: {**o}, lambda o: call(**o), lambda o: list(o.items()),
    lambda o: list(o.values()), json.dumps, lambda o: o.copy(), copy.copy, copy.deepcopy,
    lambda o: o | {"neu": 1}, lambda o: {"neu": 1} | o, pickle.dumps,
])
def test_taking_the_whole_table_reads_every_key(take: Callable[[KnobOptions], Any]) -> None:
    options, reads = fresh()
    taken = take(options)
    assert reads == set(TABLE)
    assert taken is not None


def test_it_is_a_read_only_mapping_that_pickles_and_dumps_as_the_table() -> None:
    options, _ = fresh()
    assert isinstance(options, Mapping) and options == TABLE
    assert json.loads(json.dumps(options)) == TABLE
    again = pickle.loads(pickle.dumps(options))
    assert isinstance(again, KnobOptions) and again == TABLE
    again["quality"]  # an unpickled table records nowhere
    for write in (lambda o: o.__setitem__("x", 1), lambda o: o.__delitem__("top_k"),
                  lambda o: o.update(x=1), lambda o: o.pop("top_k"), lambda o: o.popitem(),
                  lambda o: o.setdefault("x", 1), lambda o: o.clear()):
        with pytest.raises(TypeError, match=r"read-only.*dict\(settings.options\)"):
            write(options)
    with pytest.raises(TypeError, match="read-only"):
        options |= {"x": 1}
    assert options == TABLE
    writable = options.copy()
    writable["x"] = 1
    assert type(writable) is dict and "x" not in options


def test_the_plugins_own_views_record_nothing() -> None:
    options, reads = fresh()
    assert plain_options(options) == TABLE and options.plain() == TABLE
    settings = tracked(PipelineSettings(name="team-rag", options=TABLE, base_dir=Path("/p")),
                       reads)
    assert "sk-geheim" not in repr(settings) and "***" in repr(settings)
    assert untracked(settings).options == TABLE
    assert type(untracked(settings).options) is dict
    assert reads == set()
    settings.options["top_k"]
    assert reads == {"top_k"}
