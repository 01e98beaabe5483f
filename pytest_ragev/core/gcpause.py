"""The cyclic garbage collector paused while a bulk of new containers is built.

Parsing a baseline, assembling a dataset, building one result dict per question and
the end of a run each allocate hundreds of thousands of containers that are not
garbage. Every collection those allocations trigger scans every live object (the
session's items and records included), which cost up to half of such a step. None of
them makes reference cycles worth collecting before it ends.

The pause is counted, not a plain ``gc.disable()``/``gc.enable()`` pair: pipelines run
in threads, and two overlapping pauses must not leave the collector off (the second
would "restore" the state the first one set). The collector is switched back on when
the last pause ends, and only if it was on when the first one began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[bool]:
    """The cyclic collector off for the ``with`` block; yields whether it was on when
    this pause began (a caller may then run one young-generation pass itself)."""
    global _depth, _was_enabled
    with _lock:
        enabled = gc.isenabled()
        if _depth == 0:
            _was_enabled = enabled
        _depth += 1
        gc.disable()
    try:
        yield enabled
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
