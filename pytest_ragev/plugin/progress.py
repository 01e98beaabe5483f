"""Hooks that exist only with pytest-xdist; registered only when xdist is installed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_ragev.plugin.session import RagevSession


class XdistProgress:
    """Tells the controller which questions the workers collected, for ``finished/total``.

    The xdist controller collects nothing itself: the node ids a worker reports are all
    it learns about the run before the first result arrives.
    """

    def __init__(self, session: RagevSession) -> None:
        self._session = session
        self._counted = False

    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        # Every worker collects the identical list; count it once.
        if self._counted:
            return
        self._counted = True
        self._session.set_collected((nodeid, self._session.key_of_nodeid(nodeid)) for nodeid in ids)
