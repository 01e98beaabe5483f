"""The metric tokenizer: sentences of words in every script, with jieba for Chinese.

A text is split into sentences at every ``.`` and ``。`` (and the full stops of other
scripts: :data:`SENTENCE_ENDS`). Inside each sentence it is scanned left to right, and
every letter and digit of every script ends up in a token:

* a run of Han characters goes through ``jieba`` (precise mode, HMM on), as WeKnora does;
* a word of a script written with spaces (Latin with its diacritics, Cyrillic, Greek,
  Arabic, Hebrew, Devanagari, Hangul, ...) is one token: a run of letters and digits,
  with the combining marks inside it, NFKC-normalised; as in the original, the ASCII
  characters ``_ , ! ?`` belong to words, so ``Hello,`` is one token (a word is such a
  run, not a Unicode word boundary: ``l'hôtel`` is ``l ' hôtel`` as ``don't`` is
  ``don ' t``);
* Katakana runs (``コンピューター``) are one token each, NFKC-normalised;
* each letter of the other scripts written without spaces that jieba does not know
  (Hiragana, Thai, Lao, Khmer, Myanmar, Tai Tham, Javanese, Balinese, Yi, Bopomofo, ...:
  :data:`UNIT_RANGES`) is a token with the combining marks that follow it,
  NFC-normalised (NFKC would split the Thai and Lao vowel SARA AM in two);
* any other punctuation character is one token, as written;
* everything else is skipped: spaces, symbols (``$ + = |``, emoji) and stray marks.

For a text whose letters, digits and marks are all ASCII or Han these are exactly the
tokens of the original ``weknora`` rule, ``(\\p{Han}+)|([a-zA-Z0-9_.,!?]+)|(\\p{P})``
after splitting at ``。`` and ``.`` (the tests hold it to that).

jieba is imported and its dictionary loaded on the first Chinese text only, once
per process (:mod:`pytest_ragev.core.segment` holds the instance, which the knowledge
base's keyword retriever shares).
Segmentations are memoised, because comparison runs score the same reference answers
many times: the built-in tokenizers keep the last :data:`BUILTIN_MEMO_SIZE` distinct
texts of the process (least recently used forgotten first), a custom tokenizer passed
to ``score`` gets a memo of its own (up to :data:`MEMO_SIZE` texts) that lives as long
as that tokenizer object.
"""

from __future__ import annotations

import re
import threading
import types
import unicodedata
import weakref
from functools import lru_cache
from math import log
from sys import intern
from typing import TYPE_CHECKING, Any, Protocol

import regex

from pytest_ragev.core.segment import cache_dir, jieba_tokenizer

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "BUILTIN_MEMO_SIZE",
    "HIRAGANA_RANGES",
    "KANA_RANGES",
    "MEMO_SIZE",
    "SENTENCE_ENDS",
    "UNIT_RANGES",
    "UNIT_RANGES_SINCE_3",
    "LanguageTokenizer",
    "Tokenizer",
    "cache_dir",
    "clear_cache",
    "jieba_tokenizer",
    "normalise",
    "scan_pattern",
    "segmenter",
    "split_sentences",
    "tokenize",
    "word_class",
    "word_pattern",
    "words",
]

#: A text's sentences, each a tuple of tokens (the memoised, immutable form).
Sentences = tuple[tuple[str, ...], ...]

#: Distinct texts a custom tokenizer's memo keeps (it starts over when full). At ~40
#: words a text this is at most a few hundred MB: a custom tokenizer may be slow, and a
#: run's end checks what it made of every text (``audit_tokens``).
MEMO_SIZE = 1 << 18
#: Distinct texts the built-in tokenizers' memos keep, least recently used forgotten
#: first: the texts scored close together (an answer and its reference, the reference
#: again for each variant), some 30 MB at most. A run scores each answer once, so a
#: memo of every text would only grow (1.7 KB a question: 170 MB over 100,000).
BUILTIN_MEMO_SIZE = 1 << 14


