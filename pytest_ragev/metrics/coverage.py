"""How much of a text its tokens keep: the letters and digits a tokenizer lost.

A text metric can only see what the tokenizer keeps. The built-in tokenizers keep every
letter and digit; a custom one may not (an ASCII-only pattern keeps nothing of a
Russian answer, which then scores 0 against any reference, or 1.0 against another
Russian answer that also lost everything). :func:`letter_coverage` measures one text,
:func:`audit_tokens` a run's texts, for the one-line warning a run prints.

Letters and digits are counted after compatibility decomposition and case folding
(``NFKD(casefold(NFKD(s)))``, marks dropped), on both sides: so a token may be
lowercased, composed or NFKC-normalised (``ﬁ`` -> ``fi``, ``ｶﾞ`` -> ``ガ``) and still keep its
letters, and a Hangul syllable counts as its jamo.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import regex

from pytest_ragev.metrics.text import segmenter
from pytest_ragev.metrics.tokenizers import TokenizerChoice

__all__ = ["COVERAGE_THRESHOLD", "LetterCoverage", "TokenAudit", "audit_tokens", "letter_coverage"]

#: A custom tokenizer whose tokens keep less than this share of a text's letters and
#: digits is reported for that text.
COVERAGE_THRESHOLD = 0.9

_LETTERS = regex.compile(r"[^\p{L}\p{N}]+")
_LETTER_OR_DIGIT = regex.compile(r"[\p{L}\p{N}]")


def _raw_letters(text: str) -> str:
    return _LETTERS.sub("", text)


def _folded(letters: str) -> str:
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", letters).casefold())
    return _LETTERS.sub("", folded)


@dataclass(frozen=True)
class LetterCoverage:
    """``kept`` of a text's ``letters`` (letters and digits, counted as the module says)
    occur in its tokens."""

    letters: int
    kept: int

    @property
    def ratio(self) -> float:
        """``kept / letters``; 1.0 for a text without letters or digits."""
        return self.kept / self.letters if self.letters else 1.0


def letter_coverage(text: str, sentences: Iterable[Iterable[str]]) -> LetterCoverage:
    """How many of ``text``'s letters and digits its tokens (``sentences``) keep.

    Each letter counts once: the tokens keep ``min(count in the text, count in the
    tokens)`` of every letter, so tokens repeating a word cannot make up for one they
    dropped. Pure; about as fast as NFKD-normalising the text when the tokens hold
    the text's letters in order (the usual case).
    """
    raw = _raw_letters(text)
    if not raw:
        return LetterCoverage(0, 0)
    raw_tokens = _raw_letters("".join(token for sentence in sentences for token in sentence))
    letters = _folded(raw)
    if raw_tokens == raw:
        return LetterCoverage(len(letters), len(letters))
    wanted = Counter(letters)
    found = Counter(_folded(raw_tokens))
    kept = sum(min(count, found[letter]) for letter, count in wanted.items())
    return LetterCoverage(len(letters), kept)


@dataclass(frozen=True)
class TokenAudit:
    """What :func:`audit_tokens` found in a run's texts (distinct, non-blank texts).

    ``empty``: texts that gave no token at all (their text metrics are 0 whatever the
    other side says); ``unlettered``: texts that gave tokens but have no letter or digit
    at all (``?``, ``...!?``: punctuation only, so ``?`` against ``?`` scores 1.0 and
    against ``!`` 0); ``low``: texts whose tokens keep less than ``threshold`` of their
    letters and digits (custom tokenizers only); each with the first such text and,
    for ``low``, its coverage.
    """

    tokenizer: str
    texts: int
    empty: int
    empty_example: str | None
    low: int
    low_example: str | None
    low_example_ratio: float | None
    threshold: float = COVERAGE_THRESHOLD
    unlettered: int = 0
    unlettered_example: str | None = None

    def warning(self) -> str | None:
        """One line for the run's output, or ``None`` when every text is fine."""
        parts = []
        if self.empty:
            parts.append(
                f"{self.empty} of {self.texts} texts gave no token (e.g. {self.empty_example!r})"
            )
        if self.unlettered:
            parts.append(
                f"{self.unlettered} of {self.texts} have no letter or digit, so only their "
                f"punctuation is compared (e.g. {self.unlettered_example!r})"
            )
        if self.low:
            assert self.low_example_ratio is not None
            parts.append(
                f"{self.low} keep less than {self.threshold:.0%} of their letters and digits "
                f"(e.g. {self.low_example!r} keeps {self.low_example_ratio:.0%})"
            )
        if not parts:
            return None
        return (
            f"tokenizer {self.tokenizer}: " + "; ".join(parts)
            + ": their text metrics score only what the tokens kept"
        )


def _excerpt(text: str, size: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 1] + "…"


def audit_tokens(
    texts: Iterable[str], choice: TokenizerChoice, *, threshold: float = COVERAGE_THRESHOLD
) -> TokenAudit:
    """Check what ``choice``'s tokenizer makes of ``texts`` (a run's answers and
    references): count the texts that give no token, those that give tokens but have
    no letter or digit, and, when ``choice.checks_coverage``, those whose tokens keep
    less than ``threshold`` of their letters and digits (:func:`letter_coverage`).

    Blank texts are skipped and each distinct text counts once. The built-in tokenizers
    keep every letter and digit, so a text that has one is neither empty nor unlettered
    and is not tokenized again here; other texts, and every text of a custom tokenizer,
    are tokenized through the same memo as :func:`~pytest_ragev.metrics.score`. Raises
    ``TypeError`` as ``score`` does when a custom tokenizer returns the wrong shape.
    """
    segment = segmenter(choice.tokenizer)
    seen: set[str] = set()
    count = empty = low = unlettered = 0
    empty_example: str | None = None
    unlettered_example: str | None = None
    low_example: str | None = None
    low_ratio: float | None = None
    has_letter = _LETTER_OR_DIGIT.search
    for text in texts:
        if text in seen or not text or text.isspace():
            continue
        seen.add(text)
        count += 1
        if not choice.checks_coverage and has_letter(text) is not None:
            # A built-in tokenizer made a token of each letter and digit: nothing to
            # find, and a run's tens of thousands of answers are not segmented twice.
            continue
        sentences: Sequence[Sequence[str]] = segment(text)
        if not any(sentences):
            empty += 1
            if empty_example is None:
                empty_example = _excerpt(text)
            continue
        if has_letter(text) is None:
            unlettered += 1
            if unlettered_example is None:
                unlettered_example = _excerpt(text)
            continue
        if choice.checks_coverage:
            ratio = letter_coverage(text, sentences).ratio
            if ratio < threshold:
                low += 1
                if low_example is None:
                    low_example, low_ratio = _excerpt(text), ratio
    return TokenAudit(
        tokenizer=choice.identity,
        texts=count,
        empty=empty,
        empty_example=empty_example,
        low=low,
        low_example=low_example,
        low_example_ratio=low_ratio,
        threshold=threshold,
        unlettered=unlettered,
        unlettered_example=unlettered_example,
    )
