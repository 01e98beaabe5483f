"""What the KB and answer-cache keys depend on: the code, the corpus alone, the knobs."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES

Project = Callable[..., Path]


def test_editing_a_question_reuses_the_kb_editing_a_passage_rebuilds_it(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[run]\ncache = false\n", conftest=None,
                 pipeline='[pipeline]\nname = "builtin"\n')
    kb_root = pytester.path / ".pytest_cache" / "d" / "ragev" / "kb"
    pytester.runpytest("--ragev-config", "ragev.toml").assert_outcomes(passed=6)
    (entry,) = kb_root.glob("*/kb.json")
    stamp = entry.stat().st_mtime_ns
    common: dict[str, Any] = {"answers": ANSWERS, "qrels": QRELS, "qas": QAS}
    write_dataset(pytester.path / "data", queries={**QUERIES, 2: "What height is the tower?"},
                  corpus=CORPUS, **common)
    pytester.runpytest("--ragev-config", "ragev.toml").assert_outcomes(passed=6)
    assert list(kb_root.glob("*/kb.json")) == [entry] and entry.stat().st_mtime_ns == stamp
    write_dataset(pytester.path / "data", queries=QUERIES,
                  corpus={**CORPUS, 7: textwrap.shorten(CORPUS[7], 30)}, **common)
    pytester.runpytest("--ragev-config", "ragev.toml").assert_outcomes(passed=6)
    assert len(list(kb_root.glob("*/kb.json"))) == 2
