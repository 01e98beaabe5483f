"""paused_gc: the collector off inside, back as it was after, also when pauses overlap."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from pytest_ragev.core.gcpause import paused_gc


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_off_inside_and_on_again_after() -> None:
    gc.enable()
    with paused_gc() as was_on:
        assert was_on and not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with paused_gc() as was_on:
        assert not was_on
    assert not gc.isenabled()


def test_nested_pauses_switch_it_back_on_only_at_the_end() -> None:
    gc.enable()
    with paused_gc():
        with paused_gc() as inner_was_on:
            assert not inner_was_on
        assert not gc.isenabled()
    assert gc.isenabled()


def test_pauses_that_overlap_in_two_threads_leave_it_on() -> None:
    # Thread A pauses, B pauses, A ends, B ends: a plain disable/enable pair in B would
    # "restore" the off state A had set, and leave the collector off for good.
    gc.enable()
    a_paused, b_paused, a_done = threading.Event(), threading.Event(), threading.Event()
    seen_under_b: list[bool] = []

    def first() -> None:
        with paused_gc():
            a_paused.set()
            b_paused.wait(5)
        a_done.set()

    def second() -> None:
        a_paused.wait(5)
        with paused_gc():
            b_paused.set()
            a_done.wait(5)
            seen_under_b.append(gc.isenabled())  # A's end must not switch it on under B

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen_under_b == [False]
    assert gc.isenabled()


def test_an_exception_inside_still_restores_it() -> None:
    gc.enable()
    with pytest.raises(ValueError), paused_gc():
        raise ValueError("boom")
    assert gc.isenabled()
