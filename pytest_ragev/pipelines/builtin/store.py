"""The knowledge base of the built-in pipeline and its disk cache.

A :class:`KnowledgeBase` holds the chunks, their BM25 index and (for vector or hybrid
retrieval) their vectors. :func:`load_or_build` keys it on the corpus fingerprint and
the knobs that shape it, so reruns and xdist workers load it instead of rebuilding, and
variants that differ only in retrieval or generation knobs share it. The key also holds
:func:`code_digest`, so editing the code that builds a KB never serves an old one.

On disk an entry is a folder of flat binary arrays (the index's four, the chunks' text
as one UTF-8 blob with int64 offsets, passage ids and starts), ``vocab.json``,
``vectors.npy`` when there are vectors, and ``kb.json`` written last: the format, the
key, the counts, BM25's ``k1`` and ``b``, every file's size and sha256, and a sha256 of
the manifest's own content. A load checks all of them (a truncated, bit-flipped or
emptied file, or an edited manifest value, is a damaged entry: one warning, rebuilt) and
then memory-maps the arrays read-only, so processes that load the same KB (xdist
workers, concurrent runs) share one copy in the page cache instead of each holding its
own, and only the pages a query touches are read. The chunk texts are read with
``pread`` where a retrieved chunk needs its text (:class:`TextFile`): shared in the page
cache alike, without counting towards the process's resident memory.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from pytest_ragev.core.digest import sha256_json, update_with_sources
from pytest_ragev.core.errors import CacheWarning
from pytest_ragev.core.io import atomic_write_bytes, atomic_write_text
from pytest_ragev.core.version import __version__
from pytest_ragev.pipelines.builtin.bm25 import BM25Index
from pytest_ragev.pipelines.builtin.chunking import TextChunk

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


#: A build's progress callback: ``(done, of)``.
Progress = Callable[[int, int], None]
#: Where cache warnings go: one line of text (default: a :class:`CacheWarning`).
Warn = Callable[[str], None]

#: Bumped when the on-disk layout of a cached knowledge base changes (3: the manifest's
#: own digest; 4: the corpus's language, for ``analyzer = "auto"``).
KB_FORMAT = 4
#: The manifest, written last: its presence and checksums mark a complete entry.
MANIFEST = "kb.json"
#: The flat arrays of an entry: file name -> (attribute, dtype).
_INDEX_ARRAYS = {
    "idf.f8": ("idf", "<f8"), "indptr.i8": ("indptr", "<i8"), "indices.i4": ("indices", "<i4"),
    "data.f4": ("data", "<f4"), "max_impact.f8": ("max_impact", "<f8"),
    "dense_terms.i8": ("dense_terms", "<i8"), "columns.f4": ("columns", "<f4"),
}
_CHUNK_ARRAYS = {
    "chunk_offsets.i8": "<i8", "chunk_passages.i8": "<i8", "chunk_starts.i8": "<i8",
}
_CHUNK_TEXT = "chunk_text.utf8"
_VOCAB = "vocab.json"
_VECTORS = "vectors.npy"

#: The modules (relative to the package) whose code decides the built-in KB and answers:
#: the pipeline itself, how its cache keys are made, the chat, embedding and rerank
#: clients it may call and the shared client machinery (``clients/``: the request it
#: sends and the reply it reads, ``_retry``), the table reader its knobs go through,
#: the value types it answers with, and the jieba set-up the BM25 tokenizer uses. Not
#: here, as they cannot change an answer or a KB: the clients' ``_env`` (headers,
#: transport knobs), ``_breaker`` (stops a run; failures are never cached),
#: ``core/redact.py`` (error and report text), ``core/errors.py`` and ``core/io.py``.
CODE_MODULES = (
    "pipelines/builtin/*.py", "pipelines/identity.py", "pipelines/remote/chat.py",
    "clients/__init__.py", "clients/endpoint.py", "clients/chat.py", "clients/embeddings.py",
    "clients/rerank.py", "clients/_retry.py",
    "plugin/defaults.py", "core/tables.py", "core/digest.py", "core/segment.py",
    "core/types.py",
)


@functools.cache
def code_digest() -> str:
    """sha256 of the source of :data:`CODE_MODULES` and the jieba and pytest-ragev versions.

    Computed once per process; part of the KB key and the answer-cache key, so editing the
    chunker, the tokenizer or the extractive generator (or upgrading jieba) never serves
    results of the old code.
    """
    return source_digest(Path(__file__).resolve().parents[2])


def source_digest(package: Path) -> str:
    """:func:`code_digest` for the package folder ``package`` (uncached)."""
    digest = hashlib.sha256(b"pytest-ragev builtin code v1\n")
    update_with_sources(digest, package, CODE_MODULES)
    from importlib import metadata

    try:
        jieba_version = metadata.version("jieba")
    except metadata.PackageNotFoundError:
        jieba_version = "-"
    digest.update(f"jieba=={jieba_version}\n".encode())
    digest.update(f"pytest-ragev=={__version__}\n".encode())
    return digest.hexdigest()


class ChunkTable(Sequence[TextChunk]):
    """The chunks as columns: one UTF-8 blob, offsets, passage ids, starts.

    ``table[i]`` makes the :class:`TextChunk` on demand, so a million chunks cost four
    arrays (memory-mapped when loaded from the cache), not a million Python objects.
    """

    def __init__(
        self,
        text: Any,
        offsets: npt.NDArray[np.int64],
        passage_ids: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
    ) -> None:
        # bytes, a TextFile, or an mmap of the blob file: anything sliceable to bytes
        self._text = text
        self.offsets = offsets
        self.passage_ids = passage_ids
        self.starts = starts

    @classmethod
    def from_chunks(cls, chunks: Iterable[TextChunk], *, spill: bool = False) -> ChunkTable:
        """The table of ``chunks``, read once (the table itself when it already is one).

        With ``spill`` the texts go to an anonymous temporary file as they come and are
        read back with ``pread`` (:class:`TextFile`), so a knowledge base being built
        holds no copy of the corpus's text in memory: at a million passages that was
        some 300 MB beside the index. Where no temporary file can be made, or it
        fills up, they are held in memory.
        """
        from array import array

        import numpy as np

        if isinstance(chunks, ChunkTable):
            return chunks
        sink: Any = None
        if spill:
            try:
                # Not a with block: the file outlives this call, owned by the TextFile.
                sink = tempfile.TemporaryFile(  # noqa: SIM115
                    prefix="ragev-chunks-", buffering=0)
            except OSError:
                sink = None
        text = bytearray()
        size = spilled = 0  # bytes of every chunk so far; of them in the file
        ends, passage_ids, starts = array("q"), array("q"), array("q")
        try:
            for chunk in chunks:
                encoded = chunk.text.encode("utf-8")
                size += len(encoded)
                text += encoded
                if sink is not None and len(text) >= _SPILL_BLOCK:
                    sink, text, spilled = _spill(sink, text, spilled)
                ends.append(size)
                passage_ids.append(chunk.passage_id)
                starts.append(chunk.start)
        except BaseException:
            if sink is not None:
                sink.close()  # closed now, not left to the collector (a ResourceWarning)
            raise
        offsets = np.zeros(len(ends) + 1, dtype=np.int64)
        offsets[1:] = np.frombuffer(ends, dtype=np.int64) if ends else 0
        if sink is not None:
            sink, text, spilled = _spill(sink, text, spilled)
        blob: Any = text if sink is None else TextFile.of_handle(sink)
        return cls(blob, offsets, _int64(passage_ids), _int64(starts))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> TextChunk: ...

    @overload
    def __getitem__(self, index: slice) -> list[TextChunk]: ...

    def __getitem__(self, index: int | slice) -> TextChunk | list[TextChunk]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"chunk {index} out of range ({len(self)} chunks)")
        return TextChunk(text=self.text(index), passage_id=int(self.passage_ids[index]),
                         start=int(self.starts[index]))

    def text(self, index: int) -> str:
        """The text of chunk ``index`` (decoded from the blob on each call)."""
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return bytes(self._text[start:end]).decode("utf-8")

    def texts(self) -> Iterator[str]:
        """Every chunk's text in order, the blob read in blocks of :data:`_SPILL_BLOCK`
        bytes (one read per block, not one per chunk, from a file)."""
        offsets = self.offsets.tolist()
        first = 0
        while first < len(offsets) - 1:
            # The chunks that end within a block from the first one's start (at least one).
            last = first + 1
            limit = offsets[first] + _SPILL_BLOCK
            while last < len(offsets) - 1 and offsets[last + 1] <= limit:
                last += 1
            base = offsets[first]
            block = bytes(self._text[base:offsets[last]])
            for position in range(first, last):
                yield block[offsets[position] - base:offsets[position + 1] - base].decode("utf-8")
            first = last

    def blob(self) -> bytes | memoryview:
        """The UTF-8 text of every chunk, concatenated."""
        if isinstance(self._text, TextFile):
            return self._text[0:len(self._text)]
        return self._text if isinstance(self._text, bytes) else memoryview(self._text)

    def blob_blocks(self) -> Iterator[bytes | memoryview]:
        """:meth:`blob` in blocks of at most :data:`_SPILL_BLOCK` bytes (never whole in
        memory when the texts are in a file)."""
        if not isinstance(self._text, TextFile):
            yield self.blob()
            return
        for start in range(0, len(self._text), _SPILL_BLOCK):
            yield self._text[start:start + _SPILL_BLOCK]


class TextFile:
    """A read-only file whose byte ranges are read with ``pread`` (thread-safe), sliced
    like the bytes it holds.

    The chunk texts are read this way, not mapped: over a run the questions retrieve
    chunks from every page of the file, and a mapping counts each page it touched
    towards the process's resident memory to the end (276 MB at a million passages,
    twice under two xdist workers); read, the pages stay in the operating system's page
    cache, shared all the same, and the process holds only the chunks it decoded. The
    descriptor is closed when the object is collected (a call still running in an
    abandoned thread keeps it open until it returns).
    """

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        weakref.finalize(self, os.close, self._fd)
        self._size = os.fstat(self._fd).st_size

    @classmethod
    def of_handle(cls, handle: Any) -> TextFile:
        """The bytes written to ``handle`` (an open, flushed binary file such as a
        ``tempfile.TemporaryFile``), which it keeps open, and closes when collected."""
        text = cls.__new__(cls)
        text._fd = handle.fileno()
        weakref.finalize(text, handle.close)  # which holds the handle until then
        text._size = os.fstat(text._fd).st_size
        return text

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, span: slice) -> bytes:
        start, stop, _ = span.indices(self._size)
        parts = []
        while start < stop:
            read = os.pread(self._fd, stop - start, start)
            if not read:  # the file shrank under us: what is there is what we return
                break
            parts.append(read)
            start += len(read)
        return b"".join(parts) if len(parts) != 1 else parts[0]


#: Bytes a spilled chunk table writes, or reads back in order, at a time.
_SPILL_BLOCK = 1 << 22


def _spill(sink: Any, text: bytearray, spilled: int) -> tuple[Any, bytearray, int]:
    """``text`` appended to ``sink`` (an unbuffered file holding ``spilled`` bytes):
    ``(sink, empty text, bytes in the file)``. When the file cannot take it (a full
    ``TMPDIR``), what it holds is taken back: ``(None, every byte so far, 0)``, and the
    table goes on in memory, as without a temporary file."""
    try:
        with memoryview(text) as view:  # released after: the buffer can change again
            done = 0
            while done < len(view):
                done += sink.write(view[done:])  # a short write goes on where it stopped
    except OSError:
        sink.seek(0)
        held = bytearray()
        while len(held) < spilled:  # one read returns at most some 2 GB
            block = sink.read(min(spilled - len(held), _SPILL_BLOCK))
            if not block:
                break
            held += block
        sink.close()
        return None, held + text, 0
    spilled += len(text)
    text.clear()
    return sink, text, spilled


def _int64(values: Any) -> npt.NDArray[np.int64]:
    import numpy as np

    return np.frombuffer(values, dtype=np.int64) if len(values) else np.zeros(0, np.int64)


class KnowledgeBase:
    """Chunks, their BM25 index and (for vector/hybrid retrieval) their float16 vectors."""

    def __init__(
        self,
        chunks: Sequence[TextChunk],
        index: BM25Index,
        vectors: npt.NDArray[np.float16] | None,
        *,
        key: str,
        loaded_from_cache: bool = False,
        language: str | None = None,
    ) -> None:
        self.chunks = chunks
        self.index = index
        self.vectors = vectors
        self.key = key
        self.loaded_from_cache = loaded_from_cache
        #: The language most chunks were told (``analyzer = "auto"`` only), which
        #: questions that show none are analysed in.
        self.language = language

    @property
    def chunk_count(self) -> int:
        return len(self.chunks)

    def close(self) -> None:
        self.vectors = None

    # -- persistence
    def save(self, folder: Path) -> None:
        """Write the entry into ``folder``: every file atomically, :data:`MANIFEST` last.

        The old manifest is removed first, so a reader never pairs it with new files.
        """
        import io

        import numpy as np

        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / MANIFEST)
        files: dict[str, dict[str, Any]] = {}

        def put(name: str, data: bytes | memoryview) -> None:
            put_blocks(name, [data])

        def put_blocks(name: str, blocks: Iterable[bytes | memoryview]) -> None:
            digest = hashlib.sha256()
            size = 0

            def counted() -> Iterator[bytes | memoryview]:
                nonlocal size
                for block in blocks:
                    digest.update(block)
                    size += len(block) if isinstance(block, bytes) else block.nbytes
                    yield block  # a memoryview of an in-memory blob is written uncopied

            atomic_write_bytes(folder / name, counted())
            files[name] = {"size": size, "sha256": digest.hexdigest()}

        def put_array(name: str, array: npt.NDArray[Any], dtype: str) -> None:
            flat = np.ascontiguousarray(array, dtype=np.dtype(dtype)).reshape(-1)
            put(name, memoryview(flat.view(np.uint8).data))

        index = self.index
        for name, (attribute, dtype) in _INDEX_ARRAYS.items():
            put_array(name, getattr(index, attribute), dtype)
        words = [""] * len(index.vocab)
        for word, number in index.vocab.items():
            words[number] = word
        put(_VOCAB, json.dumps(words, ensure_ascii=False).encode("utf-8"))
        table = ChunkTable.from_chunks(self.chunks)
        put_blocks(_CHUNK_TEXT, table.blob_blocks())
        for name, column in zip(_CHUNK_ARRAYS,
                                (table.offsets, table.passage_ids, table.starts), strict=True):
            put_array(name, column, _CHUNK_ARRAYS[name])
        if self.vectors is not None:
            buffer = io.BytesIO()
            np.save(buffer, self.vectors)
            put(_VECTORS, buffer.getvalue())
        manifest: dict[str, Any] = {
            "format": KB_FORMAT, "key": self.key, "chunks": len(table),
            "terms": len(index.vocab), "postings": index.postings,
            "k1": index.k1, "b": index.b, "files": files, "language": self.language,
        }
        manifest[_DIGEST] = _manifest_digest(manifest)
        atomic_write_text(folder / MANIFEST, json.dumps(manifest, sort_keys=True))

    @classmethod
    def load(cls, folder: Path, key: str, *, verify: bool = True) -> KnowledgeBase | None:
        """The entry in ``folder`` for ``key``, memory-mapped; ``None`` when there is none.

        Raises :class:`DamagedEntry` (naming the file and the fault) when the entry is
        there but does not match its manifest. ``verify=False`` skips the checksums
        (sizes and shapes are still checked): for an entry this process just wrote.
        """
        try:
            raw = (folder / MANIFEST).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise DamagedEntry(f"{MANIFEST} is unreadable ({error})") from None
        try:
            manifest = json.loads(raw)
        except ValueError:
            raise DamagedEntry(f"{MANIFEST} is not valid JSON") from None
        if not isinstance(manifest, dict) or manifest.get("format") != KB_FORMAT:
            return None  # another format: not this entry, rebuilt silently
        if manifest.get(_DIGEST) != _manifest_digest(manifest):
            # The files have their checksums; the manifest's own values (k1, b, the
            # counts, the key) have this one: a changed k1 would change every score.
            raise DamagedEntry(f"{MANIFEST} does not match its checksum")
        if manifest.get("key") != key:
            return None  # another key: not this entry, rebuilt silently
        try:
            return cls._load_files(folder, key, manifest, verify)
        except DamagedEntry:
            raise
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DamagedEntry(f"{type(error).__name__}: {error}") from None

    @classmethod
    def _load_files(
        cls, folder: Path, key: str, manifest: dict[str, Any], verify: bool
    ) -> KnowledgeBase:
        import numpy as np

        files: dict[str, Any] = manifest["files"]
        required = [*_INDEX_ARRAYS, *_CHUNK_ARRAYS, _CHUNK_TEXT, _VOCAB]
        missing = [name for name in required if name not in files]
        if missing:
            raise DamagedEntry(f"{MANIFEST} lists no {missing[0]}")
        for name, entry in files.items():
            _check_file(folder / name, int(entry["size"]), str(entry["sha256"]), verify)
        arrays = {attribute: _map(folder / name, dtype)
                  for name, (attribute, dtype) in _INDEX_ARRAYS.items()}
        words = json.loads((folder / _VOCAB).read_bytes())
        n_chunks, n_terms = int(manifest["chunks"]), int(manifest["terms"])
        offsets, passages, starts = (_map(folder / name, dtype)
                                     for name, dtype in _CHUNK_ARRAYS.items())
        # Read where asked (see TextFile); mapped where the system has no pread (Windows).
        text = (TextFile(folder / _CHUNK_TEXT) if hasattr(os, "pread")
                else _map_bytes(folder / _CHUNK_TEXT))
        postings = int(manifest["postings"])
        shapes_ok = (
            isinstance(words, list) and len(words) == n_terms
            and len(arrays["idf"]) == n_terms == len(arrays["max_impact"])
            and len(arrays["indptr"]) == n_terms + 1 and int(arrays["indptr"][-1]) == postings
            and len(arrays["indices"]) == postings == len(arrays["data"])
            and len(offsets) == n_chunks + 1 == len(passages) + 1 == len(starts) + 1
            and int(offsets[-1]) == len(text)
            and len(arrays["columns"]) == len(arrays["dense_terms"]) * n_chunks
        )
        if not shapes_ok:
            raise DamagedEntry("the arrays do not match the counts in the manifest")
        arrays["columns"] = arrays["columns"].reshape(len(arrays["dense_terms"]), n_chunks)
        index = BM25Index(
            vocab={word: number for number, word in enumerate(words)},
            n_docs=n_chunks, k1=float(manifest["k1"]), b=float(manifest["b"]), **arrays,
        )
        vectors = None
        if _VECTORS in files:
            vectors = np.load(folder / _VECTORS, mmap_mode="r")
            if vectors.ndim != 2 or len(vectors) != n_chunks:
                raise DamagedEntry(f"{_VECTORS} has shape {vectors.shape}, not {n_chunks} rows")
        chunks = ChunkTable(text, offsets, passages, starts)
        language = manifest.get("language")
        return cls(chunks, index, vectors, key=key, loaded_from_cache=True,
                   language=language if isinstance(language, str) else None)


#: The manifest's key holding the sha256 of the rest of it.
_DIGEST = "manifest_sha256"


def _manifest_digest(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest's canonical JSON, its own digest left out."""
    return sha256_json({name: value for name, value in manifest.items() if name != _DIGEST})


