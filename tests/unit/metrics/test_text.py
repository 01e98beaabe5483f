"""The spec tokenizer: sentence splitting, word rules, jieba loading and memoisation."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.metrics import jieba_tokenizer, tokenize, words
from pytest_ragev.metrics.text import _han_segmenter, split_sentences, tokenize_tuples


def test_sentences_split_at_every_full_stop() -> None:
    assert split_sentences("A b. C d。E f") == ["A b", "C d", "E f"]
    assert split_sentences("  .. 。 a . ") == ["a"]
    assert split_sentences("") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, world!", [["Hello,", "world!"]]),  # ASCII word runs keep , ! ?
        ("why? x_1 42", [["why?", "x_1", "42"]]),
        ("a(b)c-d", [["a", "(", "b", ")", "c", "-", "d"]]),  # ASCII punctuation: one token each
        ("Wait: \"yes\"; 'no'", [["Wait", ":", '"', "yes", '"', ";", "'", "no", "'"]]),
        ("1 + 2 = $3 | ~x", [["1", "2", "3", "x"]]),  # symbols are skipped
        ("café naïve", [["café", "naïve"]]),  # letters of every script stay in their word
        ("« guillemets » — dash…", [["«", "guillemets", "»", "—", "dash", "…"]]),
        ("pi is 3.14", [["pi", "is", "3"], ["14"]]),  # "." always ends a sentence
        ("你好，世界！", [["你好", "，", "世界", "！"]]),
        ("用Python写。再见", [["用", "Python", "写"], ["再见"]]),
        ("😀 \t\n", []),
    ],
)
def test_word_rules(text: str, expected: list[list[str]]) -> None:
    assert tokenize(text) == expected
    assert words(text) == [token for sentence in expected for token in sentence]


def test_han_runs_go_through_jieba_precise_mode_with_hmm() -> None:
    segmenter = jieba_tokenizer()
    run = "我来到北京清华大学"
    assert words(run) == segmenter.lcut(run, HMM=True)
    assert words(run) == ["我", "来到", "北京", "清华大学"]


def test_each_text_is_segmented_once() -> None:
    text = "缓存测试：同一个参考答案只切分一次。"
    first = tokenize_tuples(text)
    assert tokenize_tuples(text) is first
    # The public forms are fresh lists, so callers cannot alter the memo.
    sentences = tokenize(text)
    sentences[0].append("x")
    assert tokenize(text) != sentences


def test_non_text_is_rejected() -> None:
    with pytest.raises(TypeError, match="tokenize\\(\\) expects a str, got int"):
        tokenize(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="words\\(\\) expects a str, got NoneType"):
        words(None)  # type: ignore[arg-type]


_HAN = st.text(
    alphabet=st.sampled_from(
        list("我来到北京清华大学今天天气很好的了是不一个人计算机操作系统〇㐀𠀀⺀")
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(_HAN)
def test_han_runs_segment_as_jieba_lcut(run: str) -> None:
    # The shortcut past lcut's own block splitting must not change a single word.
    expected = jieba_tokenizer().lcut(run, HMM=True)
    assert list(_han_segmenter()(run)) == expected


def _jieba_words() -> list[str]:
    import jieba

    dictionary = Path(jieba.__file__).with_name("dict.txt")
    with dictionary.open(encoding="utf-8") as handle:
        return [line.split()[0] for index, line in enumerate(handle) if index % 37 == 0]


_DICTIONARY_WORDS = _jieba_words()
_CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FD5)
# Runs of dictionary words (long words, overlapping candidates), rare characters
# (unknown runs for the HMM) and both mixed.
_MIXED_RUNS = st.lists(
    st.sampled_from(_DICTIONARY_WORDS) | _CJK | st.text(_CJK, min_size=2, max_size=4),
    min_size=1,
    max_size=25,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_MIXED_RUNS)
def test_the_one_pass_dag_cutter_segments_as_jieba_lcut(run: str) -> None:
    assert list(_han_segmenter()(run)) == jieba_tokenizer().lcut(run, HMM=True)


def test_the_dag_cutter_reads_the_dictionary_live(tmp_path: Path) -> None:
    import jieba
    from jieba import finalseg

    from pytest_ragev.metrics.text import _cut_dag

    # A private instance: words added here must not reach the shared one.
    instance = jieba.Tokenizer()
    instance.tmp_dir = str(tmp_path)
    instance.initialize()
    text = "蓝色大海豚游过清华大学"
    assert _cut_dag(instance, finalseg.cut, text) == instance.lcut(text, HMM=True)
    instance.add_word("蓝色大海豚", freq=10**7)
    instance.add_word("游过清", freq=10**8)
    cut = _cut_dag(instance, finalseg.cut, text)
    assert cut == instance.lcut(text, HMM=True)
    assert cut[:2] == ["蓝色大海豚", "游过清"]


def test_another_jieba_version_goes_through_lcut(monkeypatch: pytest.MonkeyPatch) -> None:
    import jieba

    from pytest_ragev.metrics import text

    calls: list[str] = []
    instance = jieba_tokenizer()
    original = instance.lcut

    def counting_lcut(run: str, HMM: bool = True) -> list[str]:
        calls.append(run)
        return original(run, HMM=HMM)  # type: ignore[no-any-return]

    monkeypatch.setattr(jieba, "__version__", "0.43.0")
    monkeypatch.setattr(instance, "lcut", counting_lcut)
    monkeypatch.setattr(text, "_segmenter", None)
    assert list(text._han_segmenter()("我来到北京清华大学")) == ["我", "来到", "北京", "清华大学"]
    assert calls == ["我来到北京清华大学"]
