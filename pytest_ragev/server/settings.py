"""The options of ``ragev serve``, resolved once into a frozen value."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: The environment variable that hands the settings to the uvicorn app factory.
ENV = "RAGEV_SERVE_SETTINGS"
#: The database file inside the workspace.
DATABASE = "ragev-server.db"
#: The file in the configs folder that registers datasets and models.
SERVER_FILE = "ragev-server.toml"
#: The file in the workspace that the running server holds locked (its pid and URL).
LOCK_FILE = "ragev-server.lock"
#: Where the server writes an admin key it made at first start (readable by its owner).
ADMIN_KEY_FILE = "admin.key"


@dataclass(frozen=True)
class ServerSettings:
    """Where the server keeps its state, what it may run, and how much at once.

    ``workspace`` holds the database and one folder per task; ``configs`` the
    ``ragev.toml`` files that requests name; ``max_parallel`` evaluations run at once
    (the rest wait in order); ``resume`` restarts, at start-up, tasks that were running
    when the server died (from the answer cache), else they are marked failed.
    ``max_body`` bounds request bodies in bytes, ``max_depth`` how deeply their JSON may
    nest. ``cache_dir`` is the pytest cache every task shares (the knowledge-base and
    answer caches, as the command line keeps them); ``None``: ``<workspace>/cache``.
    """

    workspace: Path
    configs: Path
    host: str = "127.0.0.1"
    port: int = 8000
    max_parallel: int = 1
    resume: bool = True
    max_body: int = 64 * 1024
    max_depth: int = 32
    cache_dir: Path | None = None
    session_hours: float = 12.0
    poll_interval: float = 0.25

    @property
    def database(self) -> Path:
        """The SQLite file."""
        return self.workspace / DATABASE

    @property
    def tasks_dir(self) -> Path:
        """The folder with one subfolder per task."""
        return self.workspace / "tasks"

    @property
    def cache(self) -> Path:
        """The pytest cache folder the tasks share (``-o cache_dir=``)."""
        return self.cache_dir if self.cache_dir is not None else self.workspace / "cache"

    @property
    def lock_file(self) -> Path:
        """The lock the running server holds (:mod:`.lock`)."""
        return self.workspace / LOCK_FILE

    def to_env(self) -> str:
        """The settings as JSON, for :data:`ENV`."""
        data: dict[str, Any] = asdict(self)
        data["workspace"] = str(self.workspace)
        data["configs"] = str(self.configs)
        data["cache_dir"] = None if self.cache_dir is None else str(self.cache_dir)
        return json.dumps(data)

    @classmethod
    def from_env(cls, environ: os._Environ[str] | dict[str, str] | None = None) -> ServerSettings:
        """The settings :meth:`to_env` wrote into :data:`ENV`."""
        text = (environ if environ is not None else os.environ).get(ENV)
        if not text:
            raise RuntimeError(f"{ENV} is not set; start the server with `ragev serve`")
        data = json.loads(text)
        data["workspace"] = Path(data["workspace"])
        data["configs"] = Path(data["configs"])
        if data.get("cache_dir") is not None:
            data["cache_dir"] = Path(data["cache_dir"])
        return cls(**data)