class Tokenizer(Protocol):
    """Turns a text into sentences of tokens.

    Sentences matter for ``rougel`` in the ``weknora`` profile (summary-level LCS);
    every other metric reads the tokens of all sentences concatenated. A sentence
    without tokens may be left out: no metric can see the difference.
    """

    def __call__(self, text: str, /) -> list[list[str]]: ...


#: The characters that end a sentence: WeKnora's ``.`` and ``。``, and the full stops
#: of scripts that have their own (Armenian, Arabic/Urdu, Devanagari, Myanmar, Ethiopic,
#: Khmer), so that the weknora ROUGE-L sees the sentences of those texts too.
SENTENCE_ENDS = ".\u3002\u0589\u06d4\u0964\u0965\u104b\u1362\u17d4"

# Scripts are told apart by explicit code point ranges (their Unicode blocks), not by
# \p{Script} properties: a class with several property subtractions costs the scan
# twice as much per character, and using the same ranges on both sides keeps the
# partition exact (every letter is in exactly one class, so none can fall through).
#
# Which scripts are "written without spaces" is Unicode's line-breaking data (UAX #14):
# letters whose Line_Break class lets a line break between two of them with no space
# in between: SA (the South East Asian scripts), ID (ideographs and syllabaries) and
# AK/AS/AP (since Unicode 15.1: the Brahmic scripts written without spaces). Of those,
# Han goes through jieba, a Katakana run is one word, and Hangul (ID, but Korean puts
# spaces between words) and the full-width Latin letters (ID) are words; every other
# such letter is a unit of its own. tests/unit/metrics/test_scripts.py checks the
# ranges against the data.
#: Hiragana (and the historic kana of the supplement blocks).
HIRAGANA_RANGES = "\u3040-\u309f\U0001aff0-\U0001b16f"  # and Kana Ext-B .. Small Kana Ext
#: The scripts written without spaces that rules version 3 made units (version 2 read a
#: run of their letters as one word, so a sentence without spaces was one token).
UNIT_RANGES_SINCE_3 = (
    "\u1950-\u197f\u1980-\u19df"  # Tai Le, New Tai Lue (SA)
    "\u1a20-\u1aaf\uaa80-\uaadf\U00011700-\U0001174f"  # Tai Tham, Tai Viet, Ahom (SA)
    "\u1b00-\u1b7f\ua980-\ua9df"  # Balinese, Javanese (AK)
    "\u1bc0-\u1bff\uaa00-\uaa5f\U00011ee0-\U00011eff"  # Batak, Cham, Makasar (AS)
    "\U00011000-\U0001107f\U00011300-\U000113ff"  # Brahmi, Grantha, Tulu-Tigalari (AK)
    "\U00011900-\U0001195f\U00011f00-\U00011f5f"  # Dives Akuru, Kawi (AK)
    "\U00016100-\U0001613f"  # Gurung Khema (AK)
    "\u3100-\u312f\u31a0-\u31bf"  # Bopomofo and its extension (ID)
    "\ua000-\ua4cf"  # Yi Syllables and Radicals (ID)
    "\u3006\u3031-\u3034"  # 〆 and the vertical kana repeat marks (ID)
    "\U00017000-\U00018aff\U00018d00-\U00018dff"  # Tangut and its components (ID)
    "\U0001b170-\U0001b2ff"  # Nushu (ID)
)
#: The letters of scripts written without spaces that jieba does not segment: each is
#: a token with the marks that follow it. Hiragana, Thai, Lao, Khmer, Myanmar, and
#: :data:`UNIT_RANGES_SINCE_3`.
UNIT_RANGES = (
    HIRAGANA_RANGES
    + "\u0e00-\u0e7f\u0e80-\u0eff"  # Thai, Lao (SA)
    "\u1780-\u17ff\u19e0-\u19ff"  # Khmer, Khmer Symbols (SA)
    "\u1000-\u109f\ua9e0-\ua9ff\uaa60-\uaa7f\U000116d0-\U000116ff"  # Myanmar and extensions (SA)
    + UNIT_RANGES_SINCE_3
)
#: Katakana, Katakana Phonetic Extensions and the halfwidth forms (with the prolonged
#: sound mark ー and the halfwidth voiced marks): a run of their letters is one word.
KANA_RANGES = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
# Combining marks continue a word (accents, vowel signs, viramas, harakat), except the
# variation selectors, which only pick a glyph (after emoji and Han) and are dropped.
_MARKS = r"[\p{M}--[\ufe00-\ufe0f\U000e0100-\U000e01ef]]"
_JOINERS = "\u200c\u200d"  # ZWNJ/ZWJ: inside Persian and Indic words

