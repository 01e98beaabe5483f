"""The caches end to end: damaged or unusable caches never fail a run (#15, #16 items 7, 9).

Each case damages the real files a previous run left in ``.pytest_cache`` (or puts a
file where a cache folder must go, which no user, not even root, can write through),
reruns, and checks that the run passes with the same results, one warning line each.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._pytester import run_ragev

Project = Callable[..., Path]
BUILTIN = '[pipeline]\nname = "builtin"\nchunk_size = 128\n'
REPORT = ("--ragev-report", "r.json")


def _scores(pytester: pytest.Pytester) -> object:
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    samples = report["data"]["samples"]
    return report["data"]["metric"], [(s["retrieval_ids"], s.get("answer")) for s in samples]


def _ragev(pytester: pytest.Pytester) -> Path:
    return pytester.path / ".pytest_cache" / "d" / "ragev"


def test_damaged_answer_rows_are_recomputed_with_one_warning(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=None, pipeline=BUILTIN)
    run_ragev(pytester, *REPORT, cache=True).assert_outcomes(passed=6)
    expected = _scores(pytester)
    database = _ragev(pytester) / "answers" / "answers.sqlite"
    with sqlite3.connect(database, isolation_level=None) as db:
        keys = [row[0] for row in db.execute("SELECT key FROM answers ORDER BY key")]
        db.execute("UPDATE answers SET body = x'00ff' WHERE key IN (?, ?)", keys[:2])
    damaged = run_ragev(pytester, *REPORT, cache=True)
    damaged.assert_outcomes(passed=6)
    damaged.stdout.fnmatch_lines(["*answer cache 3 hits / 2 misses*"])
    assert damaged.stdout.str().count("a damaged entry in the answer cache") == 1
    assert _scores(pytester) == expected
    healed = run_ragev(pytester, *REPORT, cache=True)
    healed.stdout.fnmatch_lines(["*answer cache 5 hits / 0 misses*"])
    assert "a damaged entry" not in healed.stdout.str()


def test_a_damaged_answer_database_is_set_aside(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=None, pipeline=BUILTIN)
    run_ragev(pytester, *REPORT, cache=True).assert_outcomes(passed=6)
    expected = _scores(pytester)
    folder = _ragev(pytester) / "answers"
    for path in folder.glob("answers.sqlite*"):
        path.write_bytes(b"this is not a database " * 100)
    result = run_ragev(pytester, *REPORT, cache=True)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*answer cache*is damaged*moved aside*",
                                 "*answer cache 0 hits / 5 misses*"])
    assert _scores(pytester) == expected
    healed = run_ragev(pytester, *REPORT, cache=True)
    healed.stdout.fnmatch_lines(["*answer cache 5 hits / 0 misses*"])


# One bit flipped, and the case #16 found (an emptied chunks file); the unit tests of the
# store cover truncation, missing files and bad manifests.
@pytest.mark.parametrize("damage", ["bit flip", "empty chunk text"])
def test_a_damaged_kb_entry_is_rebuilt_with_one_warning(
    pytester: pytest.Pytester, make_project: Project, damage: str
) -> None:
    make_project("[run]\ncache = false\n", conftest=None, pipeline=BUILTIN)
    run_ragev(pytester, *REPORT, cache=True).assert_outcomes(passed=6)
    expected = _scores(pytester)
    (entry,) = [p.parent for p in (_ragev(pytester) / "kb").glob("*/kb.json")]
    target = entry / ("indices.i4" if damage != "empty chunk text" else "chunk_text.utf8")
    data = bytearray(target.read_bytes())
    if damage == "bit flip":
        data[len(data) // 2] ^= 0x01
    target.write_bytes(b"" if damage == "empty chunk text" else
                       bytes(data[:-4] if damage == "truncated" else data))
    result = run_ragev(pytester, *REPORT, cache=True)
    result.assert_outcomes(passed=6)
    assert result.stdout.str().count("is damaged (") == 1
    result.stdout.fnmatch_lines(["*cached knowledge base*is damaged*rebuilding it*"])
    assert _scores(pytester) == expected
    again = run_ragev(pytester, *REPORT, cache=True)
    again.assert_outcomes(passed=6)
    assert "is damaged (" not in again.stdout.str()


def test_unusable_cache_folders_warn_once_and_the_run_passes(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=None, pipeline=BUILTIN)
    run_ragev(pytester, *REPORT).assert_outcomes(passed=6)
    expected = _scores(pytester)
    # Files where the cache folders must go: as unwritable as a read-only .pytest_cache.
    ragev = _ragev(pytester)
    ragev.mkdir(parents=True)
    (ragev / "kb").write_text("not a folder", encoding="utf-8")
    (ragev / "answers").write_text("not a folder", encoding="utf-8")
    result = run_ragev(pytester, *REPORT, cache=True)
    result.assert_outcomes(passed=6)
    out = result.stdout.str()
    assert out.count("is not writable (") == 1 and out.count("cannot be used (") == 1
    result.stdout.fnmatch_lines(["*knowledge-base cache*not writable*without it*"])
    result.stdout.fnmatch_lines(["*answer cache*cannot be used*going on without it*"])
    assert _scores(pytester) == expected


@pytest.mark.slow
def test_xdist_workers_share_one_answer_store(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    pytest.importorskip("xdist")
    make_project(conftest=None, pipeline=BUILTIN)
    run_ragev(pytester, *REPORT, "-n", "2", cache=True).assert_outcomes(passed=6)
    expected = _scores(pytester)
    folder = _ragev(pytester) / "answers"
    assert sorted(p.name for p in folder.iterdir() if p.is_file())[0] == "answers.sqlite"
    assert not [p for p in folder.iterdir() if p.is_dir()]  # one store, no file per answer
    again = run_ragev(pytester, *REPORT, "-n", "2", cache=True)
    again.stdout.fnmatch_lines(["*answer cache 5 hits / 0 misses*"])
    assert _scores(pytester) == expected


def test_an_unusable_pytest_cache_warns_once_and_runs_without_caches(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=None, pipeline=BUILTIN)
    run_ragev(pytester, *REPORT).assert_outcomes(passed=6)
    expected = _scores(pytester)
    # .pytest_cache itself cannot be made (as with a read-only project folder): pytest's
    # own cache warns and goes on, and so must the KB and answer caches.
    (pytester.path / ".pytest_cache").write_text("not a folder", encoding="utf-8")
    result = run_ragev(pytester, *REPORT, cache=True)
    result.assert_outcomes(passed=6)
    out = result.stdout.str()
    assert out.count("the cache folder cannot be created") == 1
    result.stdout.fnmatch_lines(["*knowledge-base and answer caches are off for this run*"])
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert _scores(pytester) == expected
