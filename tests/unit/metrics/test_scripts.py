"""The default tokenizer on every script: properties over generated Unicode text.

* no letter or digit is lost;
* identical texts score 1.0 on every text metric (BLEU-n when there are >= n tokens);
* removing any word lowers ROUGE-1 below 1.0;
* texts whose letters, digits and marks are all ASCII or Han get exactly the tokens of
  the original weknora rule (written out here from its definition).
"""

from __future__ import annotations

import unicodedata
from collections import Counter

import pytest
import regex
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pytest_ragev import GENERATION_METRICS, MetricInput, score
from pytest_ragev.metrics import (
    jieba_tokenizer,
    letter_coverage,
    tokenize,
    words,
)
from pytest_ragev.metrics.text import (
    KANA_RANGES,
    SENTENCE_ENDS,
    UNIT_RANGES,
)
from pytest_ragev.metrics.tokenizers import HANGUL_RANGES

PROFILES = ("weknora", "standard")
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Letters, digits, marks, punctuation, symbols and spaces of every script, plus
# characters picked from the scripts with their own rules and the usual separators.
_ANY = st.characters(
    categories=["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd",
                "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs"],
    exclude_characters="\x00",
)  # fmt: skip
_PICKED = st.sampled_from(
    list("aZé9_,!?.。 计算机天气あいうアイウーｶﾞภาษาไทยລາວខ្មែរမြန်한국어ЖжΩω"
         "اللغة हिन्दी१२۳‍‌ﬁ²①ﷺ\u0301\u3099😀👍🏽$€—、，：「」")
)  # fmt: skip
unicode_texts = st.lists(_ANY | _PICKED, max_size=40).map("".join)


def _letters(text: str) -> Counter[str]:
    return Counter(c for c in text if unicodedata.category(c)[0] in "LN")


@PROPERTY
@given(unicode_texts)
@example("für café naïve straße")
@example("Привет, мир! ภาษาไทย ខ្មែរ")
def test_no_letter_or_digit_is_lost(text: str) -> None:
    # In NFKC text every token is a piece of the text as written (NFKC changes nothing),
    # so the letters can be counted plainly: each one must be in some token.
    normalised = unicodedata.normalize("NFKC", text)
    tokens = words(normalised)
    assert _letters(normalised) <= _letters("".join(tokens)), tokens
    # Any text, normalised or not: the coverage measure (after NFKD and case folding).
    coverage = letter_coverage(text, tokenize(text))
    assert coverage.kept == coverage.letters, (text, tokenize(text))


def test_the_letters_survive_normalisation_as_their_nfkc_forms() -> None:
    # Decomposed accents and halfwidth kana are composed; ligatures and full-width
    # digits become their plain letters; nothing is dropped.
    assert words("cafe\u0301 ｶﾞｲﾄﾞ ﬁnal ２０２４") == ["café", "ガイド", "final", "2024"]
    assert words("か\u3099") == ["が"]


def _token_count(text: str) -> int:
    return len(words(text))


@PROPERTY
@given(unicode_texts, st.sampled_from(PROFILES))
def test_identical_texts_score_one(text: str, profile: str) -> None:
    count = _token_count(text)
    assume(count > 0)
    row = score([MetricInput([], [], text, text)], profile=profile, metrics=GENERATION_METRICS)[0]
    # weknora's F1 adds 1e-8 to the denominator: a perfect match is 0.999999995.
    perfect = pytest.approx(1.0, abs=1e-7)
    assert row["rouge1"] == perfect
    assert row["rougel"] == perfect
    assert row["bleu1"] == perfect
    if count >= 2:
        assert row["bleu2"] == perfect
        assert row["rouge2"] == perfect
    if count >= 4:
        assert row["bleu4"] == perfect


# Text as words between spaces, so that "a word" is something a user can delete.
_WORD = st.lists(_ANY | _PICKED, min_size=1, max_size=8).map("".join).filter(
    lambda piece: not any(c.isspace() for c in piece)
)
word_texts = st.lists(_WORD, min_size=1, max_size=12)


