"""Synthetic corpora and questions from a Zipf vocabulary, for the benchmarks.

Words are pronounceable syllable strings ranked by frequency; word ``r`` is drawn with
probability proportional to ``1 / (r + 1)``. A passage is 20-80 words in sentences of
6-14 words. A question takes 4 distinct words of one target passage plus 2 of the 20
most frequent words (a known-item search: the target is its one relevant passage) and
its reference answer is the target's first sentence. Everything is a function of the
seed, drawn with numpy, so a million passages take seconds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # 70 syllables


def word(rank: int) -> str:
    """The word of frequency rank ``rank`` (0 is the most frequent)."""
    out = []
    rank += len(_SYLLABLES)  # every word has at least two syllables
    while rank:
        rank, digit = divmod(rank, len(_SYLLABLES))
        out.append(_SYLLABLES[digit])
    return "".join(out)


@dataclass(frozen=True)
class Corpus:
    """Passages as word ranks: ``ranks[offsets[i]:offsets[i + 1]]`` is passage ``i``."""

    words: list[str]
    ranks: npt.NDArray[np.int32]
    offsets: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def tokens(self, i: int) -> list[str]:
        words = self.words
        return [words[r] for r in self.ranks[self.offsets[i]:self.offsets[i + 1]].tolist()]

    def token_lists(self) -> list[list[str]]:
        words = self.words
        flat = [words[r] for r in self.ranks.tolist()]
        bounds = self.offsets.tolist()
        return [flat[a:b] for a, b in itertools.pairwise(bounds)]

    def text(self, i: int) -> str:
        """Passage ``i`` as sentences: capitalised first word, a period after each."""
        tokens = self.tokens(i)
        # Sentence lengths are a function of the passage index (deterministic, cheap).
        sentences, position, step = [], 0, 6 + i % 9
        while position < len(tokens):
            part = tokens[position:position + step]
            sentences.append(part[0].capitalize() + " " + " ".join(part[1:]) + ".")
            position += step
        return " ".join(sentences)

    def first_sentence(self, i: int) -> str:
        return self.text(i).split(". ")[0].rstrip(".") + "."


def corpus(n_docs: int, *, vocab: int = 50_000, seed: int = 0, low: int = 20,
           high: int = 80) -> Corpus:
    """``n_docs`` passages of ``low``-``high`` words from a Zipf vocabulary of ``vocab``."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(low, high + 1, size=n_docs)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1))
    cdf /= cdf[-1]
    ranks = np.searchsorted(cdf, rng.random(int(offsets[-1]))).astype(np.int32)
    return Corpus([word(r) for r in range(vocab)], ranks, offsets)


def queries(docs: Corpus, count: int, *, seed: int = 1) -> list[tuple[int, list[str]]]:
    """``count`` known-item queries: ``(target passage, 4 of its words + 2 frequent words)``."""
    rng = np.random.default_rng(seed)
    frequent = [docs.words[r] for r in range(20)]
    out = []
    for target in rng.integers(0, len(docs), size=count).tolist():
        distinct = sorted(set(docs.tokens(target)))
        picked = [distinct[j] for j in rng.choice(len(distinct), size=min(4, len(distinct)),
                                                  replace=False)]
        out.append((target, picked + [frequent[j] for j in rng.integers(0, 20, size=2)]))
    return out
