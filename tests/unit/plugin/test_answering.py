"""The pool of pipeline calls: a hung call is abandoned, never waited for (#16 item 6).

Events, not clocks: each call blocks on an event the test sets (or never sets), so no
test depends on how fast the machine is. The waits below only bound a broken pool.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from pytest_ragev.plugin.answering import CallPool

#: Upper bound for a call that must settle: only a broken pool ever reaches it.
SETTLES = 30.0


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of each test, so no call of it outlives the test for long."""
    event = threading.Event()
    yield event
    event.set()


def _hanging(started: threading.Event, release: threading.Event) -> bool:
    started.set()
    return release.wait()


def test_results_and_exceptions_settle_their_futures() -> None:
    pool = CallPool(2)
    try:
        assert pool.submit(lambda text: text.upper(), "wie hoch?").result(SETTLES) == "WIE HOCH?"
        failed = pool.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failed.result(SETTLES)
    finally:
        pool.close()


def test_a_hung_call_is_abandoned_and_a_fresh_thread_takes_its_place(
    release: threading.Event,
) -> None:
    pool = CallPool(1)
    started = threading.Event()
    hung = pool.submit(_hanging, started, release)
    queued = pool.submit(lambda: "下一个问题")
    assert started.wait(SETTLES)
    assert pool.started_at(hung) is not None and pool.started_at(queued) is None
    pool.abandon(hung)
    # With one worker, the queued call could only run on the thread that replaced it.
    assert queued.result(SETTLES) == "下一个问题"
    assert not hung.done()
    release.set()
    assert hung.result(SETTLES) is True  # the abandoned call still settles, if it returns
    pool.close()


def test_abandoning_a_queued_call_cancels_it(release: threading.Event) -> None:
    pool = CallPool(1)
    started = threading.Event()
    pool.submit(_hanging, started, release)
    queued = pool.submit(lambda: "never")
    assert started.wait(SETTLES)
    pool.abandon(queued)
    assert queued.cancelled()
    pool.close()


def test_close_cancels_queued_calls_and_leaves_running_ones_on_daemon_threads(
    release: threading.Event,
) -> None:
    pool = CallPool(2)
    started = [threading.Event(), threading.Event()]
    running = [pool.submit(_hanging, event, release) for event in started]
    queued = [pool.submit(lambda: "never") for _ in range(3)]
    assert all(event.wait(SETTLES) for event in started)
    pool.close()  # returns at once: a join would wait for `release`, set only at teardown
    assert all(future.cancelled() for future in queued)
    assert not any(future.done() for future in running)
    calls = [t for t in threading.enumerate() if t.name == "ragev-call" and t.is_alive()]
    assert calls and all(t.daemon for t in calls)  # the interpreter's exit never joins them