# How the classes are written is a matter of speed: regex tries the members of a class
# one by one (a set of ranges is no bitmap), and every letter meets the classes of the
# scan. A subtraction tries all its ranges for every letter that is not in them: with
# the blocks of rules version 3, [\p{L}--[blocks]] made the scan of Russian text ~1.5x
# slower. So the word class is letters *within* the ranges outside the blocks (the
# first range, U+0000 to Thai, holds Latin, Greek, Cyrillic, Arabic, Hebrew and the
# Indic scripts: one try), and the no-space letters, tried first, are letters within
# a coarse cover of their blocks (a few ranges) and then within the blocks.


def _spans(ranges: str) -> list[tuple[int, int]]:
    """The ranges of ``ranges`` (the inside of a class: characters and ``first-last``),
    as ascending, merged code point spans."""
    spans: list[tuple[int, int]] = []
    for first, last in sorted((ord(first), ord(last or first)) for first, last
                              in regex.findall(r"(.)(?:-(.))?", ranges, flags=regex.S)):
        if spans and first <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], last))
        else:
            spans.append((first, last))
    return spans


def _class_body(spans: list[tuple[int, int]]) -> str:
    return "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in spans)


def _outside(ranges: str) -> str:
    """The code points outside ``ranges``, as the inside of a class."""
    outside: list[tuple[int, int]] = []
    start = 0
    for first, last in _spans(ranges):
        if first > start:
            outside.append((start, first - 1))
        start = last + 1
    if start <= 0x10FFFF:
        outside.append((start, 0x10FFFF))
    return _class_body(outside)


def _letters_of(ranges: str) -> str:
    """The class of the letters of ``ranges``: a letter, within the spans' cover by 4096
    code points (one range each), within the spans."""
    spans = _spans(ranges)
    cover: list[tuple[int, int]] = []
    for first, last in spans:
        if cover and first >> 12 <= (cover[-1][1] >> 12) + 1:
            cover[-1] = (cover[-1][0], last)
        else:
            cover.append((first, last))
    return rf"[\p{{L}}&&[{_class_body(cover)}]&&[{_class_body(spans)}]]"


_UNIT = _letters_of(UNIT_RANGES)
_KANA = _letters_of(KANA_RANGES)


@lru_cache(maxsize=8)
def word_class(excluded: str = "") -> str:
    """The inside of the regex class of the characters that start a word: letters and
    digits of the scripts written with spaces, plus ASCII ``_ , ! ?``; not Han, not the
    letters of :data:`UNIT_RANGES` and :data:`KANA_RANGES` (digits of every script but
    Han are word characters), nor those of the ``excluded`` ranges (a language
    tokenizer takes its script)."""
    outside = _outside(UNIT_RANGES + KANA_RANGES + excluded)
    return rf"_,!?[\p{{N}}--\p{{Han}}][[\p{{L}}&&[{outside}]]--\p{{Han}}]"


def word_pattern(start: str) -> str:
    """A word: a character of the class ``[start]``, then such characters and marks, a
    ZWNJ or ZWJ allowed between two of them."""
    more = rf"[[{start}]{_MARKS}]"
    return rf"[{start}]{more}*(?:[{_JOINERS}]+{more}+)*"


def scan_pattern(word: str, first: str = "") -> regex.Pattern[str]:
    """The scan of one text: ``first`` (a language tokenizer's run, optional), then Han
    runs, Katakana runs, no-space letters, words, sentence ends and punctuation, each
    in its own group, in that order of trial (the classes are disjoint, so the order
    changes nothing but the speed: each alternative is tried at the start of a token)."""
    head = f"({first})|" if first else ""
    return regex.compile(
        rf"{head}(\p{{Han}}+)|({_KANA}[{_KANA}{_MARKS}]*)|({_UNIT}{_MARKS}*)"
        rf"|({word_pattern(word)})|([{SENTENCE_ENDS}])|(\p{{P}})",
        regex.V1,
    )


