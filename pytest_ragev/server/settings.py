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


@dataclass(frozen=True)
class ServerSettings:
    """Where the server keeps its state, what it may run, and how much at once.

    ``workspace`` holds the database and one folder per task; ``configs`` the
    ``ragev.toml`` files that requests name; ``max_parallel`` evaluations run at once
    (the rest wait in order); ``resume`` restarts, at start-up, tasks that were running
    when the server died (from the answer cache), else they are marked failed.
    ``max_body`` bounds request bodies in bytes.
    """

    workspace: Path
    configs: Path
    host: str = "127.0.0.1"
    port: int = 8000
    max_parallel: int = 1
    resume: bool = True
    max_body: int = 64 * 1024
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

    def to_env(self) -> str:
        """The settings as JSON, for :data:`ENV`."""
        data: dict[str, Any] = asdict(self)
        data["workspace"] = str(self.workspace)
        data["configs"] = str(self.configs)
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
        return cls(**data)
