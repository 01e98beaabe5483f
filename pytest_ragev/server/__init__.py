"""``ragev serve``: WeKnora's evaluation API on pytest-ragev, durable, with roles and a dashboard.

A shell over the engine like the plugin and the ``ragev`` command: each task runs the
plugin in a subprocess (:mod:`.runner`), state lives in SQLite (:mod:`.store`), keys
and roles in :mod:`.keys`, what a request may name in :mod:`.catalog`, the HTTP layer
in :mod:`.app` (FastAPI, imported only when the server starts: the routers :mod:`.api`
and :mod:`.pages`, what their endpoints get in :mod:`.dependencies`) and the pages'
HTML in :mod:`.dashboard`. See ``docs/server.md``.
"""

from __future__ import annotations

from pytest_ragev.server.settings import ServerSettings

__all__ = ["ServerSettings"]