_SCAN = scan_pattern(word_class())
_SENTENCE_END = regex.compile(f"[{SENTENCE_ENDS}]")

# Pure-ASCII texts (the common English case) take a bytes.translate + split path that
# does in C what the scan does: separators become spaces, "." a sentence break, and
# each punctuation character present is padded with spaces to stand alone.
_ASCII_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_,!?")
_SENTENCE_BREAK = "\x00"


def _ascii_tables() -> tuple[bytes, bytes]:
    """(byte map: separators to space, "." to the break; bytes that are not punctuation)."""
    mapping = bytearray(range(256))
    not_punctuation = bytearray()
    for code in range(256):
        char = chr(code)
        is_punctuation = (
            code < 128
            and char not in _ASCII_WORD_CHARS
            and char != "."
            and unicodedata.category(char).startswith("P")
        )
        if not is_punctuation:
            not_punctuation.append(code)
        if char == ".":
            mapping[code] = ord(_SENTENCE_BREAK)
        elif char not in _ASCII_WORD_CHARS and not is_punctuation:
            mapping[code] = ord(" ")
    return bytes(mapping), bytes(not_punctuation)


_ASCII_MAP, _NOT_ASCII_PUNCTUATION = _ascii_tables()

_segmenter: Callable[[str], Iterable[str]] | None = None
#: jieba's own Han character class (``jieba.re_han_default`` without its ASCII part).
_JIEBA_BLOCK = re.compile("[\u4e00-\u9fd5]+")


def split_sentences(text: str) -> list[str]:
    """Split at every character of :data:`SENTENCE_ENDS` (``.``, ``。``, ...), strip each
    piece, drop empty pieces."""
    return [piece for piece in (part.strip() for part in _SENTENCE_END.split(text)) if piece]


def _tokenize_ascii(text: str) -> Sentences:
    raw = text.encode("ascii")
    mapped = raw.translate(_ASCII_MAP)
    for code in set(raw.translate(None, _NOT_ASCII_PUNCTUATION)):
        char = bytes((code,))
        mapped = mapped.replace(char, b" " + char + b" ")
    pieces = mapped.decode("ascii").split(_SENTENCE_BREAK)
    # Interned tokens: a memo of many texts holds each distinct word once.
    return tuple(tokens for tokens in (tuple(map(intern, p.split())) for p in pieces) if tokens)


def _han_segmenter() -> Callable[[str], Iterable[str]]:
    """``run -> words`` equal to ``jieba_tokenizer().lcut(run, HMM=True)`` for a Han run.

    ``lcut`` first splits its input at jieba's own Han class ``[\u4e00-\u9fd5]`` and
    then segments each block with its DAG + HMM cutter; a run wholly inside that
    class is a single block, so it goes to the cutter directly. With jieba 0.42 that
    cutter is :func:`_cut_dag`, the same algorithm in one pass; other runs, or
    another jieba, use ``lcut`` itself.
    """
    global _segmenter
    if _segmenter is None:
        instance = jieba_tokenizer()
        lcut = instance.lcut
        dag_cut: Callable[[str], Iterable[str]] | None = None
        import jieba

        if getattr(jieba, "__version__", "") == "0.42.1":
            from jieba import finalseg

            hmm_cut = finalseg.cut

            def dag_cut(run: str) -> list[str]:
                return _cut_dag(instance, hmm_cut, run)

        whole_block = _JIEBA_BLOCK.fullmatch

        def segment(run: str) -> Iterable[str]:
            if dag_cut is not None and whole_block(run):
                return dag_cut(run)
            return lcut(run, HMM=True)  # type: ignore[no-any-return]

        _segmenter = segment
    return _segmenter


