"""The dataset's fingerprint: sha256 over the canonical bytes of its tables.

Canonical bytes do not depend on Parquet metadata, row order, compression, id storage
type or ignored columns; any text or id changes them. Whole Arrow buffers are hashed,
never one row at a time, and a shuffled table is hashed in id order without a sorted
copy (:class:`IdOrderFeed`).
"""

from __future__ import annotations

import hashlib
import queue
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from pytest_ragev.dataset._arrow import IntArray, TextArray, is_utf8, take_indices

#: Bumped whenever the canonical byte layout below changes (old fingerprints become stale).
_FINGERPRINT_VERSION = b"pytest-ragev dataset fingerprint v1\n"


def table_digest(name: str, ids: IntArray, texts: TextArray) -> bytes:
    """The sha256 of an ``id``/``text`` table's canonical bytes (``ids`` ascending, ``texts``
    in the same order).

    Canonical bytes: the name, the row count, the sorted ids as little-endian int64, every
    text's UTF-8 byte length, then all text bytes in id order. Parquet metadata, row order,
    compression, id storage type and ignored columns do not enter; any text or id does.
    Whole Arrow buffers are hashed, never one row at a time.
    """
    digest = hashlib.sha256()
    _hash_ints(digest, name, ids)
    _hash_texts(digest, texts)
    return digest.digest()


def corpus_digest(ids: IntArray, texts: TextArray) -> str:
    """The corpus part of the fingerprint (hex) for ``ids`` (ascending) and their ``texts``.

    The loader hashes a file this way (:class:`IdOrderFeed`); this is the same for a
    corpus held in memory, so both give one key for one content.
    """
    return table_digest("corpus", ids, texts).hex()


#: Rows per block when hashing a shuffled table in id order (a few MiB of text per block).
_DIGEST_BLOCK_ROWS = 1 << 15


@dataclass(frozen=True)
class IdOrderFeed:
    """The digest of a shuffled table, computed from id-order blocks (see :meth:`prepare`).

    The same digest as :func:`table_digest` of the texts in id order, without a reordered copy:
    this thread gathers one block at a time into id order (:meth:`put_blocks`) while the
    worker hashes the previous one (:meth:`hash_blocks`). Both steps release the GIL for their
    bulk (Arrow's take, sha256), so on two cores the pass costs about the hashing alone.
    The passages the pairs need are picked out of the same fresh blocks, which is cheaper
    than a second random gather over the whole table.
    """

    #: sha256 with the name, the row count and the sorted ids already hashed.
    digest: Any
    #: The permutation (sorted position -> file row) as an Arrow index array.
    order: pa.Array[Any]
    #: Sorted positions of the wanted passages, ascending, and where each came from in
    #: the caller's array; ``block_bounds[k]:block_bounds[k + 1]`` are block ``k``'s.
    passage_positions: npt.NDArray[np.intp]
    passage_slots: npt.NDArray[np.intp]
    block_bounds: list[int]

    @classmethod
    def prepare(
        cls,
        name: str,
        sorted_ids: IntArray,
        order: npt.NDArray[np.intp],
        passage_positions: npt.NDArray[np.intp],
    ) -> IdOrderFeed:
        """Plan the feed of a table with ``sorted_ids`` whose file rows are ``order``, and
        of the texts at the sorted ``passage_positions``; everything that needs no text."""
        digest = hashlib.sha256()
        _hash_ints(digest, name, sorted_ids)
        slots = np.argsort(passage_positions)
        positions = passage_positions[slots]
        block_starts = np.arange(0, len(order) + _DIGEST_BLOCK_ROWS, _DIGEST_BLOCK_ROWS)
        return cls(
            digest=digest,
            order=take_indices(order),
            passage_positions=positions,
            passage_slots=slots,
            block_bounds=np.searchsorted(positions, block_starts).tolist(),
        )

    def hash_blocks(
        self, combined: pa.Array[Any], blocks: queue.Queue[pa.Array[Any] | None]
    ) -> bytes:
        """Hash the text lengths in id order, then the blocks from ``blocks`` up to ``None``."""
        digest = self.digest
        lengths = pc.binary_length(cast(Any, combined)).take(self.order)
        digest.update(np.ascontiguousarray(lengths.cast(pa.int64()).to_numpy(), dtype="<i8"))
        while (block := blocks.get()) is not None:
            _hash_text_bytes(digest, pa.chunked_array([block]))
        return cast(bytes, digest.digest())

    def put_blocks(
        self,
        combined: pa.Array[Any],
        blocks: queue.Queue[pa.Array[Any] | None],
        hashing: Future[bytes],
        *,
        on_invalid: Callable[[], NoReturn],
    ) -> list[str]:
        """Put ``combined`` on ``blocks`` in id order, one block at a time, then ``None``;
        returns the texts at the planned passage positions, in the caller's order.

        Each block is checked to be UTF-8 while the worker hashes it; for a block that is
        not, ``on_invalid`` raises the error (naming the first bad row of the file).
        """
        texts: Any = np.empty(len(self.passage_positions), dtype=object)
        try:
            for index, start in enumerate(range(0, len(self.order), _DIGEST_BLOCK_ROWS)):
                block = combined.take(self.order.slice(start, _DIGEST_BLOCK_ROWS))
                _put_unless_stopped(blocks, block, hashing)
                if not is_utf8(block):
                    on_invalid()
                first, last = self.block_bounds[index], self.block_bounds[index + 1]
                if last > first:
                    rows = take_indices(self.passage_positions[first:last] - start)
                    texts[self.passage_slots[first:last]] = block.take(rows).to_numpy(
                        zero_copy_only=False
                    )
        finally:
            _put_unless_stopped(blocks, None, hashing)
        return cast("list[str]", texts.tolist())


