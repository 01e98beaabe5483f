"""``ragev serve``: WeKnora's evaluation API on pytest-ragev, durable, with roles and a dashboard.

A shell over the engine like the plugin and the ``ragev`` command: each task runs the
plugin in a subprocess (:mod:`.runner`, which reads its files through :mod:`.follow`),
every task sharing one pytest cache; state lives in SQLite (:mod:`.store`), one server
per workspace (:mod:`.lock`), keys and roles in :mod:`.keys`, what a request may name
(the built-in sample and config included) in :mod:`.catalog`, the HTTP layer
in :mod:`.app` (FastAPI, imported only when the server starts: the routers :mod:`.api`
and :mod:`.pages`, what their endpoints get in :mod:`.dependencies`) and the pages'
HTML in :mod:`.dashboard`. See ``docs/server.md``.
"""

from __future__ import annotations

from pytest_ragev.server.settings import ServerSettings

__all__ = ["ServerSettings"]
