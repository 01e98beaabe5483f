"""The tokenizer of keyword retrieval: jieba words for Han text, lowercased words otherwise.

This is deliberately not the metric tokenizer: retrieval wants case-folded words without
punctuation, the metrics want the text as written. Both segment Han text with the same
jieba instance (:func:`pytest_ragev.core.segment.jieba_tokenizer`: loaded once per process
on first use, under a lock, log quiet, dictionary cache in the user cache folder).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from pytest_ragev.core.segment import jieba_tokenizer

#: A tokenizer: text in, tokens out.
Tokenizer = Callable[[str], list[str]]

# CJK Unified Ideographs, Extension A, Compatibility Ideographs and Extensions B-F.
_HAN_RUN = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]+)")
# Letters and digits of any script; underscore and punctuation separate words.
_WORD = re.compile(r"[^\W_]+")
# The same on ASCII text, which NFKC leaves alone and where casefold is lower.
_ASCII_WORD = re.compile(r"[a-z0-9]+")

_lcut: Callable[..., list[str]] | None = None


def _jieba_lcut() -> Callable[..., list[str]]:
    """``lcut`` of the process-wide jieba instance (one dictionary load per process).

    ``jieba_tokenizer`` loads under its own lock; two threads racing here get the same
    bound method.
    """
    global _lcut
    if _lcut is None:
        instance: Any = jieba_tokenizer()
        _lcut = instance.lcut
    return _lcut


def bm25_tokens(text: str) -> list[str]:
    """Split ``text`` into retrieval tokens.

    Runs of Han characters go through ``jieba.lcut(run, HMM=True)``; everything else is
    NFKC-normalised, case-folded and split into runs of letters and digits. Punctuation
    and whitespace never become tokens.

    >>> bm25_tokens("BM25 Retrieval, 2024!")
    ['bm25', 'retrieval', '2024']
    """
    if text.isascii():
        # The common case, about three times faster: no Han run, nothing to normalise.
        return _ASCII_WORD.findall(text.lower())
    tokens: list[str] = []
    normalised = unicodedata.normalize("NFKC", text)
    for index, part in enumerate(_HAN_RUN.split(normalised)):
        if not part:
            continue
        if index % 2 == 1:
            # re.split with one group puts the Han runs at odd positions.
            tokens.extend(word for word in _jieba_lcut()(part, HMM=True) if word.strip())
        else:
            tokens.extend(_WORD.findall(part.casefold()))
    return tokens


def has_han(text: str) -> bool:
    """Whether ``text`` contains a Han character (decides jieba's use and sentence joins)."""
    return _HAN_RUN.search(text) is not None
