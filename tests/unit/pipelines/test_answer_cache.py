"""The on-disk answer cache: keys, round trips, corrupt entries, concurrent writers."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import subprocess
import sys
import threading
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev import Answer, Chunk
from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import CacheWarning
from pytest_ragev.pipelines import answer_cache
from pytest_ragev.pipelines.answer_cache import FORMAT, AnswerCache, _checksum, answer_cache_key

KEY = answer_cache_key("fp-1", "settings-1", 7)
OTHER = answer_cache_key("fp-1", "settings-1", 8)


@dataclass(frozen=True)
class UserChunk:
    """A user's own chunk type (ChunkLike): restored as a Chunk with the same fields."""

    text: str
    passage_id: int | None = None


def test_key_changes_with_each_component() -> None:
    keys = {
        KEY,
        answer_cache_key("fp-2", "settings-1", 7),
        answer_cache_key("fp-1", "settings-2", 7),
        answer_cache_key("fp-1", "settings-1", 8),
        # No ambiguity when parts are glued differently.
        answer_cache_key("fp-1settings-1", "", 7),
    }
    assert len(keys) == 5
    assert answer_cache_key("fp-1", "settings-1", 7) == KEY
    assert len(KEY) == 64 and int(KEY, 16) >= 0


def test_key_is_the_package_digest_with_the_format_first(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sha256_json([answer_cache.FORMAT, "fp-1", "settings-1", 7]) == KEY
    # The format is part of every key: after a bump, rows of the old format are misses.
    monkeypatch.setattr(answer_cache, "FORMAT", answer_cache.FORMAT + 1)
    assert answer_cache_key("fp-1", "settings-1", 7) != KEY


@pytest.mark.parametrize("fingerprint", ["fp-1", 'fp,"7",', "指纹-Ключ-😀", ""])
@pytest.mark.parametrize("qid", [0, 7, -3, 10**15, np.int64(42)])
def test_each_key_is_the_digest_of_the_whole_key(fingerprint: str, qid: int) -> None:
    """Keys are hashed from the shared part's digest: the same as hashing it all."""
    for settings_key in ("settings-1", "設定,]"):
        assert answer_cache_key(fingerprint, settings_key, qid) == sha256_json(
            [answer_cache.FORMAT, fingerprint, settings_key, int(qid)])


def test_rows_keyed_the_format_2_way_are_not_served(tmp_path: Path) -> None:
    # Format 2 hashed json.dumps with its default separators; format 3 the canonical JSON.
    old_key = hashlib.sha256(json.dumps([2, "fp-1", "settings-1", 7]).encode()).hexdigest()
    cache = AnswerCache(tmp_path / "answers")
    cache.put(old_key, Answer(retrieved=[1], text="stale"))
    assert cache.get(KEY) is None and cache.get(old_key) is not None


def test_miss_then_hit(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "answers")
    assert cache.get(KEY) is None
    answer = Answer(retrieved=[3, 1], text="Paris", meta={"latency_s": 0.25, "tokens": {"in": 3}})
    cache.put(KEY, answer)
    assert cache.get(KEY) == Answer(retrieved=[3, 1], text="Paris",
                                    meta={"latency_s": 0.25, "tokens": {"in": 3}})
    assert cache.get(answer_cache_key("fp-1", "settings-1", 8)) is None
    assert [p.name for p in (tmp_path / "answers").iterdir()
            if not p.name.endswith(("-wal", "-shm"))] == ["answers.sqlite"]


def test_every_retrieved_kind_round_trips(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    retrieved = [5, "a chunk text", Chunk("chunk", 4, 0.75), Chunk("no id"),
                 Chunk("odd score", 2, float("inf")), UserChunk("mine", 9), "42"]
    cache.put(KEY, Answer(retrieved=retrieved, text="t", meta={}))
    got = cache.get(KEY)
    assert got is not None
    assert list(got.retrieved) == [5, "a chunk text", Chunk("chunk", 4, 0.75), Chunk("no id"),
                                   Chunk("odd score", 2, math.inf), Chunk("mine", 9), "42"]
    assert isinstance(got.retrieved[0], int) and isinstance(got.retrieved[6], str)


def test_numpy_ids_and_scores_are_cached_as_plain_numbers(tmp_path: Path) -> None:
    """What a FAISS-style pipeline returns: numpy integer ids, numpy float32 scores."""
    cache = AnswerCache(tmp_path)
    cache.put(KEY, Answer(retrieved=[np.int64(7), Chunk("长城", np.int64(3), np.float32(0.5))],
                          text="t", meta={}))
    got = cache.get(KEY)
    assert got is not None
    assert list(got.retrieved) == [7, Chunk("长城", 3, 0.5)]
    assert type(got.retrieved[0]) is int


def _rows(cache: AnswerCache) -> sqlite3.Connection:
    cache.close()
    return sqlite3.connect(cache.path, isolation_level=None)


@pytest.mark.parametrize("body", [b"", b"\xff\xfe not zlib", *map(zlib.compress, [
    b"{not json", b"[]", b'{"format": 2}', b"\xff\xfe binary", b'{"format": 99, "key": "x"}'])])
@pytest.mark.parametrize("checksum", ["kept", "recomputed"])
def test_a_damaged_row_is_a_miss_with_one_warning(tmp_path: Path, body: bytes,
                                                  checksum: str) -> None:
    messages: list[str] = []
    cache = AnswerCache(tmp_path, warn=messages.append)
    cache.put(KEY, Answer(retrieved=[1], text="Paris"))
    cache.put(OTHER, Answer(retrieved=[2], text="Berlin"))
    with _rows(cache) as db:
        db.execute("UPDATE answers SET body = ? WHERE key = ?", (body, bytes.fromhex(KEY)))
        if checksum == "recomputed":  # a valid checksum over a body that is no answer
            db.execute("UPDATE answers SET sum = ? WHERE key = ?",
                       (_checksum(bytes.fromhex(KEY), body), bytes.fromhex(KEY)))
    assert cache.get(KEY) is None and cache.get(KEY) is None
    assert cache.get(OTHER) == Answer(retrieved=[2], text="Berlin")
    assert len(messages) == 1 and "damaged entry" in messages[0] and cache.damaged == 1
    cache.put(KEY, Answer(retrieved=[1], text="Paris"))  # recomputed, rewritten
    assert cache.get(KEY) == Answer(retrieved=[1], text="Paris")


def test_a_flipped_bit_in_a_body_fails_the_checksum(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path, warn=lambda message: None)
    cache.put(KEY, Answer(retrieved=[1], text="Paris"))
    with _rows(cache) as db:
        (body,) = db.execute("SELECT body FROM answers").fetchone()
        text = zlib.decompress(body).replace(b"Paris", b"Parys")
        db.execute("UPDATE answers SET body = ?", (zlib.compress(text),))
    assert cache.get(KEY) is None and cache.damaged == 1


def test_entry_under_the_wrong_key_is_a_miss(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path, warn=lambda message: None)
    cache.put(OTHER, Answer(retrieved=[], text="x"))
    with _rows(cache) as db:
        (checksum, body) = db.execute("SELECT sum, body FROM answers").fetchone()
        db.execute("INSERT INTO answers VALUES (?, ?, ?)", (bytes.fromhex(KEY), checksum, body))
    assert cache.get(KEY) is None  # the checksum covers the key
    with _rows(cache) as db:
        # Even with a checksum valid for KEY, the body names the other key.
        db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)",
                   (bytes.fromhex(KEY), _checksum(bytes.fromhex(KEY), bytes(body)), body))
    assert cache.get(KEY) is None and cache.get(OTHER) is not None


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bit flips"])
def test_a_damaged_database_file_is_set_aside_and_started_afresh(tmp_path: Path,
                                                                 damage: str) -> None:
    cache = AnswerCache(tmp_path)
    for qid in range(40):
        cache.put(answer_cache_key("fp", "s", qid), Answer(retrieved=[qid], text="t" * 200))
    cache.close()
    data = bytearray(cache.path.read_bytes())
    if damage == "garbage":
        data[:100] = b"\x00" * 100  # the header: not a database any more
    elif damage == "truncated":
        data = data[:len(data) // 3] + b"\x07" * 50
    else:
        for position in range(0, len(data), 97):
            data[position] ^= 0xFF
    cache.path.write_bytes(bytes(data))
    messages: list[str] = []
    fresh = AnswerCache(tmp_path, warn=messages.append)
    got = [fresh.get(answer_cache_key("fp", "s", qid)) for qid in range(40)]
    assert all(g is None or list(g.retrieved) == [qid] for qid, g in enumerate(got))
    fresh.put(KEY, Answer(retrieved=[1], text="after"))
    assert fresh.get(KEY) == Answer(retrieved=[1], text="after")
    assert 1 <= len(messages) <= 2  # set aside, and maybe damaged rows before that


def test_a_folder_that_cannot_be_created_warns_once_and_runs_without_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    messages: list[str] = []
    cache = AnswerCache(blocker / "answers", warn=messages.append)
    for qid in range(3):
        key = answer_cache_key("fp", "s", qid)
        assert cache.get(key) is None
        cache.put(key, Answer(retrieved=[], text="t"))  # no error
    assert len(messages) == 1 and "cannot be used" in messages[0]


def test_a_full_disk_warns_once_and_keeps_serving_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages: list[str] = []
    cache = AnswerCache(tmp_path, warn=messages.append)
    cache.put(KEY, Answer(retrieved=[1], text="kept"))
    cache.close()

    class FullDisk:
        """A connection whose writes fail as SQLite's do on a full disk."""

        def __init__(self, real: sqlite3.Connection) -> None:
            self.real = real

        def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
            if sql.startswith("INSERT"):
                raise sqlite3.OperationalError("database or disk is full")
            return self.real.execute(sql, parameters)

        def close(self) -> None:
            self.real.close()

    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: FullDisk(connect(*a, **k)))
    for qid in range(3):
        cache.put(answer_cache_key("fp", "s", qid), Answer(retrieved=[], text="t"))
    assert cache.get(KEY) == Answer(retrieved=[1], text="kept")
    assert len(messages) == 1 and "database or disk is full" in messages[0]


