"""What the KB and answer-cache keys depend on: the code, the corpus alone, the knobs."""

from __future__ import annotations

import ast
import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import pytest_ragev.pipelines.builtin.pipeline as builtin_pipeline
import pytest_ragev.pipelines.builtin.store as store
from pytest_ragev.core.errors import CacheWarning
from pytest_ragev.dataset import Corpus, corpus_fingerprint, load_dataset, write_dataset
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES
from tests.unit.pipelines.builtin._builtin import case, pipeline

PACKAGE = Path(store.__file__).resolve().parents[2]
Project = Callable[..., Path]


def test_code_digest_covers_every_module_that_decides_kb_and_answers(tmp_path: Path) -> None:
    copy = tmp_path / "pytest_ragev"
    for pattern in store.CODE_MODULES:
        for path in PACKAGE.glob(pattern):
            target = copy / path.relative_to(PACKAGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    assert store.source_digest(copy) == store.code_digest()
    watched = [copy / "pipelines" / "builtin" / name
               for name in ("chunking.py", "pipeline.py", "bm25.py", "tokens.py", "__init__.py")]
    watched += [copy / "plugin" / "defaults.py", copy / "core" / "segment.py",
                copy / "pipelines" / "identity.py", copy / "core" / "digest.py",
                copy / "clients" / "_retry.py", copy / "core" / "types.py"]
    seen = {store.source_digest(copy)}
    for path in watched:
        path.write_text(path.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
        seen.add(store.source_digest(copy))
    assert len(seen) == len(watched) + 1  # every edit changed the digest


@pytest.mark.parametrize("pattern", store.CODE_MODULES)
def test_every_code_module_pattern_names_a_file(pattern: str) -> None:
    # A pattern left behind by a move would silently stop covering the moved code.
    assert list(PACKAGE.glob(pattern)), f"CODE_MODULES: {pattern!r} matches no file"


#: Modules the built-in pipeline imports that cannot change an answer or a KB, and why.
NOT_IN_THE_DIGEST = {
    "core/errors.py": "error classes: message text only",
    "core/io.py": "atomic writes: how a file is written, not what",
    "core/redact.py": "hides secrets in errors, snapshots for reports, and logs",
    "core/version.py": "the version is hashed as text, beside the sources",
    "clients/_env.py": "${VAR} headers: headers are transport knobs (docs/remote.md)",
    "clients/_breaker.py": "stops after failures; a failed answer is never cached",
}


def _imported_modules(path: Path) -> set[Path]:
    """The package's module files that ``path`` imports (``from a.b import c`` names
    ``a/b/c.py`` when ``c`` is a module, else ``a/b.py``)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_ragev"):
            base = PACKAGE.parent.joinpath(*str(node.module).split("."))
            for alias in node.names:
                for candidate in (base / f"{alias.name}.py", base / alias.name / "__init__.py",
                                  base.with_suffix(".py"), base / "__init__.py"):
                    if candidate.exists():
                        found.add(candidate)
                        break
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pytest_ragev."):
                    base = PACKAGE.parent.joinpath(*alias.name.split("."))
                    found |= {p for p in (base.with_suffix(".py"), base / "__init__.py")
                              if p.exists()}
    return found


def test_every_module_the_builtin_pipeline_runs_is_in_the_digest_or_excused() -> None:
    # A new import of the built-in pipeline must be hashed, or listed above with why not.
    digested = {path for pattern in store.CODE_MODULES for path in PACKAGE.glob(pattern)}
    todo = sorted((PACKAGE / "pipelines" / "builtin").glob("*.py"))
    reached: set[Path] = set()
    while todo:
        path = todo.pop()
        if path not in reached:
            reached.add(path)
            todo += _imported_modules(path)
    names = {path.relative_to(PACKAGE).as_posix() for path in reached - digested}
    assert names == set(NOT_IN_THE_DIGEST)


def test_kb_and_answer_keys_include_the_code_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    before = pipeline()
    kb_key, answer_key = before.kb_key(), before.answer_key()
    monkeypatch.setattr(builtin_pipeline, "code_digest", lambda: "edited chunker")
    after = pipeline()
    assert after.kb_key() != kb_key and after.answer_key() != answer_key


def test_the_kb_cache_is_keyed_on_the_corpus_fingerprint(tmp_path: Path) -> None:
    pipe = pipeline()
    first = pipe.build_knowledge_base(CORPUS, fingerprint="a" * 64, cache_dir=tmp_path)
    same = pipe.build_knowledge_base(CORPUS, fingerprint="a" * 64, cache_dir=tmp_path)
    other = pipe.build_knowledge_base(CORPUS, fingerprint="b" * 64, cache_dir=tmp_path)
    assert not first.loaded_from_cache and same.loaded_from_cache
    assert not other.loaded_from_cache and other.key != first.key


def _corpus(ids: list[int], texts: list[str], split: int | None = None) -> Corpus:
    array = pa.array(texts, type=pa.string())
    chunks = [array] if split is None else [array.slice(0, split), array.slice(split)]
    return Corpus(np.asarray(ids, dtype=np.int64), pa.chunked_array(chunks, type=pa.string()))


def test_corpus_fingerprint_is_the_same_for_columns_and_mappings() -> None:
    ids, texts = sorted(CORPUS), [CORPUS[i] for i in sorted(CORPUS)]
    columns = corpus_fingerprint(_corpus(ids, texts))
    assert corpus_fingerprint(dict(reversed(list(CORPUS.items())))) == columns
    # Sliced chunks (non-zero offsets) and large strings hash the same bytes.
    assert corpus_fingerprint(_corpus(ids, texts, split=3)) == columns
    large = Corpus(np.asarray(ids, dtype=np.int64),
                   pa.chunked_array([pa.array(texts, type=pa.large_string())]))
    assert corpus_fingerprint(large) == columns
    # Any text or id change, and moving text between neighbours, changes it.
    assert corpus_fingerprint({**CORPUS, 3: CORPUS[3] + "!"}) != columns
    assert corpus_fingerprint({(8 if k == 7 else k): v for k, v in CORPUS.items()}) \
        != columns
    moved = {**CORPUS, 1: CORPUS[1] + CORPUS[2][:3], 2: CORPUS[2][3:]}
    assert corpus_fingerprint(moved) != columns


def test_a_loaded_corpus_fingerprint_ignores_questions(tmp_path: Path) -> None:
    common: dict[str, Any] = {"corpus": CORPUS, "answers": ANSWERS, "qrels": QRELS, "qas": QAS}
    write_dataset(tmp_path / "a", queries=QUERIES, **common)
    write_dataset(tmp_path / "b", queries={**QUERIES, 1: "When did they finish it?"}, **common)
    a, b = load_dataset(tmp_path / "a"), load_dataset(tmp_path / "b")
    assert a.fingerprint != b.fingerprint
    assert corpus_fingerprint(a.corpus) == corpus_fingerprint(b.corpus)
    assert corpus_fingerprint(a.corpus) == corpus_fingerprint(dict(CORPUS))


# -- the entry on disk: verified, mapped, rebuilt when damaged (#16 item 7)

def _flip_one_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _edit_manifest(entry: Path, name: str, value: object) -> None:
    """A changed value in kb.json, the file otherwise well-formed (its files unchanged)."""
    manifest = json.loads((entry / "kb.json").read_text(encoding="utf-8"))
    assert manifest[name] != value
    manifest[name] = value
    (entry / "kb.json").write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated postings": lambda e: (e / "indices.i4").write_bytes((e / "indices.i4").read_bytes()[:-4]),
    "bit flip in impacts": lambda e: _flip_one_bit(e / "data.f4"),
    "bit flip in chunk text": lambda e: _flip_one_bit(e / "chunk_text.utf8"),
    "empty chunk text": lambda e: (e / "chunk_text.utf8").write_bytes(b""),
    "missing offsets": lambda e: (e / "chunk_offsets.i8").unlink(),
    "manifest not JSON": lambda e: (e / "kb.json").write_text("{", encoding="utf-8"),
    "manifest without files": lambda e: (e / "kb.json").write_text(
        (e / "kb.json").read_text(encoding="utf-8").replace('"files"', '"filez"'), encoding="utf-8"),
    # The manifest's own values: a flipped k1 or b changed every score without a word.
    "manifest k1 changed": lambda e: _edit_manifest(e, "k1", 3.5),
    "manifest b changed": lambda e: _edit_manifest(e, "b", 0.0),
    "manifest key changed": lambda e: _edit_manifest(e, "key", "0" * 64),
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_kb_entry_is_rebuilt_with_one_warning(tmp_path: Path, damage: str) -> None:
    pipe = pipeline(retrieval="hybrid", embedding_model="hashing")
    pipe.build_knowledge_base(CORPUS, fingerprint="c" * 64, cache_dir=tmp_path)
    # Compared with a KB held in memory: the one above maps the files damaged in place.
    first = pipe.build_knowledge_base(CORPUS, fingerprint="c" * 64, cache_dir=None)
    (entry,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    DAMAGE[damage](entry)
    messages: list[str] = []
    rebuilt = pipe.build_knowledge_base(CORPUS, fingerprint="c" * 64, cache_dir=tmp_path,
                                        warn=messages.append)
    assert len(messages) == 1 and "is damaged" in messages[0] and str(entry) in messages[0]
    assert not rebuilt.loaded_from_cache
    again = pipe.build_knowledge_base(CORPUS, fingerprint="c" * 64, cache_dir=tmp_path,
                                      warn=messages.append)
    assert again.loaded_from_cache and len(messages) == 1  # repaired: no second warning
    assert [c.text for c in again.chunks] == [c.text for c in first.chunks]
    assert again.vectors is not None and first.vectors is not None
    np.testing.assert_array_equal(again.vectors, first.vectors)


def test_an_unwritable_cache_folder_warns_once_and_builds_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cache folder under a regular file cannot be created, not even by root (for whom
    # chmod 555 changes nothing): the same path as a read-only .pytest_cache.
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    cache = tmp_path / "file" / "kb"
    monkeypatch.setattr(store, "_warned", set())
    messages: list[str] = []
    kbs = [pipeline(chunk_size=size).build_knowledge_base(
        CORPUS, fingerprint="d" * 64, cache_dir=cache, warn=messages.append)
        for size in (64, 128)]
    assert len(messages) == 1 and "not writable" in messages[0] and str(cache) in messages[0]
    assert all(not kb.loaded_from_cache and kb.chunk_count for kb in kbs)


def test_a_full_disk_while_saving_warns_and_keeps_the_built_kb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(path: object, data: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "atomic_write_bytes", full)
    monkeypatch.setattr(store, "_warned", set())
    messages: list[str] = []
    kb = pipeline().build_knowledge_base(CORPUS, fingerprint="e" * 64, cache_dir=tmp_path,
                                         warn=messages.append)
    assert kb.chunk_count and not kb.loaded_from_cache
    assert len(messages) == 1 and "No space left on device" in messages[0]
    assert not list(tmp_path.glob("*/kb.json"))


def test_the_default_warning_is_a_cache_warning_and_never_raises(tmp_path: Path) -> None:
    pipe = pipeline()
    pipe.build_knowledge_base(CORPUS, fingerprint="f" * 64, cache_dir=tmp_path)
    (entry,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    _flip_one_bit(entry / "indptr.i8")
    with pytest.warns(CacheWarning, match="damaged"):
        pipe.build_knowledge_base(CORPUS, fingerprint="f" * 64, cache_dir=tmp_path)
    _flip_one_bit(entry / "indptr.i8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # -W error must not turn the cache into a failure
        assert pipe.build_knowledge_base(CORPUS, fingerprint="f" * 64, cache_dir=tmp_path)


def test_a_loaded_kb_is_mapped_read_only_and_answers_alike(tmp_path: Path) -> None:
    corpus = {**CORPUS, 90: "深度学习是机器学习的一个分支。", 91: "Die Straße führt über die Brücke."}
    pipe = pipeline(chunk_size=48, chunk_overlap=8)
    built = pipe.build_knowledge_base(corpus, fingerprint="g" * 64, cache_dir=None)
    pipe.build_knowledge_base(corpus, fingerprint="g" * 64, cache_dir=tmp_path)
    loaded = pipe.build_knowledge_base(corpus, fingerprint="g" * 64, cache_dir=tmp_path)
    assert loaded.loaded_from_cache and isinstance(loaded.chunks, store.ChunkTable)
    for array in (loaded.index.indices, loaded.index.data, loaded.chunks.offsets):
        assert not array.flags.writeable and not array.flags.owndata
    assert list(loaded.chunks) == list(built.chunks)
    assert loaded.chunks[-1] == built.chunks[-1] and loaded.chunks[1:3] == built.chunks[1:3]
    for question in ("什么是深度学习？", "Welche Brücke?", "When was the Eiffel Tower completed?"):
        qa = case(question)
        assert pipe.answer(qa, loaded) == pipe.answer(qa, built)


def test_chunk_table_of_no_chunks() -> None:
    table = store.ChunkTable.from_chunks([])
    assert len(table) == 0 and list(table) == []
    with pytest.raises(IndexError):
        table[0]


def test_chunk_table_reads_a_stream_of_chunks_once() -> None:
    chunks = [store.TextChunk(text=t, passage_id=p, start=s) for t, p, s in
              [("巴黎是法国的首都。", 7, 0), ("", 7, 9), ("Straße 12", -3, 4), ("한국어 문장", 2**40, 1)]]
    table = store.ChunkTable.from_chunks(iter(chunks))
    assert list(table) == chunks and len(table) == 4
    assert table[-1] == chunks[-1] and table.text(0) == "巴黎是法国的首都。"
    assert store.ChunkTable.from_chunks(table) is table


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
def test_a_loaded_kb_reads_its_chunk_texts_without_mapping_them(tmp_path: Path) -> None:
    # Mapped, every page of the chunk texts that questions touched stayed in the process's
    # resident memory (276 MB at a million passages); read, they stay in the page cache.
    corpus = {**CORPUS, 90: "深度学习是机器学习的一个分支。", 91: "Die Straße führt über die Brücke."}
    pipe = pipeline(chunk_size=48, chunk_overlap=8)
    built = pipe.build_knowledge_base(corpus, fingerprint="h" * 64, cache_dir=None)
    saved = pipe.build_knowledge_base(corpus, fingerprint="h" * 64, cache_dir=tmp_path)
    loaded = pipe.build_knowledge_base(corpus, fingerprint="h" * 64, cache_dir=tmp_path)
    assert loaded.loaded_from_cache
    assert saved.chunks.text(0) == built.chunks.text(0)
    assert [loaded.chunks.text(i) for i in range(len(loaded.chunks))] == [
        built.chunks.text(i) for i in range(len(built.chunks))]
    assert bytes(loaded.chunks.blob()) == bytes(built.chunks.blob())
    maps = Path("/proc/self/maps").read_text(encoding="utf-8")
    assert "chunk_text.utf8" not in maps
    assert "indices.i4" in maps  # the index itself stays mapped


#: Chunks in several scripts, with multi-byte letters that tiny blocks split.
SPILL_CHUNKS = [store.TextChunk(text=t, passage_id=p, start=s) for t, p, s in [
    ("巴黎是法国的首都。", 7, 0), ("", 7, 9), ("Die Straße führt über die Brücke.", 3, 0),
    ("Москва — столица России.", 4, 0), ("東京は日本の首都です。", 5, 2), ("한국어 문장", 6, 1),
    ("x" * 40, 8, 0)]]


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 22])
def test_a_spilled_chunk_table_reads_back_what_it_wrote(
    monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    # Blocks of 1 and 7 bytes split letters and chunks; 1 << 22 holds everything.
    monkeypatch.setattr(store, "_SPILL_BLOCK", block)
    held = store.ChunkTable.from_chunks(iter(SPILL_CHUNKS))
    spilled = store.ChunkTable.from_chunks(iter(SPILL_CHUNKS), spill=True)
    assert isinstance(spilled._text, store.TextFile)  # no copy of the texts in memory
    assert list(spilled) == list(held) == SPILL_CHUNKS
    assert list(spilled.texts()) == list(held.texts()) == [c.text for c in SPILL_CHUNKS]
    assert b"".join(bytes(b) for b in spilled.blob_blocks()) == bytes(held.blob())
    assert all(len(b) <= max(block, 1) for b in spilled.blob_blocks())
    assert spilled.text(4) == "東京は日本の首都です。" and spilled[-1] == SPILL_CHUNKS[-1]


def test_a_spilled_table_falls_back_to_memory_without_a_temporary_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_temp(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.tempfile, "TemporaryFile", no_temp)
    table = store.ChunkTable.from_chunks(iter(SPILL_CHUNKS), spill=True)
    assert not isinstance(table._text, store.TextFile)
    assert list(table) == SPILL_CHUNKS


_TEMPORARY_FILE = store.tempfile.TemporaryFile


class _FillingFile:
    """A temporary file that takes ``room`` bytes, then raises as a full disk does."""

    def __init__(self, room: int) -> None:
        self._file = _TEMPORARY_FILE(buffering=0)  # the real one: the test replaces it
        self._room = room

    def write(self, data: Any) -> int:
        if self._room <= 0:
            raise OSError(28, "No space left on device")
        taken: int = self._file.write(bytes(data)[:self._room])
        self._room -= taken
        return taken

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


@pytest.mark.parametrize("room", [0, 5, 23, 40])
def test_a_temporary_file_that_fills_up_leaves_the_texts_in_memory(
    monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    # A full TMPDIR at any point (before any block, in the middle of one, after some):
    # what the file took is taken back and the table goes on in memory, whole.
    monkeypatch.setattr(store, "_SPILL_BLOCK", 16)
    monkeypatch.setattr(store.tempfile, "TemporaryFile", lambda **_: _FillingFile(room))
    table = store.ChunkTable.from_chunks(iter(SPILL_CHUNKS), spill=True)
    assert not isinstance(table._text, store.TextFile)
    assert list(table) == SPILL_CHUNKS and list(table.texts()) == [c.text for c in SPILL_CHUNKS]


def test_a_kb_built_from_spilled_chunks_saves_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The build spills its chunk texts; written in blocks, the cache entry is the one an
    # in-memory table writes, byte for byte (the manifest's sizes and digests included).
    monkeypatch.setattr(store, "_SPILL_BLOCK", 16)
    corpus = {**CORPUS, 90: "深度学习是机器学习的一个分支。", 91: "Die Straße führt über die Brücke."}
    pipe = pipeline(chunk_size=48, chunk_overlap=8)
    built = pipe.build_knowledge_base(corpus, fingerprint="s" * 64, cache_dir=None)
    assert isinstance(built.chunks, store.ChunkTable)
    assert isinstance(built.chunks._text, store.TextFile)
    held = store.KnowledgeBase(store.ChunkTable.from_chunks(list(built.chunks)), built.index,
                               None, key=built.key, language=built.language)
    built.save(tmp_path / "spilled")
    held.save(tmp_path / "held")
    for path in sorted((tmp_path / "held").iterdir()):
        assert (tmp_path / "spilled" / path.name).read_bytes() == path.read_bytes(), path.name
    # Questions are answered alike from the spilled table, the saved and the loaded entry.
    loaded = pipe.build_knowledge_base(corpus, fingerprint="s" * 64, cache_dir=tmp_path / "c")
    for question in ("什么是深度学习？", "Welche Brücke?", "When was the Eiffel Tower completed?"):
        qa = case(question)
        assert pipe.answer(qa, loaded) == pipe.answer(qa, built)


def test_a_build_that_raises_closes_its_temporary_file(monkeypatch: pytest.MonkeyPatch) -> None:
    # Left to the garbage collector, the open file would warn (ResourceWarning) in
    # whichever test happened to run the collection.
    made: list[Any] = []

    def temporary(**kwargs: Any) -> Any:
        made.append(_TEMPORARY_FILE(**kwargs))
        return made[-1]

    def chunks() -> Any:
        yield from SPILL_CHUNKS[:3]
        raise ValueError("Kaputt: der Korpus endet mitten im Satz")

    monkeypatch.setattr(store, "_SPILL_BLOCK", 8)
    monkeypatch.setattr(store.tempfile, "TemporaryFile", temporary)
    with pytest.raises(ValueError, match="Kaputt"):
        store.ChunkTable.from_chunks(chunks(), spill=True)
    assert len(made) == 1 and made[0].closed
