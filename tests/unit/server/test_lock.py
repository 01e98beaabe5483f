"""One server per workspace: the lock another process holds refuses a second holder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ragev.server import lock
from pytest_ragev.server.lock import WorkspaceBusy

HOLD = """
import sys, time
from pathlib import Path
from pytest_ragev.server import lock
lock.hold(Path(sys.argv[1]), url="http://127.0.0.1:8123/")
print("held", flush=True)
time.sleep(60)
"""


def test_a_lock_held_by_another_process_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "ragev-server.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(WorkspaceBusy) as info:
            lock.hold(path, url="http://127.0.0.1:9000/")
        assert str(info.value) == (
            f"--workspace {tmp_path}: another ragev serve (pid {holder.pid}, "
            "http://127.0.0.1:8123/) uses this workspace; stop it, or pass another --workspace")
    finally:
        holder.kill()
        holder.wait(10)
    # Its end (even kill -9) lets go: the file left behind blocks nobody.
    lock.hold(path, url="http://127.0.0.1:9000/")
    lock.hold(path, url="http://127.0.0.1:9000/")  # a second call of the holder: a no-op
    assert '"url": "http://127.0.0.1:9000/"' in path.read_text(encoding="utf-8")
    lock.release(path)


def test_a_folder_that_is_not_there_says_so(tmp_path: Path) -> None:
    with pytest.raises(lock.ConfigError, match=r"cannot create ragev-server.lock there .*; "
                                               r"make the folder writable"):
        lock.hold(tmp_path / "missing" / "ragev-server.lock", url="x")