def _put_unless_stopped(
    blocks: queue.Queue[pa.Array[Any] | None], item: pa.Array[Any] | None, consumer: Future[Any]
) -> None:
    """``blocks.put(item)``, unless the consumer has ended (by an error) and never takes it."""
    while True:
        try:
            blocks.put(item, timeout=0.05)
            return
        except queue.Full:
            if consumer.done():
                return


def links_digest(
    rel_qids: IntArray,
    rel_pids: IntArray,
    rel_grades: npt.NDArray[np.float64],
    qas_qids: IntArray,
    qas_aids: IntArray,
) -> bytes:
    """sha256 of the relevant qrels (sorted by qid, pid; with grades) and the sorted qas."""
    digest = hashlib.sha256()
    _hash_ints(digest, "qrels.qid", rel_qids)
    _hash_ints(digest, "qrels.pid", rel_pids)
    digest.update(b"qrels.score\n")
    digest.update(np.ascontiguousarray(rel_grades, dtype="<f8").tobytes())
    _hash_ints(digest, "qas.qid", qas_qids)
    _hash_ints(digest, "qas.aid", qas_aids)
    return digest.digest()


def combine_digests(parts: list[bytes]) -> str:
    """The dataset fingerprint: sha256 over the version tag and the part digests, in order
    corpus, queries, answers, links."""
    return hashlib.sha256(_FINGERPRINT_VERSION + b"".join(parts)).hexdigest()


def _hash_ints(digest: Any, label: str, values: IntArray) -> None:
    digest.update(f"{label}\n{len(values)}\n".encode())
    digest.update(np.ascontiguousarray(values, dtype="<i8").tobytes())


def _hash_texts(digest: Any, texts: TextArray) -> None:
    # The byte length of every text, then all UTF-8 bytes back to back: independent of
    # how Arrow chunked the column or whether its offsets are 32 or 64 bit.
    lengths = pc.binary_length(cast(Any, texts)).cast(pa.int64()).to_numpy()
    digest.update(np.ascontiguousarray(lengths, dtype="<i8").tobytes())
    _hash_text_bytes(digest, texts)


def _hash_text_bytes(digest: Any, texts: TextArray) -> None:
    """All UTF-8 bytes of ``texts`` back to back, straight from the Arrow data buffers."""
    for chunk in texts.chunks:
        if len(chunk) == 0:
            continue
        _validity, offsets_buffer, data_buffer = chunk.buffers()[:3]
        if data_buffer is None or offsets_buffer is None:
            continue
        offset_type = "<i8" if pa.types.is_large_string(chunk.type) else "<i4"
        offsets = np.frombuffer(memoryview(offsets_buffer), dtype=offset_type)
        start = int(offsets[chunk.offset])
        end = int(offsets[chunk.offset + len(chunk)])
        digest.update(memoryview(data_buffer)[start:end])


def tags_digest(qids: list[int], tags: list[tuple[str, ...]]) -> bytes:
    """sha256 of the questions' tags (``qids`` ascending, each question's tags in the
    loader's order): the fifth part of the fingerprint, only for a ``queries.parquet``
    with a ``tags`` column, so a dataset without one keeps its fingerprint.

    Each tagged question is written as its qid and its tags sorted, every tag with its
    length first, so tag order and the column's storage type (a string, a list) do not
    enter and no two contents share an input.
    """
    digest = hashlib.sha256(b"queries.tags\n")
    for qid, names in zip(qids, tags, strict=True):
        if names:
            body = "".join(f"{len(name)}:{name}" for name in sorted(names))
            digest.update(f"{qid};{len(names)};{body}\n".encode())
    return digest.digest()
