"""A large corpus's texts in a mapped temporary file: the same reads, less resident memory."""

from __future__ import annotations

import errno
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragev.dataset import (
    SPILL_TEXT_BYTES,
    Corpus,
    _spill,
    corpus_fingerprint,
    load_dataset,
    write_dataset,
)
from pytest_ragev.dataset._fingerprint import corpus_digest

_WORDS = ["Prüfung", "über", "Straße", "检索", "增强生成", "поиск", "ответ", "検索", "拡張",
          "검색", "증강", "retrieval", "answer", "—", "🙂"]


def _passages(count: int, seed: int, words: int = 12) -> dict[int, str]:
    rng = random.Random(seed)
    return {pid: " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, words)))
            for pid in rng.sample(range(1, 10 * count), count)}


def _folder(tmp_path: Path, passages: dict[int, str], *, shuffled: bool) -> Path:
    rows = list(passages.items())
    if shuffled:
        random.Random(3).shuffle(rows)
    else:
        rows.sort()
    first = min(passages)
    return write_dataset(tmp_path / ("shuffled" if shuffled else "sorted"),
                         queries={1: "Was ist 检索?"}, corpus=rows, answers={1: "Поиск."},
                         qrels=[(1, first)], qas=[(1, 1)])


def _assert_same(spilled: Corpus, kept: Corpus) -> None:
    assert spilled.spilled and not kept.spilled
    assert len(spilled) == len(kept)
    assert spilled.ids.tolist() == kept.ids.tolist()
    assert spilled.fingerprint == kept.fingerprint
    for pid in kept.ids.tolist():
        assert spilled[pid] == kept[pid]
        assert pid in spilled
    assert spilled.get(-5) is None and -5 not in spilled
    assert list(spilled.items()) == list(kept.items())
    assert list(spilled.values()) == list(kept.values())
    assert spilled.arrow_texts.to_pylist() == kept.arrow_texts.to_pylist()
    assert corpus_digest(spilled.ids, spilled.arrow_texts) == corpus_digest(kept.ids,
                                                                            kept.arrow_texts)
    assert spilled.texts == kept.texts


@pytest.mark.parametrize("shuffled", [False, True], ids=["sorted-file", "shuffled-file"])
def test_a_spilled_corpus_reads_as_one_in_memory(tmp_path: Path, shuffled: bool) -> None:
    folder = _folder(tmp_path, _passages(3_000, seed=1), shuffled=shuffled)
    spilled, kept = load_dataset(folder).corpus, load_dataset(folder).corpus
    pid = int(kept.ids[17])
    assert spilled[pid] == kept[pid]  # a lookup before the spill (file order kept)
    assert spilled.spill_texts() is True
    assert spilled.spill_texts() is True  # once is enough: nothing happens again
    _assert_same(spilled, kept)
    assert corpus_fingerprint(spilled) == corpus_fingerprint(kept)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(passages=st.dictionaries(st.integers(1, 10**12), st.text(max_size=40), min_size=1,
                                max_size=60),
       shuffled=st.booleans())
def test_spilling_changes_no_text(tmp_path_factory: pytest.TempPathFactory,
                                  passages: dict[int, str], shuffled: bool) -> None:
    # Any text Parquet holds, "" and lone surrogates aside (the loader refuses those).
    passages = {pid: text for pid, text in passages.items()
                if not any(0xD800 <= ord(c) <= 0xDFFF for c in text)}
    if not passages:
        return
    folder = _folder(tmp_path_factory.mktemp("spill"), passages, shuffled=shuffled)
    spilled, kept = load_dataset(folder).corpus, load_dataset(folder).corpus
    assert spilled.spill_texts()
    _assert_same(spilled, kept)


def test_the_loader_leaves_the_texts_in_memory(tmp_path: Path) -> None:
    # Loading stays as fast as it was: moving the texts out is the long-lived holder's
    # choice (the plugin's, for a corpus of SPILL_TEXT_BYTES or more).
    passages = _passages(500, seed=2)
    corpus = load_dataset(_folder(tmp_path, passages, shuffled=True)).corpus
    assert not corpus.spilled
    utf8 = sum(len(text.encode()) for text in passages.values())
    assert utf8 < corpus.text_bytes < min(2 * utf8 + 8 * len(passages), SPILL_TEXT_BYTES)


