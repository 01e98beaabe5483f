"""The knowledge base of the built-in pipeline and its disk cache.

A :class:`KnowledgeBase` holds the chunks, their BM25 index and (for vector or hybrid
retrieval) their vectors. :func:`load_or_build` keys it on the corpus fingerprint and
the knobs that shape it, so reruns and xdist workers load it instead of rebuilding, and
variants that differ only in retrieval or generation knobs share it. The key also holds
:func:`code_digest`, so editing the code that builds a KB never serves an old one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_ragev.core.io import atomic_write_bytes, atomic_write_text
from pytest_ragev.core.version import __version__
from pytest_ragev.pipelines.builtin.bm25 import BM25Index
from pytest_ragev.pipelines.builtin.chunking import TextChunk

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


#: A build's progress callback: ``(done, of)``.
Progress = Callable[[int, int], None]

#: Bumped when the on-disk layout of a cached knowledge base changes.
KB_FORMAT = 1

#: The modules (relative to the package) whose code decides the built-in KB and answers:
#: the pipeline itself, how its cache keys are made, the chat client it may call, the
#: table reader its knobs go through, and the jieba set-up the BM25 tokenizer uses.
CODE_MODULES = (
    "pipelines/builtin/*.py", "pipelines/identity.py", "pipelines/remote/chat.py",
    "plugin/defaults.py", "core/tables.py", "core/digest.py", "core/segment.py",
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
    files = sorted({path for pattern in CODE_MODULES for path in package.glob(pattern)})
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:  # an unusual install (zip): fall back to the version alone
            data = b""
        name = path.relative_to(package).as_posix().encode()
        digest.update(b"%s\0%d\0" % (name, len(data)) + data)
    from importlib import metadata

    try:
        jieba_version = metadata.version("jieba")
    except metadata.PackageNotFoundError:
        jieba_version = "-"
    digest.update(f"jieba=={jieba_version}\n".encode())
    digest.update(f"pytest-ragev=={__version__}\n".encode())
    return digest.hexdigest()


class KnowledgeBase:
    """Chunks, their BM25 index and (for vector/hybrid retrieval) their float16 vectors."""

    def __init__(
        self,
        chunks: list[TextChunk],
        index: BM25Index,
        vectors: npt.NDArray[np.float16] | None,
        *,
        key: str,
        loaded_from_cache: bool = False,
    ) -> None:
        self.chunks = chunks
        self.index = index
        self.vectors = vectors
        self.key = key
        self.loaded_from_cache = loaded_from_cache

    @property
    def chunk_count(self) -> int:
        return len(self.chunks)

    def close(self) -> None:
        self.vectors = None

    # -- persistence
    def save(self, folder: Path) -> None:
        import io

        import numpy as np

        folder.mkdir(parents=True, exist_ok=True)
        self.index.save(folder)
        if self.vectors is not None:
            buffer = io.BytesIO()
            np.save(buffer, self.vectors)
            atomic_write_bytes(folder / "vectors.npy", buffer.getvalue())
        atomic_write_text(
            folder / "chunks.json",
            json.dumps([[c.passage_id, c.start, c.text] for c in self.chunks], ensure_ascii=False),
        )
        # Written last: its presence marks a complete cache entry.
        atomic_write_text(folder / "kb.json", json.dumps({"format": KB_FORMAT, "key": self.key}))

    @classmethod
    def load(cls, folder: Path, key: str) -> KnowledgeBase | None:
        import numpy as np

        try:
            meta = json.loads((folder / "kb.json").read_text(encoding="utf-8"))
            if meta != {"format": KB_FORMAT, "key": key}:
                return None
            rows = json.loads((folder / "chunks.json").read_text(encoding="utf-8"))
            chunks = [TextChunk(text=t, passage_id=int(p), start=int(s)) for p, s, t in rows]
            index = BM25Index.load(folder)
            vectors_path = folder / "vectors.npy"
            vectors = np.load(vectors_path) if vectors_path.exists() else None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is rebuilt, never trusted
        return cls(chunks, index, vectors, key=key, loaded_from_cache=True)


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


def load_or_build(
    cache_dir: Path | None, key: str, build: Callable[[], KnowledgeBase]
) -> KnowledgeBase:
    """The cached KB of ``key`` under ``cache_dir``, else ``build()`` (then cached).

    xdist workers start together: the first builds under a file lock, the others wait
    and load. Every file is replaced atomically and ``kb.json``, written last, marks the
    entry complete; a read-only cache must not fail the run. ``None``: no cache.
    """
    if cache_dir is None:
        return build()
    folder = cache_dir / key[:16]
    cached = KnowledgeBase.load(folder, key)
    if cached is not None:
        return cached
    folder.mkdir(parents=True, exist_ok=True)
    with _file_lock(folder / ".lock"):
        cached = KnowledgeBase.load(folder, key)
        if cached is not None:
            return cached
        kb = build()
        with contextlib.suppress(OSError):
            kb.save(folder)
        return kb
