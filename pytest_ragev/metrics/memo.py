"""Keys for remembering the text metrics of a pair of texts across runs.

The six text metrics of an (answer, reference) pair are a function of the two texts, the
profile, the tokenizer and the code that computes them. A key here is a sha256 over all
of these: the texts themselves, the profile name, the tokenizer's identity (its rules
and the versions of every library and dictionary it uses, see
:class:`~pytest_ragev.metrics.tokenizers.TokenizerChoice`), and a digest of this
package's source and of the jieba loader's (:func:`code_digest`), with pytest-ragev's
version. What a key cannot cover is said where keys are made
(``evaluation.TextScoreMemo``): a custom tokenizer, and a jieba dictionary changed while
the process runs.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from pytest_ragev.core.digest import update_with_sources
from pytest_ragev.core.version import __version__

__all__ = ["code_digest", "pair_key", "scores_context"]

_TAG = b"pytest-ragev text scores v1\0"


@functools.lru_cache(maxsize=1)
def code_digest() -> bytes:
    """sha256 of the text metrics' source: every module of ``pytest_ragev.metrics`` and
    ``core/segment.py`` (which loads jieba), with pytest-ragev's version; computed once per
    process. Editing any of them, or upgrading, gives every key a new value."""
    digest = hashlib.sha256(_TAG + __version__.encode() + b"\0")
    update_with_sources(digest, Path(__file__).resolve().parents[1],
                        ("metrics/**/*.py", "core/segment.py"))
    return digest.digest()


def scores_context(profile: str, tokenizer_identity: str) -> bytes:
    """The part of every key that is not the texts: profile, tokenizer, code."""
    digest = hashlib.sha256(_TAG + code_digest())
    for part in (profile, tokenizer_identity):
        encoded = part.encode("utf-8")
        digest.update(b"%d\0" % len(encoded) + encoded)
    return digest.digest()


def pair_key(context: bytes, hypothesis: str, reference: str) -> bytes:
    """The 32-byte key of the pair's six metrics under ``context``."""
    digest = hashlib.sha256(context)
    for text in (hypothesis, reference):
        # surrogatepass: any Python str has one encoding here (the loader refuses lone
        # surrogates in datasets, but an answer is whatever a pipeline returned).
        encoded = text.encode("utf-8", "surrogatepass")
        digest.update(b"%d\0" % len(encoded) + encoded)
    return digest.digest()
