"""The collected items kept out of the cyclic garbage collector's way while the items run.

A run holds what collection made (its items, the dataset's questions, pytest's and the
plugin's own objects: 160,000 containers at 10,000 questions) until its end. Python's
collector runs a full collection each time the containers that survived the younger
generations grow by a quarter of the long-lived ones, and every full collection
traverses all of them again: in a 10,000-question rerun the full collections took
0.31 s, 31 µs a question. :func:`gc.freeze` at the end of collection moves every object
then alive into a permanent generation that no collection traverses (0.15-0.20 s for
the same run: what remains is the records and test reports the items make);
:meth:`CollectionFreeze.unfreeze` at the end of the session moves them back into the
oldest generation, so pytest's own collection at unconfigure (and any later one) sees
them again.

What it can hold back, and why that is bounded: reference counting frees objects as
usual, frozen or not; only *cyclic* garbage among the frozen objects (a reference
cycle alive at the freeze that dies during the items, or one already dead and not yet
collected) waits for the unfreeze. That is at most what existed when collection ended:
it cannot grow with the questions. A full collection just before the freeze would find
24 such objects at 10,000 questions and cost 44 ms, so none is run. Objects made after
the freeze (records, test reports, a pipeline's garbage) are collected as always.

Only the shell calls this (pytest's session hooks), once per session. ``gc.freeze`` is
process-wide: a nested session (pytester's in-process runs) that unfreezes also thaws
what an outer session froze, which costs the outer one time, never objects.
"""

from __future__ import annotations

import gc


class CollectionFreeze:
    """Freezes the objects alive after collection, once, and thaws them once."""

    def __init__(self) -> None:
        self.frozen = False

    def freeze(self) -> None:
        """Move every object alive now out of the collector's traversals (once)."""
        if self.frozen:
            return
        gc.freeze()
        self.frozen = True

    def unfreeze(self) -> None:
        """Hand the frozen objects back to the collector; a no-op unless :meth:`freeze` ran."""
        if not self.frozen:
            return
        self.frozen = False
        gc.unfreeze()