def test_a_corpus_whose_texts_were_listed_is_not_spilled(tmp_path: Path) -> None:
    corpus = load_dataset(_folder(tmp_path, _passages(200, seed=4), shuffled=False)).corpus
    texts = corpus.texts  # the Python strings are there already: a file saves nothing
    assert corpus.spill_texts() is False and not corpus.spilled
    assert corpus.texts is texts


_TEMPORARY_FILE = tempfile.TemporaryFile  # the real one, for the patched one to use


class _FillingFile:
    """A temporary file on a disk that fills up after ``room`` bytes."""

    def __init__(self, room: int) -> None:
        self._file = _TEMPORARY_FILE()
        self._room = room
        self.closed_at_exit = False

    def write(self, data: Any) -> int:
        size = len(memoryview(data).cast("B"))
        if size > self._room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= size
        return self._file.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def __enter__(self) -> _FillingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed_at_exit = True
        self._file.close()


@pytest.mark.parametrize("room", [0, 100, 5_000, 60_000])
def test_a_full_disk_keeps_the_texts_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               room: int) -> None:
    folder = _folder(tmp_path, _passages(2_000, seed=5), shuffled=True)
    files: list[_FillingFile] = []

    def temporary_file(**_: Any) -> _FillingFile:
        files.append(_FillingFile(room))
        return files[-1]

    monkeypatch.setattr(_spill.tempfile, "TemporaryFile", temporary_file)
    corpus, kept = load_dataset(folder).corpus, load_dataset(folder).corpus
    assert corpus.spill_texts() is False
    assert not corpus.spilled
    assert files and all(f.closed_at_exit for f in files)  # no file left open
    assert list(corpus.items()) == list(kept.items())


def test_no_temporary_folder_keeps_the_texts_in_memory(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = load_dataset(_folder(tmp_path, _passages(300, seed=6), shuffled=False)).corpus
    # A temporary folder that is gone (tempfile uses the folder it chose at first use).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    assert corpus.spill_texts() is False
    assert len(list(corpus.values())) == 300


# --- resident memory (Linux: /proc/self/smaps) ---------------------------------------------


def _resident_kb(address: int) -> int:
    """Resident KB of the mapping of this process that holds ``address``."""
    inside = False
    with open("/proc/self/smaps") as handle:
        for line in handle:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                low, high = (int(part, 16) for part in head.split("-"))
                inside = low <= address < high
            elif inside and line.startswith("Rss:"):
                return int(line.split()[1])
    raise AssertionError("no mapping holds the texts")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc (Linux)")
def test_a_scan_hands_its_pages_back(tmp_path: Path) -> None:
    # 12,000 passages of ~1.3 KB: 16 MB of text in the mapped file.
    passages = _passages(12_000, seed=7, words=200)
    folder = _folder(tmp_path, passages, shuffled=False)
    corpus = load_dataset(folder).corpus
    assert corpus.spill_texts()
    address = corpus.arrow_texts.chunk(0).buffers()[2].address
    text_kb = corpus.arrow_texts.nbytes // 1024
    corpus.release_pages()
    assert _resident_kb(address) < 2_048

    # A read that touches every page without handing them back (the control).
    assert sum(len(t) for t in corpus.arrow_texts.to_pylist()) == sum(map(len, passages.values()))
    assert _resident_kb(address) > text_kb // 2
    corpus.release_pages()
    assert _resident_kb(address) < 2_048

    # The scans the run makes: iterating (the KB build), the Python list.
    assert sum(1 for _ in corpus.items()) == len(passages)
    assert _resident_kb(address) < 2_048
    assert len(corpus.texts) == len(passages)
    assert _resident_kb(address) < 2_048

    # Lookups, then what the end of a run does after its few hundred of them.
    for pid in sorted(passages)[::40]:
        assert corpus[pid] == passages[pid]
    corpus.release_pages()
    assert _resident_kb(address) < 2_048
    assert corpus[max(passages)] == passages[max(passages)]  # still readable after
