"""The objects alive after collection frozen for the items, and thawed once."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pytest_ragev.plugin.gcfreeze import CollectionFreeze


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freeze_moves_the_live_objects_out_and_unfreeze_back() -> None:
    held = [{"问题": i} for i in range(1000)]
    freeze = CollectionFreeze()
    freeze.freeze()
    assert freeze.frozen and gc.get_freeze_count() >= len(held)
    freeze.unfreeze()
    assert not freeze.frozen and gc.get_freeze_count() == 0


def test_freeze_twice_is_one_freeze() -> None:
    freeze = CollectionFreeze()
    freeze.freeze()
    first = gc.get_freeze_count()
    later = [["Frage", i] for i in range(1000)]  # made after the freeze: not frozen again
    freeze.freeze()
    # Frozen objects that reference counting frees leave the count: it never grows here.
    assert gc.get_freeze_count() <= first and len(later) == 1000
    freeze.unfreeze()
    assert gc.get_freeze_count() == 0


def test_unfreeze_without_a_freeze_leaves_anothers_freeze_alone() -> None:
    gc.freeze()  # someone else's (an outer session, the user's own code)
    frozen = gc.get_freeze_count()
    CollectionFreeze().unfreeze()
    # Not thawed (that would make it 0); reference counting may free a few frozen
    # objects meanwhile (an xdist worker's I/O thread runs beside the test).
    assert frozen > 0 and gc.get_freeze_count() > frozen // 2


def test_cyclic_garbage_made_after_the_freeze_is_still_collected() -> None:
    freeze = CollectionFreeze()
    freeze.freeze()
    try:
        cycle: list[object] = ["Zyklus"]
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        freeze.unfreeze()
