"""How keyword retrieval turns text into terms: ``[pipeline] analyzer`` and ``language``.

- ``"plain"``: the retrieval tokens of :func:`.tokens.bm25_tokens` as they are: jieba
  words for Han text, NFKC-normalised, case-folded runs of letters and digits otherwise.
- ``"snowball"``: the same tokens, the stop words of ``language`` dropped and every other
  token reduced to its Snowball stem (``installing``, ``installed`` -> ``instal``),
  through PyStemmer (the Snowball project's own C stemmers). Han words pass unchanged
  (no stemmer touches them) and scripts a stemmer does not know pass through it as they
  are, so a Russian text's English commands keep their spelling.
- ``"auto"``: as ``"snowball"``, with the language told per text (each chunk, each
  question) by its stop words: the language whose Snowball stop list holds the most of
  the text's tokens (at least :data:`MIN_STOP_HITS`; ties go to the earlier language of
  :data:`DETECTION_ORDER`). A text that shows none (a heading such as "Maintainers", a
  Chinese passage, a command) is analysed in ``language`` when set, else in the corpus's
  language (:func:`corpus_language`: the one most of its chunks show), else as
  ``"plain"``: a question must get the terms of the chunks it is to match.

The stop lists are the Snowball project's (:mod:`.stopwords`, 16 languages); a language
with a stemmer but no list (Greek, Arabic, Turkish, ...) is stemmed without stop words,
and ``"auto"`` cannot tell it (set ``language``). An analyzer is part of the knowledge
base's identity (:meth:`Analyzer.identity`: name, language and the stemmer's version),
so changing it rebuilds the index, and of the report's and the baseline's settings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.pipelines.builtin.stopwords import STOPWORDS
from pytest_ragev.pipelines.builtin.tokens import bm25_tokens

ANALYZERS = ("plain", "snowball", "auto")
#: ISO 639-1 codes of the Snowball stemmers, as ``language`` takes them (the Snowball
#: names, ``"german"``, are accepted too).
LANGUAGE_CODES: Mapping[str, str] = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech",
    "da": "danish", "nl": "dutch", "en": "english", "eo": "esperanto", "et": "estonian",
    "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian",
    "ne": "nepali", "no": "norwegian", "fa": "persian", "pl": "polish", "pt": "portuguese",
    "ro": "romanian", "ru": "russian", "sr": "serbian", "st": "sesotho", "es": "spanish",
    "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}
#: The languages ``"auto"`` can tell (those with a stop list), most widely used first:
#: a tie between two lists goes to the earlier one.
DETECTION_ORDER = ("english", "german", "french", "spanish", "russian", "portuguese",
                   "italian", "dutch", "swedish", "norwegian", "danish", "finnish",
                   "hungarian", "indonesian", "irish", "sesotho")
#: A text is told a language only when at least this many of its tokens are its stop words
#: (one is not enough: a Chinese passage quoting ``a.out`` or ``e.g.`` would be told Italian).
MIN_STOP_HITS = 2
#: At most this many chunks, evenly spread, tell the corpus's language.
CORPUS_SAMPLE = 2000
#: The package of the stemmers: looked up when a ``"snowball"``/``"auto"`` analyzer is made.
_STEMMER_MODULE = "Stemmer"
STEMMER_INSTALL = "pip install PyStemmer"

#: Token -> the languages whose stop list holds it, in :data:`DETECTION_ORDER`.
_STOP_LANGUAGES: dict[str, tuple[str, ...]] = {}
for _language in DETECTION_ORDER:
    for _word in STOPWORDS[_language]:
        _STOP_LANGUAGES[_word] = (*_STOP_LANGUAGES.get(_word, ()), _language)


def resolve_language(value: str) -> str | None:
    """The Snowball name of ``value`` (an ISO code or a Snowball name), or ``None``."""
    text = value.strip().lower()
    if text in LANGUAGE_CODES:
        return LANGUAGE_CODES[text]
    return text if text in LANGUAGE_CODES.values() else None


def language_choices() -> str:
    """The codes ``language`` takes, for an error message."""
    return ", ".join(sorted(LANGUAGE_CODES))


def detect_language(tokens: list[str]) -> str | None:
    """The language whose stop list holds most of ``tokens`` (see the module doc), or ``None``."""
    hits: dict[str, int] = {}
    for token in tokens:
        for language in _STOP_LANGUAGES.get(token, ()):
            hits[language] = hits.get(language, 0) + 1
    if not hits:
        return None
    best = max(DETECTION_ORDER, key=lambda language: hits.get(language, 0))
    return best if hits.get(best, 0) >= MIN_STOP_HITS else None


def corpus_language(count: int, text: Callable[[int], str]) -> str | None:
    """The language most of ``count`` texts (a corpus's chunks; ``text(i)`` is the i-th)
    are told, sampling at most :data:`CORPUS_SAMPLE` of them evenly; ties go to the
    earlier of :data:`DETECTION_ORDER`; ``None`` when none is told one."""
    step = max(count / CORPUS_SAMPLE, 1.0)
    votes: dict[str, int] = {}
    position = 0.0
    while int(position) < count:
        language = detect_language(bm25_tokens(text(int(position))))
        if language is not None:
            votes[language] = votes.get(language, 0) + 1
        position += step
    if not votes:
        return None
    return max(DETECTION_ORDER, key=lambda language: votes.get(language, 0))


def _stemmer_module() -> Any:
    import importlib

    try:
        return importlib.import_module(_STEMMER_MODULE)
    except ImportError:
        return None


def stemmer_version() -> str:
    """The installed PyStemmer's version (``"-"`` when it is not installed)."""
    try:
        return metadata.version("PyStemmer")
    except metadata.PackageNotFoundError:
        return "-"


class Analyzer:
    """Text -> retrieval terms, by one of :data:`ANALYZERS`. Thread-safe (a stemmer per
    thread: PyStemmer's objects are not)."""

    def __init__(self, name: str = "plain", language: str | None = None) -> None:
        if name not in ANALYZERS:
            raise ValueError(f"unknown analyzer {name!r}")
        self.name = name
        #: The Snowball name of ``language`` (``None``: not set).
        self.language = resolve_language(language) if language is not None else None
        if language is not None and self.language is None:
            raise ValueError(f"unknown language {language!r}")
        self._module: Any = None
        if name != "plain":
            self._module = _stemmer_module()
            if self._module is None:
                raise ImportError(f"analyzer = {name!r} needs PyStemmer: {STEMMER_INSTALL}")
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Analyzer({self.name!r}, language={self.language!r})"

    def _stem(self, language: str) -> Callable[[list[str]], list[str]]:
        stemmers: dict[str, Any] | None = getattr(self._local, "stemmers", None)
        if stemmers is None:
            stemmers = self._local.stemmers = {}
        stemmer = stemmers.get(language)
        if stemmer is None:
            stemmer = stemmers[language] = self._module.Stemmer(language)
        words: Callable[[list[str]], list[str]] = stemmer.stemWords
        return words

    @property
    def reads_corpus_language(self) -> bool:
        """Whether texts that show no language fall back on the corpus's."""
        return self.name == "auto" and self.language is None

    def tokens(self, text: str, corpus: str | None = None) -> list[str]:
        """The retrieval terms of ``text``; ``corpus`` is the corpus's language (see
        :func:`corpus_language`), which ``"auto"`` falls back on when ``language`` is unset."""
        tokens = bm25_tokens(text)
        if self.name == "plain" or not tokens:
            return tokens
        language = self.language
        if self.name == "auto":
            language = detect_language(tokens) or self.language or corpus
        if language is None:
            return tokens
        stop = STOPWORDS.get(language)
        if stop is not None:
            if language == "russian":  # the list writes ё as е, as the stemmer reads it
                tokens = [t for t in tokens if t.replace("ё", "е") not in stop]
            else:
                tokens = [t for t in tokens if t not in stop]
        return self._stem(language)(tokens) if tokens else tokens



def check_analyzer(name: str, language: str | None, *, where: str) -> None:
    """A one-line :class:`ConfigError` unless ``name``/``language`` can be used here."""
    if name != "plain" and _stemmer_module() is None:
        raise ConfigError(f"{where} analyzer = {name!r} needs PyStemmer, which is not "
                          f"installed: {STEMMER_INSTALL} (or use analyzer = \"plain\")")
