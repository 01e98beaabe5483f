"""Fixtures shared by the plugin's end-to-end tests."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
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
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES
from tests._judge_server import JudgeServer, start_judge
from tests._oracle import ORACLE_CONFTEST
from tests._remote_server import ScriptedServer, serve


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


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """A scripted HTTP server on a free 127.0.0.1 port (see ``tests/_remote_server.py``)."""
    yield from serve()


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    """The test judge on a free 127.0.0.1 port (see ``tests/_judge_server.py``)."""
    server = start_judge()
    try:
        yield server
    finally:
        server.server.close()
