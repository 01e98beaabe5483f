"""The built-in generator: an extractive answer from the retrieved chunks, offline."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_ragev.pipelines.builtin.tokens import bm25_tokens, has_han

if TYPE_CHECKING:
    pass


_SPLIT = re.compile(r"(?<=[。！？!?])|(?<=\.)\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of a chunk: cut after 。！？!? and after a period followed by a space."""
    return [piece.strip() for piece in _SPLIT.split(text) if piece and piece.strip()]


def extractive_answer(question: str, contexts: Sequence[str], *, max_tokens: int) -> str:
    """Compose an answer from the context sentences that best match the question.

    Sentences are scored by the idf-free share of the question's distinct retrieval tokens
    they contain (ties: earlier context first); the best are taken until ``max_tokens``
    retrieval tokens are used (always at least one sentence), then put back in reading
    order. Deterministic, offline.
    """
    query = set(bm25_tokens(question))
    candidates: list[tuple[float, int, str, int]] = []
    position = 0
    for context in contexts:
        for sentence in split_sentences(context):
            tokens = bm25_tokens(sentence)
            if not tokens:
                continue
            overlap = len(query & set(tokens)) / len(query) if query else 0.0
            candidates.append((overlap, position, sentence, len(tokens)))
            position += 1
    if not candidates:
        return contexts[0][:200] if contexts else ""
    chosen: list[tuple[int, str]] = []
    used = 0
    for overlap, order, sentence, length in sorted(candidates, key=lambda c: (-c[0], c[1])):
        if chosen and (overlap == 0.0 or used + length > max_tokens):
            continue
        chosen.append((order, sentence))
        used += length
        if used >= max_tokens:
            break
    parts = [sentence for _, sentence in sorted(chosen)]
    joiner = "" if any(has_han(p) for p in parts) else " "
    return joiner.join(parts)