# _cut_dag and _flush follow the algorithm of jieba 0.42.1 (jieba/__init__.py,
# Tokenizer.get_DAG, calc and __cut_DAG), https://github.com/fxsjy/jieba, which is
# distributed under the MIT License, Copyright (c) 2013 Sun Junyi. The tests check
# that they segment exactly as jieba.lcut does.
def _cut_dag(instance: Any, hmm_cut: Callable[[str], Iterable[str]], sentence: str) -> list[str]:
    """jieba 0.42's ``Tokenizer.__cut_DAG`` (precise mode, HMM on), word for word.

    jieba builds a dict of candidate word ends per position (``get_DAG``), then picks
    the best route backwards with ``max`` over a generator of tuples (``calc``), then
    walks it, sending runs of unknown single characters to its HMM (``finalseg``).
    This does the first two in one backward loop without the intermediate dicts,
    lists, tuples and generators (about a third of jieba's time on short runs), with
    the same float expression ``log(freq) - logtotal + best[end + 1]`` in the same
    order and the same tie rule (``max`` of ``(value, end)``: the later end wins),
    then walks the route exactly as jieba does. Reads the instance's dictionary and
    total on every call, so words added to it count as they do for jieba.
    """
    instance.check_initialized()
    freq: dict[str, int] = instance.FREQ
    logtotal = log(instance.total)
    size = len(sentence)
    best_value = [0.0] * (size + 1)
    best_end = list(range(size))
    for start in range(size - 1, -1, -1):
        value: float | None = None
        end = start
        fragment = sentence[start]
        candidate = start
        while candidate < size and fragment in freq:
            count = freq[fragment]
            if count:
                candidate_value = log(count) - logtotal + best_value[candidate + 1]
                if value is None or candidate_value >= value:
                    value, end = candidate_value, candidate
            candidate += 1
            fragment = sentence[start : candidate + 1]
        if value is None:
            # No dictionary word starts here: the character alone, frequency "or 1".
            value = log(freq.get(sentence[start]) or 1) - logtotal + best_value[start + 1]
        best_value[start] = value
        best_end[start] = end

    words: list[str] = []
    append = words.append
    position = 0
    buffer = ""
    while position < size:
        stop = best_end[position] + 1
        word = sentence[position:stop]
        if stop - position == 1:
            buffer += word
        else:
            if buffer:
                _flush(buffer, freq, hmm_cut, words)
                buffer = ""
            append(word)
        position = stop
    if buffer:
        _flush(buffer, freq, hmm_cut, words)
    return words


def _flush(
    buffer: str, freq: dict[str, int], hmm_cut: Callable[[str], Iterable[str]], words: list[str]
) -> None:
    """jieba's handling of a run of single characters on the route."""
    if len(buffer) == 1:
        words.append(buffer)
    elif not freq.get(buffer):
        words.extend(hmm_cut(buffer))
    else:
        words.extend(buffer)


def normalise(token: str) -> list[str]:
    """A non-Han word as NFKC makes it (``ｶﾀｶﾅ`` -> ``カタカナ``, ``ﬁ`` -> ``fi``, ``２`` -> ``2``,
    a decomposed ``é`` composed); the few ligatures that NFKC spells as several words
    (``ﷺ``) give one token per word."""
    normalised = unicodedata.normalize("NFKC", token)
    if normalised == token:
        return [token]
    return normalised.split()


def _tokenize_unicode(text: str) -> Sentences:
    cut: Callable[[str], Iterable[str]] | None = None
    # Most texts are in NFKC already (Chinese text with full-width punctuation is not,
    # but its words are ASCII): then no word needs a look.
    in_nfkc = unicodedata.is_normalized("NFKC", text)
    sentences: list[tuple[str, ...]] = []
    current: list[str] = []
    for han, kana, unit, word, sentence_end, punctuation in _SCAN.findall(text):
        if han:
            if cut is None:
                cut = _han_segmenter()
            current.extend(cut(han))
        elif word:
            if in_nfkc or word.isascii():
                current.append(word)
            else:
                current.extend(normalise(word))
        elif sentence_end:
            if current:
                sentences.append(tuple(map(intern, current)))
                current = []
        elif punctuation:
            current.append(punctuation)
        elif kana:
            current.append(kana if in_nfkc else unicodedata.normalize("NFKC", kana))
        else:
            # NFC, not NFKC: NFKC splits Thai and Lao SARA AM (ำ, ຳ) into two characters.
            current.append(unit if in_nfkc else unicodedata.normalize("NFC", unit))
    if current:
        sentences.append(tuple(map(intern, current)))
    return tuple(sentences)


