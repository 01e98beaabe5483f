"""``letter_coverage`` and ``audit_tokens``: what a tokenizer keeps of the texts."""

from __future__ import annotations

import re

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.metrics import (
    LetterCoverage,
    audit_tokens,
    clear_cache,
    custom_tokenizer,
    letter_coverage,
    resolve_tokenizer,
    tokenize,
)
from pytest_ragev.metrics import text as built_in
from pytest_ragev.metrics.text import segmenter


def _ascii_words(text: str) -> list[list[str]]:
    """The kind of tokenizer the warning is for: it silently drops non-ASCII letters."""
    return [re.findall(r"[A-Za-z0-9]+", sentence) for sentence in text.split(".")]


@pytest.mark.parametrize(
    ("text", "sentences", "letters", "kept"),
    [
        ("Hello, world", [["Hello,", "world"]], 10, 10),
        ("Hello, world", [["hello", "WORLD"]], 10, 10),  # case folding keeps the letters
        ("Привет мир", [["мир"]], 9, 3),
        ("да нет", [["да", "да", "да"]], 5, 2),  # repeating a word makes up for nothing
        ("für", [["fur"]], 3, 3),  # ü is u + a mark: the letter is kept, the accent not counted
        ("ﬁne ２", [["fine", "2"]], 5, 5),  # NFKC forms count as the letters they spell
        ("한국", [["한"]], 6, 3),  # Hangul syllables count as their jamo
        ("👍 — !", [], 0, 0),  # no letter or digit: nothing to keep
        ("", [], 0, 0),
    ],
)
def test_letter_coverage(text: str, sentences: list[list[str]], letters: int, kept: int) -> None:
    coverage = letter_coverage(text, sentences)
    assert coverage == LetterCoverage(letters, kept)
    assert coverage.ratio == (kept / letters if letters else 1.0)


def test_the_default_tokenizer_keeps_every_letter_of_real_text() -> None:
    for text in [
        "Die Größe der Datei beträgt 3 MB.",
        "Размер файла — 3 МБ.",
        "ファイルのサイズは3MBです。",
        "파일 크기는 3MB입니다.",
        "حجم الملف ٣ ميغابايت.",
        "फ़ाइल का आकार 3 MB है।",
        "ขนาดไฟล์คือ 3 MB",
    ]:
        assert letter_coverage(text, tokenize(text)).ratio == 1.0, text


def test_an_audit_counts_empty_and_lossy_texts_once_with_an_example() -> None:
    choice = custom_tokenizer(_ascii_words, spec="hook")
    texts = [
        "Install the package with apt.",
        "Установите пакет командой apt install.",  # keeps "apt install" only
        "👍",  # no token at all
        "",  # blank: not looked at
        "   ",
        "Установите пакет командой apt install.",  # the same text again: counted once
        "Die Installation dauert etwa fünf Minuten.",  # only the ü is lost: 97%
        "Пакет",
    ]
    audit = audit_tokens(texts, choice)
    assert audit.texts == 5
    assert (audit.empty, audit.empty_example) == (2, "👍")  # "Пакет" gives no token either
    assert audit.low == 1
    assert audit.low_example == "Установите пакет командой apt install."
    assert audit.low_example_ratio == pytest.approx(10 / 33)
    line = audit.warning()
    assert line is not None and "\n" not in line
    assert line.startswith(f"tokenizer custom {__name__}:_ascii_words: 2 of 5 texts gave no token")
    assert "1 keep less than 90% of their letters and digits" in line
    assert "keeps 30%" in line


def test_the_built_in_tokenizers_are_checked_for_empty_texts_only() -> None:
    choice = resolve_tokenizer("default", source="ragev.toml")
    audit = audit_tokens(["Привет, мир!", "😀😀", "。。。", "ok"], choice)
    assert (audit.texts, audit.empty, audit.low) == (4, 2, 0)
    assert audit.empty_example == "😀😀"
    clean = audit_tokens(["Привет, мир!", "", "ok"], choice)
    assert clean.warning() is None


def test_an_example_is_shortened_to_one_line() -> None:
    long_text = "Первая строка ответа про apt\nи вторая строка, " * 5
    audit = audit_tokens([long_text], custom_tokenizer(_ascii_words, spec="hook"))
    assert audit.low_example is not None
    assert "\n" not in audit.low_example and len(audit.low_example) == 40
    assert audit.low_example.endswith("…")


def test_texts_without_a_letter_or_digit_are_counted_once_with_an_example() -> None:
    # "?" gives the token "?": against a reference "?" every text metric is 1.0, though
    # neither says anything. Counted apart from the texts that give no token at all.
    choice = resolve_tokenizer("default", source="ragev.toml")
    audit = audit_tokens(["?", "Das ist die Antwort.", "...!?", "👍", "?", "？", "Ответ: 42"],
                         choice)
    assert (audit.texts, audit.empty, audit.unlettered, audit.low) == (6, 1, 3, 0)
    assert audit.unlettered_example == "?"
    line = audit.warning()
    assert line is not None and "\n" not in line
    assert line.startswith(f"tokenizer {choice.identity}: 1 of 6 texts gave no token (e.g. '👍'); "
                           "3 of 6 have no letter or digit, so only their punctuation is "
                           "compared (e.g. '?')")
    # A digit or a letter of any script is enough.
    assert audit_tokens(["42!", "ж?", "ꆈ。"], choice).warning() is None


@pytest.mark.parametrize("spec", ["default", "ja", "ko"])
@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=24))
def test_a_built_in_tokenizer_makes_a_token_of_any_letter_or_digit(spec: str, text: str) -> None:
    # What lets an audit skip a text with a letter or digit: it cannot be empty.
    if regex.search(r"[\p{L}\p{N}]", text):
        assert any(segmenter(resolve_tokenizer(spec, source="ragev.toml").tokenizer)(text))


def test_an_audit_does_not_segment_texts_with_letters_again() -> None:
    # A run's end audits every answer it scored: tens of thousands of texts that the
    # built-in tokenizers keep whole need no second segmentation (nor a memo of them).
    clear_cache()
    choice = resolve_tokenizer("default", source="ragev.toml")
    texts = ["Die Antwort ist 42.", "答案是四十二。", "Ответ: сорок два", "!?", "😀"]
    audit = audit_tokens(texts, choice)
    assert (audit.texts, audit.empty, audit.unlettered) == (5, 1, 1)
    assert (audit.empty_example, audit.unlettered_example) == ("😀", "!?")
    assert tokenize_cache_size() == 2  # only the two texts without a letter or digit
    clear_cache()


def tokenize_cache_size() -> int:
    return built_in._tokenize_cached.cache_info().currsize
