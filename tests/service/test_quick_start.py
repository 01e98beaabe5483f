"""The README's service quick start, run as written (issue #29): install from a clone
(not editable), start, POST `{}`; and `ragev serve` in an empty folder evaluating the
sample that ships inside the installed package.

The install goes into a fresh virtualenv that sees this environment's dependencies
(nothing is downloaded: no network in tests) but not its editable pytest-ragev. The
server listens on the quick start's own port, 8000, in a network namespace of its own
(`unshare --net`), so it meets no other process on that port.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.cli import build_parser

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def quick_start() -> list[str]:
    """The commands of the README's "Quick start as a service", as written there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start as a service", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def _copy_clone(target: Path) -> None:
    """The files a clone of this repository has (tracked, and new ones not ignored)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in listed.splitlines():
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _virtualenv(folder: Path) -> dict[str, str]:
    """A fresh virtualenv that sees this environment's dependencies, not its pytest-ragev;
    the environment to run commands in it."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    site = next((folder / "lib").glob("python3*/site-packages"))
    # The build uses this environment's setuptools (offline, no build isolation), not the
    # older one a new virtualenv bundles.
    for bundled in ("setuptools", "pkg_resources", "_distutils_hack"):
        shutil.rmtree(site / bundled, ignore_errors=True)
    for leftover in [*site.glob("setuptools-*.dist-info"), site / "distutils-precedence.pth"]:
        if leftover.is_dir():
            shutil.rmtree(leftover)
        else:
            leftover.unlink(missing_ok=True)
    deps = folder.parent / "deps"
    deps.mkdir()
    here = Path(sysconfig.get_paths()["purelib"])
    for entry in here.iterdir():
        if entry.name.startswith(("pytest_ragev", "__editable__")) or entry.suffix == ".pth":
            continue
        (deps / entry.name).symlink_to(entry)
    (site / "_dependencies.pth").write_text(f"{deps}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_",
                                                                    "VIRTUAL_ENV"))}
    env.update(PATH=f"{folder / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(folder),
               PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONUNBUFFERED="1")
    return env


@pytest.fixture
def namespace() -> Iterator[list[str]]:
    """The prefix that runs a command in a network namespace of its own (port 8000 free)."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("needs unshare and nsenter (util-linux) for a network of its own")
    holder = subprocess.Popen(["unshare", "--net", "--", "sh", "-c",
                               "ip link set lo up && echo up && exec sleep 900"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "up":
        holder.kill()
        pytest.skip(f"cannot make a network namespace here: {holder.communicate()[1].strip()}")
    try:
        yield ["nsenter", f"--net=/proc/{holder.pid}/ns/net", "--"]
    finally:
        holder.kill()
        holder.wait(10)


def _run(prefix: list[str], command: str, cwd: Path, env: dict[str, str],
         timeout: float = 60) -> str:
    done = subprocess.run([*prefix, "sh", "-c", command], cwd=cwd, env=env, timeout=timeout,
                          capture_output=True, text=True)
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])
    return done.stdout


@contextlib.contextmanager
def _serving(prefix: list[str], command: str, cwd: Path, env: dict[str, str],
             log: Path) -> Iterator[None]:
    with open(log, "wb") as out:
        server = subprocess.Popen([*prefix, "sh", "-c", command], cwd=cwd, env=env,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert server.poll() is None, log.read_text(encoding="utf-8")
            probe = subprocess.run([*prefix, "curl", "-s", "localhost:8000/healthz"],
                                   capture_output=True, text=True)
            if '"status":"ok"' in probe.stdout:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(log.read_text(encoding="utf-8"))
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        # The shell may end before the server it started: wait for the port to be free.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and subprocess.run(
                [*prefix, "curl", "-s", "localhost:8000/healthz"], capture_output=True,
                text=True).returncode == 0:
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)


def _poll(prefix: list[str], cwd: Path, env: dict[str, str], task_id: str) -> dict[str, Any]:
    command = ('curl -s -H "X-API-Key: $(cat ragev-workspace/admin.key)" '
               f'"localhost:8000/api/v1/evaluation?task_id={task_id}"')
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        data: dict[str, Any] = json.loads(_run(prefix, command, cwd, env))["data"]
        if data["task"]["status"] in (2, 3):
            return data
        time.sleep(0.5)
    raise AssertionError(f"task {task_id} did not finish")


def test_the_service_quick_start_runs_as_written(tmp_path: Path,
                                                namespace: list[str]) -> None:
    commands = quick_start()
    assert len(commands) == 3, commands
    install, start, post = commands
    assert install.startswith("pip install ") and start.startswith("ragev serve")
    clone = tmp_path / "pytest-ragev"
    _copy_clone(clone)
    env = _virtualenv(tmp_path / "venv")

    _run([], install, clone, env, timeout=600)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    installed = site / "pytest_ragev"
    assert (installed / "server" / "sample" / "corpus.parquet").is_file()  # package data
    assert not list(site.glob("__editable__*"))  # a real install, not -e

    with _serving(namespace, start, clone, env, tmp_path / "clone-server.log"):
        answer = json.loads(_run(namespace, post, clone, env))
        assert answer["success"] is True and answer["data"]["status"] == 0, answer
        data = _poll(namespace, clone, env, answer["data"]["id"])
    assert data["task"]["status"] == 2, data["task"]
    assert data["request"]["config"] == "dataset/ragev" and data["verdict"]["passed"] is True
    assert len(data["metric"]["retrieval_metrics"]) == len(data["metric"]["generation_metrics"]) == 6
    log = (tmp_path / "clone-server.log").read_text(encoding="utf-8")
    assert "ragev serve: http://127.0.0.1:8000/" in log
    assert "ragev serve: 1 config loaded from" in log and "dataset/ragev" in log

    # An empty folder: no config at all, so {} runs the built-in sample with the
    # built-in pipeline, read from the installed package.
    empty = tmp_path / "empty"
    empty.mkdir()
    with _serving(namespace, start, empty, env, tmp_path / "empty-server.log"):
        answer = json.loads(_run(namespace, post, empty, env))
        data = _poll(namespace, empty, env, answer["data"]["id"])
    assert data["task"]["status"] == 2, data["task"]
    assert data["task"]["dataset_id"] == "default" and data["task"]["total"] == 87
    assert data["params"]["pipeline"]["name"] == "builtin"
    # Recorded relative to the task's config file, as every dataset path is: the
    # package's own sample, read from the installed package.
    recorded = Path(data["params"]["dataset"]["path"])
    assert recorded.parts[-4:] == (*installed.parts[-2:], "server", "sample"), recorded
    assert "no config in" in (tmp_path / "empty-server.log").read_text(encoding="utf-8")


def test_the_quick_start_port_is_the_servers_default() -> None:
    """The quick start's URL is where `ragev serve` listens without options."""
    assert "localhost:8000/" in quick_start()[2]
    args = build_parser().parse_args(["serve"])
    assert args.port == 8000 and args.workspace == "ragev-workspace" and args.configs == "."