@PROPERTY
@given(word_texts, st.data())
@example(["Это", "ответ", "про", "Debian,", "пакеты", "и", "репозитории."], None)
def test_removing_a_word_lowers_rouge1(pieces: list[str], data: st.DataObject | None) -> None:
    reference = " ".join(pieces)
    # A word with a letter or digit: what a deletion must be seen to remove.
    candidates = [i for i, piece in enumerate(pieces) if _letters(piece)]
    assume(candidates)
    index = candidates[0] if data is None else data.draw(st.sampled_from(candidates))
    shorter = " ".join(pieces[:index] + pieces[index + 1 :])
    standard = score([MetricInput([], [], shorter, reference)], profile="standard",
                     metrics=["rouge1"])[0]["rouge1"]  # fmt: skip
    assert standard < 1.0
    # weknora counts distinct words: the deletion shows when it removes a word that
    # occurs nowhere else in the text.
    removed = Counter(words(reference)) - Counter(words(shorter))
    if any(token not in words(shorter) for token in removed):
        weknora = score([MetricInput([], [], shorter, reference)],
                        metrics=["rouge1"])[0]["rouge1"]  # fmt: skip
        assert weknora < 1.0 - 1e-7


# The original weknora rule, from its definition: split at every "。" or ".", strip,
# drop empty pieces; in each, (\p{Han}+) -> jieba precise mode with HMM,
# ([a-zA-Z0-9_.,!?]+) -> one token, (\p{P}) -> one token, everything else skipped.
_ORIGINAL = regex.compile(r"(\p{Han}+)|([a-zA-Z0-9_.,!?]+)|(\p{P})")


def _original_tokens(text: str) -> list[list[str]]:
    sentences = []
    for piece in regex.split(r"[。.]", text):
        piece = piece.strip()
        if not piece:
            continue
        tokens: list[str] = []
        for han, word, punctuation in _ORIGINAL.findall(piece):
            if han:
                tokens.extend(jieba_tokenizer().lcut(han, HMM=True))
            else:
                tokens.append(word or punctuation)
        if tokens:
            sentences.append(tokens)
    return sentences


# ASCII, Han, and every punctuation, symbol and space character (not the full stops of
# the other scripts, which now end sentences): no letter, digit or mark outside ASCII/Han.
_PARITY = st.characters(max_codepoint=127) | st.characters(
    categories=["Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs"],
    exclude_characters=SENTENCE_ENDS,
) | st.sampled_from(list("计算机的操作系统有和我们今天天气很好〇㐀𠀀⺀、，。：！？「」"))  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PARITY, max_size=50).map("".join))
@example("计算机的操作系统有 UNIX、Linux、FreeBSD、Mac OS 和 DOS。")
@example("你好，世界！用Python写。再见")
def test_ascii_and_han_texts_keep_the_original_tokens(text: str) -> None:
    assert tokenize(text) == _original_tokens(text)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        # German: umlauts and ß stay inside their words (the original cut "für" into "f", "r").
        ("Für die Größe gilt: äußerst groß.", [["Für", "die", "Größe", "gilt", ":", "äußerst", "groß"]]),
        # Russian: Cyrillic words, with the ASCII , ! ? that belong to words as in English.
        ("Привет, мир! Как дела?", [["Привет,", "мир!", "Как", "дела?"]]),
        # Arabic: words with their harakat; Arabic comma and question mark are punctuation.
        ("مَرحبًا بالعالم، كيف حالك؟", [["مَرحبًا", "بالعالم", "،", "كيف", "حالك", "؟"]]),
        # Hindi: vowel signs and viramas inside words; the danda ends a sentence.
        ("हिन्दी एक भाषा है। यह दूसरा वाक्य है।", [["हिन्दी", "एक", "भाषा", "है"], ["यह", "दूसरा", "वाक्य", "है"]]),
        # Korean: space-separated words (eojeol) are tokens.
        ("한국어를 배우고 있습니다.", [["한국어를", "배우고", "있습니다"]]),
        # Japanese: Han through jieba, Hiragana per letter, a Katakana run one token.
        ("コンピューターを使う。", [["コンピューター", "を", "使", "う"]]),
        # Thai: each letter with its marks.
        ("ภาษาไทย", [["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]]),
        ("น้ำ", [["น้", "ำ"]]),
        # Emoji and other symbols are skipped, as before; variation selectors too.
        ("ok 👍🏽 ✔️ 100%", [["ok", "100", "%"]]),
        # Digits of other scripts are digits.
        ("١٢٣ ๑๒๓ १२३", [["١٢٣", "๑๒๓", "१२३"]]),
    ],
)
def test_word_rules_of_other_scripts(text: str, tokens: list[list[str]]) -> None:
    assert tokenize(text) == tokens


# Scripts written without spaces: one token per letter (with the marks that follow it),
# not one token per run of letters. Rules version 3 added the scripts after Myanmar.
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        # Javanese: the first line of the hanacaraka poem ("ha na ca ra ka, da ta sa wa la").
        ("ꦲꦤꦕꦫꦏ ꦢꦠꦱꦮꦭ", ["ꦲ", "ꦤ", "ꦕ", "ꦫ", "ꦏ", "ꦢ", "ꦠ", "ꦱ", "ꦮ", "ꦭ"]),
        # Balinese: "basa Bali" (the Balinese language), the vowel sign ulu with its letter.
        ("ᬩᬲᬩᬮᬶ", ["ᬩ", "ᬲ", "ᬩ", "ᬮᬶ"]),
        # Yi (Nuosu): "ꆈꌠꁱꂷ", the Yi script.
        ("ꆈꌠꁱꂷ", ["ꆈ", "ꌠ", "ꁱ", "ꂷ"]),
        # Tai Tham: "akkhara dhamma", the sakot (subjoiner) stays with its letter.
        ("ᩋᨠ᩠ᨡᩁᨵᨾ᩠ᨾ", ["ᩋ", "ᨠ᩠", "ᨡ", "ᩁ", "ᨵ", "ᨾ᩠", "ᨾ"]),
        # Bopomofo: 注音符號 in zhuyin; the tone marks are modifier letters, tokens of their own.
        ("ㄓㄨˋ ㄧㄣ ㄈㄨˊ ㄏㄠˋ", ["ㄓ", "ㄨ", "ˋ", "ㄧ", "ㄣ", "ㄈ", "ㄨ", "ˊ", "ㄏ", "ㄠ", "ˋ"]),
        # A Javanese sentence beside Latin words: the words stay words.
        ("Aksara ꦗꦮ (Jawa)", ["Aksara", "ꦗ", "ꦮ", "(", "Jawa", ")"]),
    ],
)
def test_scripts_written_without_spaces_are_split_into_letters(
    text: str, tokens: list[str]
) -> None:
    assert words(text) == tokens


