"""Stop calling a service that keeps failing: a circuit breaker per remote client.

Without it, a service that is down costs every question its full retry budget (four
attempts with backoff by default): a 2,000-question run against a dead endpoint spends
hours learning what the first five questions already said. After ``limit`` questions
in a row whose requests failed in transport (no connection, no response in time, 5xx
or 429 after every retry) or were refused as unauthorised (401/403), the breaker opens
and every later request fails at once with the reason, without being sent. Any request
that gets an answer closes the count again.

The breaker stays open for the rest of the run (there is no half-open probe): a run's
results are only comparable when the service answered them all, so the honest outcome
is a failed run that says why. One breaker belongs to one client object and counts
across its threads; pytest-xdist workers each hold their own.
"""

from __future__ import annotations

import threading

from pytest_ragev.core.errors import PipelineError

#: The default of ``max_consecutive_failures``.
DEFAULT_LIMIT = 5


class Breaker:
    """Counts consecutive failed requests; open after ``limit`` (``0``: never opens)."""

    def __init__(self, limit: int = DEFAULT_LIMIT, *, knob: str = "max_consecutive_failures"
                 ) -> None:
        self.limit = limit
        self._knob = knob
        self._lock = threading.Lock()
        self._failures = 0
        self._last = ""

    def __repr__(self) -> str:
        return f"Breaker(limit={self.limit}, failures={self._failures})"

    @property
    def is_open(self) -> bool:
        """Whether requests are refused without being sent."""
        with self._lock:
            return self._open()

    def _open(self) -> bool:
        return self.limit > 0 and self._failures >= self.limit

    def check(self, what: str, url: str) -> None:
        """Raise the one-line :class:`PipelineError` of an open breaker; else nothing."""
        __tracebackhide__ = True
        with self._lock:
            if not self._open():
                return
            failures, last = self._failures, self._last
        raise PipelineError(
            f"{what}: not sent: {url} failed for {failures} questions in a row (last: "
            f"{last}); the remaining questions fail at once. Fix the service, or raise "
            f"{self._knob} (0 never stops)"
        )

    def failed(self, reason: str) -> None:
        """A request failed for good (its retries spent): count it."""
        with self._lock:
            self._failures += 1
            self._last = reason

    def answered(self) -> None:
        """A request got an answer: the service is there, start counting anew."""
        with self._lock:
            if not self._open():
                self._failures = 0
