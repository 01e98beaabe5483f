"""``clients._breaker``: a client stops calling a service that keeps failing."""

from __future__ import annotations

import threading

import pytest

from pytest_ragev import PipelineError
from pytest_ragev.clients._breaker import Breaker


def test_breaker_opens_after_the_limit_and_says_why() -> None:
    breaker = Breaker(3, knob="[pipeline] max_consecutive_failures")
    for _ in range(2):
        breaker.failed("cannot connect (refused)")
        breaker.check("[pipeline] http qid 1", "http://x")  # still closed
    breaker.failed("cannot connect (refused)")
    assert breaker.is_open
    with pytest.raises(PipelineError) as raised:
        breaker.check("[pipeline] http qid 9", "http://x/rag")
    message = str(raised.value)
    assert message.startswith("[pipeline] http qid 9: not sent: http://x/rag failed for 3 "
                              "questions in a row (last: cannot connect (refused))")
    assert "[pipeline] max_consecutive_failures" in message and "\n" not in message


def test_an_answer_between_failures_starts_the_count_anew() -> None:
    breaker = Breaker(2)
    for _ in range(5):
        breaker.failed("HTTP 503")
        breaker.answered()
    assert not breaker.is_open


def test_an_open_breaker_stays_open() -> None:
    breaker = Breaker(1)
    breaker.failed("HTTP 401")
    breaker.answered()  # a reply to a request sent before it opened
    assert breaker.is_open


def test_limit_zero_never_opens() -> None:
    breaker = Breaker(0)
    for _ in range(100):
        breaker.failed("down")
    assert not breaker.is_open


def test_breaker_counts_across_threads() -> None:
    breaker = Breaker(400)
    threads = [threading.Thread(target=lambda: [breaker.failed("x") for _ in range(100)])
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert breaker.is_open