def test_a_lost_letter_of_a_no_space_script_lowers_rouge1() -> None:
    # Version 2 read each of these runs as one word: one letter changed anywhere scored
    # like a wholly different answer (ROUGE-1 0). Per letter, most of the answer matches.
    for reference, answer in [("ꦲꦤꦕꦫꦏꦢꦠꦱꦮꦭ", "ꦲꦤꦕꦫꦏꦢꦠꦱꦮ"), ("ꆈꌠꁱꂷ", "ꆈꌠꁱ")]:
        row = score([MetricInput([], [], answer, reference)], metrics=["rouge1"])[0]
        assert 0.8 < row["rouge1"] < 1.0 - 1e-7


#: Line_Break classes of letters that break without a space (UAX #14): South East Asian,
#: ideographic, and the Brahmic aksara classes of Unicode 15.1.
_NO_SPACE = regex.compile(r"[\p{L}&&[\p{lb=SA}\p{lb=ID}\p{lb=CJ}\p{lb=AK}\p{lb=AS}\p{lb=AP}]]",
                       regex.V1)
#: Written without spaces but not units: Han (jieba), Katakana (runs) and the halfwidth
#: and fullwidth forms (NFKC makes them Katakana, Latin or Hangul); and Hangul (ID, but
#: Korean puts spaces between words).
_OTHER_RULE = regex.compile(
    rf"[\p{{Han}}{KANA_RANGES}{HANGUL_RANGES}\uff00-\uffef]", regex.V1
)


def test_the_units_follow_unicode_line_breaking_data() -> None:
    # Every letter Unicode says breaks without a space (of the Unicode version Python's
    # unicodedata knows: a newer Python may bring a new script, which then needs a
    # place in UNIT_RANGES and a version step of the rules) is a unit...
    missing = [
        f"U+{code:04X}" for code in range(0x110000)
        if unicodedata.category(chr(code)) != "Cn" and _NO_SPACE.match(chr(code))
        and not _OTHER_RULE.match(chr(code)) and len(words(chr(code) * 2)) != 2
    ]
    assert not missing, missing[:20]
    # ... and every block of UNIT_RANGES with letters holds such letters (a block may
    # hold a few letters of other classes, e.g. the Hiragana iteration mark, class NS;
    # Khmer Symbols has none).
    blocks = [range(ord(first), ord(last or first) + 1)
              for first, last in regex.findall(r"(.)(?:-(.))?", UNIT_RANGES)]
    letter = regex.compile(r"\p{L}")
    spaced = [f"U+{block[0]:04X}" for block in blocks
              if any(letter.match(chr(c)) for c in block)
              and not any(_NO_SPACE.match(chr(c)) for c in block)]
    assert not spaced, spaced
