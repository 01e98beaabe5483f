"""Split passages into chunks that respect separators, a size limit and an overlap.

A passage is first cut into *pieces*: at the first separator (in priority order) that
occurs in it, then, for pieces still longer than ``chunk_size``, at the next separator,
then at sentence ends, and finally by a hard cut every ``chunk_size`` characters. A
separator stays at the end of the piece it closes, so "。" and "\\n" are never lost.
Pieces are then packed greedily into chunks of at most ``chunk_size`` characters; each
new chunk starts with the tail of the previous one (whole pieces that fit in
``chunk_overlap`` characters, or else the last ``chunk_overlap`` characters). Chunks never
cross passages, so every chunk keeps the id of the passage it came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

DEFAULT_CHUNK_SIZE = 1024
DEFAULT_CHUNK_OVERLAP = 50
DEFAULT_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", "。")

# After CJK sentence marks (and ! ? ; in both widths), with closing quotes or brackets kept;
# after a period only when whitespace or the end follows, so "3.14" and "e.g" stay whole.
_SENTENCE_END = re.compile(r"(?:[。！？!?；;…]+|\.(?=\s|$))[\"'”’」』）)\]]*")


@dataclass(frozen=True)
class TextChunk:
    """One chunk of the knowledge base: its text, its passage and its offset in the passage."""

    text: str
    passage_id: int
    start: int


def _split_at(text: str, start: int, end: int, separator: str) -> list[tuple[int, int]]:
    pieces: list[tuple[int, int]] = []
    position = start
    while True:
        found = text.find(separator, position, end)
        if found < 0:
            break
        cut = found + len(separator)
        pieces.append((position, cut))
        position = cut
    if position < end:
        pieces.append((position, end))
    return pieces


def _split_sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    pieces: list[tuple[int, int]] = []
    position = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if match.end() > position:
            pieces.append((position, match.end()))
            position = match.end()
    if position < end:
        pieces.append((position, end))
    return pieces


def _pieces(
    text: str, start: int, end: int, chunk_size: int, separators: Sequence[str]
) -> list[tuple[int, int]]:
    if end - start <= chunk_size:
        return [(start, end)]
    for level, separator in enumerate(separators):
        if separator and text.find(separator, start, end) >= 0:
            rest = separators[level + 1 :]
            out: list[tuple[int, int]] = []
            for piece_start, piece_end in _split_at(text, start, end, separator):
                out.extend(_pieces(text, piece_start, piece_end, chunk_size, rest))
            return out
    sentences = _split_sentences(text, start, end)
    if len(sentences) > 1:
        out = []
        for piece_start, piece_end in sentences:
            out.extend(_pieces(text, piece_start, piece_end, chunk_size, ()))
        return out
    return _hard_cut(text, start, end, chunk_size)


def _hard_cut(text: str, start: int, end: int, width: int) -> list[tuple[int, int]]:
    # Slices of at most ``width`` characters, ending after a space when one sits in the
    # second half of the slice, so Latin words are rarely cut in two.
    pieces: list[tuple[int, int]] = []
    position = start
    while end - position > width:
        cut = position + width
        space = text.rfind(" ", position + width // 2, cut)
        if space >= 0:
            cut = space + 1
        pieces.append((position, cut))
        position = cut
    if position < end:
        pieces.append((position, end))
    return pieces


def _overlap_start(
    text: str, chunk_start: int, chunk_end: int, pieces: Sequence[tuple[int, int]], overlap: int
) -> int:
    if overlap <= 0:
        return chunk_end
    start = chunk_end
    for piece_start, _ in reversed(pieces):
        if chunk_end - piece_start > overlap:
            break
        start = piece_start
    if start < chunk_end:
        return start
    # The last piece alone is longer than the overlap: take a character tail, beginning
    # after a space when there is one, so English overlaps do not open mid-word.
    start = max(chunk_end - overlap, chunk_start)
    space = text.find(" ", start, chunk_end)
    if 0 <= space < chunk_end - 1:
        start = space + 1
    return start


def chunk_spans(
    text: str,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
) -> list[tuple[int, int]]:
    """The ``(start, end)`` character spans of the chunks of ``text``, in order.

    Each span is at most ``chunk_size`` characters; consecutive spans share at most
    ``chunk_overlap`` characters. Whitespace at either end of a chunk is trimmed and
    whitespace-only chunks are dropped.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError("chunk_overlap must be >= 0 and smaller than chunk_size")
    # Pieces leave room for the overlap, so a chunk can open with the previous one's tail.
    width = max(chunk_size - chunk_overlap, 1)
    pieces = _pieces(text, 0, len(text), width, tuple(separators))
    raw: list[tuple[int, int]] = []
    current: list[tuple[int, int]] = []
    current_start = 0
    for piece in pieces:
        if current and piece[1] - current_start > chunk_size:
            current_end = current[-1][1]
            raw.append((current_start, current_end))
            start = _overlap_start(text, current_start, current_end, current, chunk_overlap)
            # The overlap gives way to the new piece: a chunk never exceeds chunk_size.
            start = max(start, piece[1] - chunk_size)
            current = [(max(s, start), e) for s, e in current if e > start]
            current_start = start
        if not current:
            current_start = piece[0]
        current.append(piece)
    if current:
        raw.append((current_start, current[-1][1]))

    spans: list[tuple[int, int]] = []
    for start, end in raw:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        # A chunk that trimming left inside the previous one adds nothing: drop it.
        if start < end and (not spans or end > spans[-1][1]):
            spans.append((start, end))
    return spans


def chunk_text(
    text: str,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
) -> list[str]:
    """The chunk texts of ``text`` (see :func:`chunk_spans`)."""
    return [
        text[start:end]
        for start, end in chunk_spans(
            text, chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=separators
        )
    ]


def chunk_corpus(
    corpus: Mapping[int, str] | Iterable[tuple[int, str]],
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
) -> list[TextChunk]:
    """Chunk every passage, in ascending passage-id order; chunks keep their passage id."""
    items = corpus.items() if isinstance(corpus, Mapping) else corpus
    chunks: list[TextChunk] = []
    for passage_id, text in sorted(items, key=lambda item: item[0]):
        for start, end in chunk_spans(
            text, chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=separators
        ):
            chunks.append(TextChunk(text=text[start:end], passage_id=passage_id, start=start))
    return chunks
