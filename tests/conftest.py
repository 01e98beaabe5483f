"""Fixtures shared by the plugin's end-to-end tests."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy  # noqa: F401
import pyarrow.parquet  # noqa: F401
import pytest

# pytester's in-process runs restore sys.modules afterwards; numpy's C extension cannot
# be loaded twice in one process, so the heavy modules are imported here, once, up front.
import pytest_ragev.dataset._load
import pytest_ragev.metrics  # noqa: F401
from pytest_ragev.dataset import write_dataset

#: A small English dataset: five questions, seven passages (two distractors).
CORPUS = {
    1: "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    2: "The Eiffel Tower is about 330 metres tall including its antennas.",
    3: "Mount Everest, on the border of Nepal and China, is 8,849 metres high.",
    4: "Python was created by Guido van Rossum and first released in 1991.",
    5: "The Great Wall of China stretches over twenty thousand kilometres.",
    6: "The Louvre in Paris is the most visited art museum in the world.",
    7: "Rust is a systems programming language focused on memory safety.",
}
QUERIES = {
    1: "When was the Eiffel Tower completed?",
    2: "How tall is the Eiffel Tower?",
    3: "How high is Mount Everest?",
    4: "Who created Python?",
    5: "How long is the Great Wall of China?",
}
ANSWERS = {
    11: "The Eiffel Tower was completed in 1889.",
    12: "The Eiffel Tower is about 330 metres tall.",
    13: "Mount Everest is 8,849 metres high.",
    14: "Python was created by Guido van Rossum.",
    15: "The Great Wall is over twenty thousand kilometres long.",
}
QRELS = [(1, 1), (2, 2), (2, 1), (3, 3), (4, 4), (5, 5)]
QAS = [(1, 11), (2, 12), (3, 13), (4, 14), (5, 15)]

#: A deterministic pipeline for the tests: retrieves the gold passages of odd
#: questions first, a distractor first for even ones, and answers with the reference.
ORACLE_CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return {"corpus": dict(corpus)}

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        quality = settings.options.get("quality", "good")
        if quality == "bad":
            return Answer(retrieved=[7, 6], text="I do not know.")
        retrieved = list(case.pids) if case.qid % 2 else [6, *case.pids]
        return Answer(retrieved=retrieved, text=case.answer or "")
    """
)


@pytest.fixture
def mini_data() -> dict[str, Any]:
    """The small dataset's tables, as :func:`write_dataset` keyword arguments."""
    return {"queries": QUERIES, "corpus": CORPUS, "answers": ANSWERS, "qrels": QRELS, "qas": QAS}


@pytest.fixture
def make_project(pytester: pytest.Pytester) -> Callable[..., Path]:
    """Write the dataset and a ragev.toml (with ``extra`` TOML appended) into pytester's folder."""

    def make(
        extra: str = "",
        *,
        conftest: str | None = ORACLE_CONFTEST,
        pipeline: str = '[pipeline]\nname = "oracle"\n',
    ) -> Path:
        write_dataset(
            pytester.path / "data",
            queries=QUERIES,
            corpus=CORPUS,
            answers=ANSWERS,
            qrels=QRELS,
            qas=QAS,
        )
        config = pytester.path / "ragev.toml"
        config.write_text(
            '[dataset]\npath = "data"\nid = "mini"\n\n' + pipeline + textwrap.dedent(extra),
            encoding="utf-8",
        )
        if conftest is not None:
            pytester.makeconftest(conftest)
        return config

    return make