@lru_cache(maxsize=BUILTIN_MEMO_SIZE)
def _tokenize_cached(text: str) -> Sentences:
    if text.isascii():
        return _tokenize_ascii(text)
    return _tokenize_unicode(text)


def tokenize_tuples(text: str) -> Sentences:
    """:func:`tokenize` in its memoised, immutable form (what the metric engine reads)."""
    return _tokenize_cached(text)


def tokenize(text: str) -> list[list[str]]:
    """The spec tokenizer: ``text``'s sentences, each a list of tokens.

    Sentences without any token are left out. This is the default
    :class:`Tokenizer` of :func:`pytest_ragev.metrics.score`.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize() expects a str, got {type(text).__name__}")
    return [list(sentence) for sentence in _tokenize_cached(text)]


def words(text: str) -> list[str]:
    """The metric tokens of ``text``, all sentences concatenated (no sentence marks):
    what BLEU and ROUGE-N read, and what the cross-checks hand to rouge-score and NLTK."""
    if not isinstance(text, str):
        raise TypeError(f"words() expects a str, got {type(text).__name__}")
    return [token for sentence in _tokenize_cached(text) for token in sentence]


class LanguageTokenizer:
    """The built-in rules with the runs of one language's script handed to an analyser.

    ``run`` is the regex of such a run (tried before every other alternative, so the
    word class must leave its letters out: see :func:`word_class`); each run is
    NFKC-normalised and ``analyse`` turns it into words. Everything else, sentence
    ends and punctuation included, follows :func:`tokenize`. Calls are memoised like
    the built-in tokenizer's (:data:`BUILTIN_MEMO_SIZE` texts, least recently used
    forgotten first) and serialised with a lock: analysers hold state per instance.
    """

    def __init__(
        self, name: str, run: str, word: str, analyse: Callable[[str], Iterable[str]]
    ) -> None:
        self.name = name
        self._scan = scan_pattern(word, run)
        self._analyse = analyse
        self._lock = threading.Lock()
        #: :meth:`__call__` in its memoised, immutable form (what the engine reads).
        self.tuples: Callable[[str], Sentences] = lru_cache(maxsize=BUILTIN_MEMO_SIZE)(
            self._tokenize)
        with _language_lock:
            _language_tokenizers.add(self)

    def __repr__(self) -> str:
        return f"<pytest_ragev {self.name} tokenizer>"

    def __call__(self, text: str, /) -> list[list[str]]:
        """``text``'s sentences, each a list of tokens (sentences without one left out)."""
        if not isinstance(text, str):
            raise TypeError(f"the {self.name} tokenizer expects a str, got {type(text).__name__}")
        return [list(sentence) for sentence in self.tuples(text)]

    def _tokenize(self, text: str) -> Sentences:
        cut: Callable[[str], Iterable[str]] | None = None
        in_nfkc = unicodedata.is_normalized("NFKC", text)
        sentences: list[tuple[str, ...]] = []
        current: list[str] = []
        for run, han, kana, unit, word, sentence_end, punctuation in self._scan.findall(text):
            if run:
                if not in_nfkc:
                    run = unicodedata.normalize("NFKC", run)
                with self._lock:
                    current.extend(self._analyse(run))
            elif han:
                if cut is None:
                    cut = _han_segmenter()
                current.extend(cut(han))
            elif word:
                if in_nfkc or word.isascii():
                    current.append(word)
                else:
                    current.extend(normalise(word))
            elif sentence_end:
                if current:
                    sentences.append(tuple(map(intern, current)))
                    current = []
            elif punctuation:
                current.append(punctuation)
            elif kana:
                current.append(kana if in_nfkc else unicodedata.normalize("NFKC", kana))
            else:
                # NFC, not NFKC: NFKC splits Thai and Lao SARA AM (ำ, ຳ) into two characters.
                current.append(unit if in_nfkc else unicodedata.normalize("NFC", unit))
        if current:
            sentences.append(tuple(map(intern, current)))
        return tuple(sentences)

    def cache_clear(self) -> None:
        """Forget this tokenizer's memoised segmentations."""
        cache_clear = getattr(self.tuples, "cache_clear", None)
        if cache_clear is not None:
            cache_clear()