class DamagedEntry(Exception):
    """A cache entry that is there but does not match its manifest (the message says how)."""


def _check_file(path: Path, size: int, digest: str, verify: bool) -> None:
    """Size (always) and sha256 (when ``verify``) of ``path`` against the manifest.

    Read with plain reads, not through a mapping: the pages land in the page cache
    without counting towards this process's resident memory.
    """
    try:
        actual = path.stat().st_size
    except FileNotFoundError:
        raise DamagedEntry(f"{path.name} is missing") from None
    if actual != size:
        raise DamagedEntry(f"{path.name} has {actual} bytes, the manifest says {size}")
    if not verify:
        return
    sha = hashlib.sha256()
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            read = handle.readinto(buffer)
            if not read:
                break
            sha.update(view[:read])
    if sha.hexdigest() != digest:
        raise DamagedEntry(f"{path.name} does not match its checksum")


def _map_bytes(path: Path) -> Any:
    """The file's bytes, memory-mapped read-only (``b""`` for an empty file)."""
    import mmap

    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return b""
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _map(path: Path, dtype: str) -> Any:
    """A read-only numpy view of the file mapped in memory."""
    import numpy as np

    data = _map_bytes(path)
    if len(data) % np.dtype(dtype).itemsize:
        raise DamagedEntry(f"{path.name} is not a whole number of {dtype} values")
    return np.frombuffer(data, dtype=np.dtype(dtype)) if len(data) else np.zeros(0, dtype)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock across processes (a no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: concurrent builders stay safe through atomic writes
        yield
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


#: Cache folders this process already warned about (a full or read-only one warns once).
_warned: set[str] = set()


def default_warn(message: str) -> None:
    """Issue ``message`` as a :class:`CacheWarning`; never raises (even under ``-W error``)."""
    with contextlib.suppress(Exception):
        warnings.warn(CacheWarning(message), stacklevel=3)


def _warn_once(warn: Warn, cache_dir: Path, message: str) -> None:
    if str(cache_dir) not in _warned:
        _warned.add(str(cache_dir))
        warn(message)


def _reason(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def load_or_build(
    cache_dir: Path | None,
    key: str,
    build: Callable[[], KnowledgeBase],
    *,
    warn: Warn | None = None,
) -> KnowledgeBase:
    """The cached KB of ``key`` under ``cache_dir``, else ``build()`` (then cached).

    xdist workers start together: the first builds under a file lock, the others wait
    and then map what it wrote. A damaged entry is rebuilt with one warning; a cache
    folder that cannot be written (read-only, full) warns once per process and the KB
    is built in memory: the cache is an optimisation, it never fails a run. A built KB
    that was saved is returned mapped from the cache, so its build-time memory is freed.
    ``None``: no cache.
    """
    if cache_dir is None:
        return build()
    say = warn or default_warn
    folder = cache_dir / key[:16]
    with contextlib.suppress(DamagedEntry):  # checked again, and reported, under the lock
        cached = KnowledgeBase.load(folder, key)
        if cached is not None:
            return cached
    with contextlib.ExitStack() as stack:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            stack.enter_context(_file_lock(folder / ".lock"))
        except OSError as error:
            _warn_once(say, cache_dir, f"ragev: the knowledge-base cache {cache_dir} is not "
                       f"writable ({_reason(error)}); building the knowledge base without it")
            return build()
        try:
            cached = KnowledgeBase.load(folder, key)
            if cached is not None:
                return cached
        except DamagedEntry as damage:
            say(f"ragev: the cached knowledge base in {folder} is damaged ({damage}); "
                "rebuilding it")
        kb = build()
        try:
            kb.save(folder)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(folder / MANIFEST)
            _warn_once(say, cache_dir, f"ragev: could not write the knowledge-base cache "
                       f"{folder} ({_reason(error)}); going on without it")
            return kb
        try:
            mapped = KnowledgeBase.load(folder, key, verify=False)
        except DamagedEntry:
            mapped = None
        if mapped is None:
            return kb
        mapped.loaded_from_cache = False  # built by this call, only handed back mapped
        return mapped
