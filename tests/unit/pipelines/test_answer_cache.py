"""The on-disk answer cache: keys, round trips, corrupt entries, concurrent writers."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev import Answer, Chunk
from pytest_ragev.pipelines.answer_cache import AnswerCache, answer_cache_key

KEY = answer_cache_key("fp-1", "settings-1", 7)


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


def test_miss_then_hit(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "answers")
    assert cache.get(KEY) is None
    answer = Answer(retrieved=[3, 1], text="Paris", meta={"latency_s": 0.25, "tokens": {"in": 3}})
    cache.put(KEY, answer)
    assert cache.get(KEY) == Answer(retrieved=[3, 1], text="Paris",
                                    meta={"latency_s": 0.25, "tokens": {"in": 3}})
    assert cache.get(answer_cache_key("fp-1", "settings-1", 8)) is None
    assert cache.path(KEY).parent.name == KEY[:2]


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


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", b'{"format": 1}',
                                     b"\xff\xfe binary", b'{"format": 99, "key": "x"}'])
def test_corrupt_entry_is_a_miss(tmp_path: Path, content: bytes) -> None:
    cache = AnswerCache(tmp_path)
    cache.path(KEY).parent.mkdir(parents=True)
    cache.path(KEY).write_bytes(content)
    assert cache.get(KEY) is None


def test_entry_under_the_wrong_key_is_a_miss(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    other = answer_cache_key("fp-1", "settings-1", 8)
    cache.put(other, Answer(retrieved=[], text="x"))
    cache.path(KEY).parent.mkdir(parents=True, exist_ok=True)
    cache.path(KEY).write_bytes(cache.path(other).read_bytes())
    assert cache.get(KEY) is None


def test_unreadable_directory_is_a_miss(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert AnswerCache(blocker).get(KEY) is None


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
    assert cache.get(KEY) is None and not list(tmp_path.rglob("*.tmp"))


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
    assert not list(tmp_path.rglob("*.tmp"))


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