_language_tokenizers: weakref.WeakSet[LanguageTokenizer] = weakref.WeakSet()
_language_lock = threading.Lock()


# Memos of custom tokenizers, keyed by the identity of the tokenizer's owner (the
# callable itself, or a bound method's instance) and then by the function (None for
# the callable itself); an entry goes when its owner is garbage-collected.
_custom_memos: dict[int, dict[object, dict[str, Sentences]]] = {}
_custom_memos_lock = threading.Lock()


def custom_memo(tokenizer: object) -> dict[str, Sentences]:
    """The memo ``text -> sentences`` of a custom ``tokenizer``, shared across calls.

    It lives as long as the tokenizer object (for a bound method: its instance, so
    ``score(..., tokenizer=obj.cut)`` twice shares one memo). A callable that takes no
    weak reference (e.g. a builtin function) gets a fresh memo each time.
    """
    owner: object = tokenizer
    function: object = None
    if isinstance(tokenizer, types.MethodType):
        owner, function = tokenizer.__self__, tokenizer.__func__
    key = id(owner)
    with _custom_memos_lock:
        per_owner = _custom_memos.get(key)
        if per_owner is None:
            try:
                weakref.finalize(owner, _custom_memos.pop, key, None)
            except TypeError:  # no weak references: no way to see it go
                return {}
            per_owner = _custom_memos[key] = {}
        memo = per_owner.get(function)
        if memo is None or len(memo) >= MEMO_SIZE:
            memo = per_owner[function] = {}
        return memo


def segmenter(tokenizer: Tokenizer | None) -> Callable[[str], Sentences]:
    """``text -> sentences`` (memoised, immutable) for ``tokenizer``: the built-in ones
    (``None`` or :func:`tokenize`, and the ``ja``/``ko`` tokenizers) go straight to
    their own memo; any other callable is checked and memoised by :func:`_checked_tokenizer`."""
    if tokenizer is None or tokenizer is tokenize:
        return tokenize_tuples
    if isinstance(tokenizer, LanguageTokenizer):
        return tokenizer.tuples
    return _checked_tokenizer(tokenizer)


def _checked_tokenizer(tokenizer: Tokenizer) -> Callable[[str], Sentences]:
    """Wrap a custom tokenizer: memoise (across calls, while the tokenizer object lives),
    check and freeze what it returns."""
    if not callable(tokenizer):
        raise TypeError(
            f"tokenizer: expected a callable text -> list of sentences of tokens, got "
            f"{type(tokenizer).__name__}"
        )
    memo = custom_memo(tokenizer)

    def segment(text: str) -> Sentences:
        cached = memo.get(text)
        if cached is not None:
            return cached
        result: Any = tokenizer(text)
        if not isinstance(result, list | tuple) or not all(
            isinstance(sentence, list | tuple) and all(type(t) is str for t in sentence)
            for sentence in result
        ):
            raise TypeError(
                f"tokenizer: must return a list of sentences, each a list of str tokens; "
                f"for {text[:40]!r} it returned {type(result).__name__} {result!r:.60}"
            )
        frozen = tuple(tuple(sentence) for sentence in result if sentence)
        memo[text] = frozen
        return frozen

    return segment


def clear_cache() -> None:
    """Forget the memoised segmentations: built-in, language (``ja``, ``ko``) and custom
    tokenizers' (jieba and the analysers stay loaded)."""
    _tokenize_cached.cache_clear()
    with _language_lock:
        language = list(_language_tokenizers)
    for tokenizer in language:
        tokenizer.cache_clear()
    with _custom_memos_lock:
        for per_owner in _custom_memos.values():
            per_owner.clear()
