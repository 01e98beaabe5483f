"""The loader pauses the cyclic GC while it builds the pairs: it must hand it back as found."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from pytest_ragev.dataset import load_dataset, write_dataset


def _write(folder: Path) -> Path:
    return write_dataset(
        folder,
        queries={2: "second?", 1: "first?"},
        corpus=[(12, "passage twelve"), (10, "passage ten"), (11, "passage eleven")],
        answers={100: "one"},
        qrels=[(1, 11, 2), (1, 10, 1), (2, 12, 0)],
        qas={1: 100},
    )


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_state_is_restored(tmp_path: Path, enabled: bool) -> None:
    folder = _write(tmp_path / "ds")
    was_enabled = gc.isenabled()
    try:
        if enabled:
            gc.enable()
        else:
            gc.disable()
        dataset = load_dataset(folder)
        assert gc.isenabled() is enabled
    finally:
        if was_enabled:
            gc.enable()
        else:
            gc.disable()
    first, second = dataset.pairs
    assert (first.qid, first.pids, first.passages, first.grades) == (
        1, (10, 11), ("passage ten", "passage eleven"), (1.0, 2.0)
    )
    assert (first.aid, first.answer) == (100, "one")
    assert (second.pids, second.passages, second.aid, second.answer) == ((), (), None, None)


def test_collector_state_is_restored_after_an_error(tmp_path: Path) -> None:
    folder = _write(tmp_path / "ds")
    write_dataset(folder, queries={1: "q"}, corpus={10: "p"}, qrels=[(1, 99)])
    assert gc.isenabled()
    with pytest.raises(Exception, match="refers to passage 99"):
        load_dataset(folder)
    assert gc.isenabled()