def test_the_default_warning_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.warns(CacheWarning, match="cannot be used"):
        assert AnswerCache(blocker).get(KEY) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert AnswerCache(blocker).get(KEY) is None


def test_the_store_is_at_most_twice_the_answers_json(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    size = 0
    for qid in range(600):
        chunks = [Chunk(f"第{qid}段：巴黎是法国的首都。Paris ist die Hauptstadt. " * 6, qid, 0.5)
                  for _ in range(5)]
        answer = Answer(retrieved=chunks, text=f"Paris {qid}", meta={"latency_s": 0.25})
        cache.put(answer_cache_key("fp", "s", qid), answer)
        plain = {"text": answer.text, "meta": dict(answer.meta), "retrieved": [
            {"text": c.text, "passage_id": c.passage_id, "score": c.score} for c in chunks]}
        size += len(json.dumps(plain, ensure_ascii=False).encode("utf-8"))
    cache.close()
    on_disk = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert on_disk <= 2 * size, (on_disk, size)


@pytest.mark.parametrize(
    ("meta", "message"),
    [({"when": object()}, r"meta\['when'\] holds a object"),
     ({"pair": (1, 2)}, r"holds a tuple"),
     ({1: "x"}, r"non-string key 1"),
     ({"x": [float("nan")]}, r"meta\['x'\]\[0\] = nan is not JSON-safe")],
)
def test_refuses_unsafe_meta(tmp_path: Path, meta: dict[object, object], message: str) -> None:
    cache = AnswerCache(tmp_path)
    with pytest.raises(TypeError, match=message):
        cache.put(KEY, Answer(retrieved=[], text="t", meta=meta))  # type: ignore[arg-type]
    assert cache.get(KEY) is None


def test_refuses_unknown_retrieved(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"type float"):
        AnswerCache(tmp_path).put(KEY, Answer(retrieved=[1.5], text="t"))  # type: ignore[list-item]


def test_bad_key(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    assert cache.get("../../etc/passwd") is None  # get never raises
    with pytest.raises(ValueError, match="not a hex digest"):
        cache.put("../../etc/passwd", Answer(retrieved=[], text="t"))


def test_concurrent_writers_and_readers(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    answers = [Answer(retrieved=[i, Chunk(f"c{i}", i)], text=f"v{i}" * 200) for i in range(8)]
    seen: list[Answer | None] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        for _ in range(20):
            cache.put(KEY, answers[i])
            got = cache.get(KEY)
            with lock:
                seen.append(got)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Every read saw one whole answer, never a torn or empty entry.
    assert all(got in answers for got in seen)
    assert cache.get(KEY) in answers


def test_two_processes_write_the_same_key(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path\n"
        "from pytest_ragev import Answer\n"
        "from pytest_ragev.pipelines.answer_cache import AnswerCache\n"
        "c = AnswerCache(Path(sys.argv[1]))\n"
        "for n in range(50): c.put(sys.argv[2], Answer(retrieved=[n], text=sys.argv[3]))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), KEY, f"p{i}"])
             for i in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    got = AnswerCache(tmp_path).get(KEY)
    assert got is not None and got.text in {"p0", "p1"} and list(got.retrieved) == [49]


def _open_and_write(folder: str, worker: int, start: Any, warnings_out: Any) -> None:
    messages: list[str] = []
    cache = AnswerCache(Path(folder), warn=messages.append)
    start.wait()
    for n in range(3):
        cache.put(answer_cache_key("fp", "settings", worker * 10 + n),
                  Answer(retrieved=[n], text=f"w{worker}"))
    warnings_out.put(messages)


def test_workers_opening_a_new_store_at_once_all_keep_the_cache(tmp_path: Path) -> None:
    # xdist workers start together and open a database none has created yet: setting WAL
    # mode and creating the table can answer "database is locked" without SQLite's busy
    # wait. That once turned one worker's cache off (its answers never stored).
    import multiprocessing

    context = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    for trial in range(25):
        folder = tmp_path / f"t{trial}"
        start, out = context.Barrier(3), context.Queue()
        workers = [context.Process(target=_open_and_write, args=(str(folder), w, start, out))
                   for w in range(3)]
        for worker in workers:
            worker.start()
        reports = [out.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
        assert reports == [[], [], []], f"trial {trial}: {reports}"
        cache = AnswerCache(folder)
        assert all(cache.get(answer_cache_key("fp", "settings", w * 10 + n)) is not None
                   for w in range(3) for n in range(3))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
retrieved_items = st.integers(min_value=-10**12, max_value=10**12) | st.text() | st.builds(
    Chunk, st.text(), st.none() | st.integers(), st.none() | st.floats(allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(items=st.lists(retrieved_items, max_size=6), text=st.text(),
       meta=st.dictionaries(st.text(), json_values, max_size=4))
def test_round_trip_property(tmp_path_factory: pytest.TempPathFactory, items: list[object],
                             text: str, meta: dict[str, object]) -> None:
    cache = AnswerCache(tmp_path_factory.mktemp("prop"))
    answer = Answer(retrieved=items, text=text, meta=meta)  # type: ignore[arg-type]
    cache.put(KEY, answer)
    got = cache.get(KEY)
    assert got is not None
    assert list(got.retrieved) == items and got.text == text and dict(got.meta) == meta


@pytest.mark.parametrize("retrieved", [
    [True],                                               # a bool is not a passage id
    [1.0],                                                # nor is a float
    [None],
    [["埃菲尔铁塔"]],
    [{"text": 3, "passage_id": 1, "score": 0.5}],         # a chunk's text must be a str
    [{"passage_id": 1, "score": 0.5}],
    [{"text": "Der Turm", "passage_id": True, "score": 0.5}],
    [{"text": "Der Turm", "passage_id": 1.0, "score": 0.5}],
    [{"text": "Der Turm", "passage_id": "1", "score": 0.5}],
    [{"text": "Der Turm", "passage_id": 1, "score": True}],
    [{"text": "Der Turm", "passage_id": 1, "score": "0.5"}],
])
def test_a_body_with_a_wrongly_typed_item_is_a_miss(tmp_path: Path,
                                                   retrieved: list[object]) -> None:
    """The decoder checks exact JSON types: a checksum-valid body whose items are of the
    wrong kind is damaged, never served as an answer with a bool or float id."""
    cache = AnswerCache(tmp_path, warn=lambda message: None)
    body = zlib.compress(json.dumps({"format": FORMAT, "key": KEY, "text": "Париж",
                                     "retrieved": retrieved, "meta": {}}).encode("utf-8"))
    cache.put(KEY, Answer(retrieved=[1], text="Paris"))
    with _rows(cache) as db:
        db.execute("UPDATE answers SET body = ?, sum = ?",
                   (body, _checksum(bytes.fromhex(KEY), body)))
    assert cache.get(KEY) is None and cache.damaged == 1


def test_a_body_with_well_typed_items_is_served_as_written(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path, warn=lambda message: None)
    retrieved = [0, "東京タワー", {"text": "서울", "passage_id": None, "score": None},
                 {"text": "Берлин", "passage_id": 4, "score": 2},
                 {"text": "Rom", "passage_id": 5, "score": {"float": "-inf"}}]
    body = zlib.compress(json.dumps({"format": FORMAT, "key": KEY, "text": "x",
                                     "retrieved": retrieved, "meta": {"n": 1}}).encode("utf-8"))
    cache.put(KEY, Answer(retrieved=[1], text="Paris"))
    with _rows(cache) as db:
        db.execute("UPDATE answers SET body = ?, sum = ?",
                   (body, _checksum(bytes.fromhex(KEY), body)))
    got = cache.get(KEY)
    assert got == Answer(retrieved=[0, "東京タワー", Chunk("서울"), Chunk("Берлин", 4, 2.0),
                                    Chunk("Rom", 5, float("-inf"))], text="x", meta={"n": 1})
    assert got is not None and type(got.retrieved[3].score) is float  # type: ignore[union-attr]
