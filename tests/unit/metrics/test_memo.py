"""Segmentation memos: the built-in LRU and the custom tokenizer's cross-call memo."""

from __future__ import annotations

import gc

import pytest

from pytest_ragev import MetricInput, score
from pytest_ragev.metrics import clear_cache, text

INPUTS = [MetricInput([], [], "a b c", "a b d"), MetricInput([], [], "a b c", "x y")]


class Splitter:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def cut(self, value: str) -> list[list[str]]:
        self.calls.append(value)
        return [value.split()]

    __call__ = cut


class NoWeakref:
    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, value: str) -> list[list[str]]:
        self.calls.append(value)
        return [value.split()]


def test_a_function_tokenizer_is_memoised_across_calls() -> None:
    calls: list[str] = []

    def split(value: str) -> list[list[str]]:
        calls.append(value)
        return [value.split()]

    first = score(INPUTS, tokenizer=split, metrics=["rouge1"])
    second = score(INPUTS, tokenizer=split, metrics=["rouge1"])
    assert first == second
    assert sorted(calls) == ["a b c", "a b d", "x y"]  # once each over both calls
    clear_cache()
    score(INPUTS[:1], tokenizer=split, metrics=["rouge1"])
    assert sorted(calls) == ["a b c", "a b c", "a b d", "a b d", "x y"]


def test_a_bound_method_shares_the_memo_of_its_instance_only() -> None:
    one, other = Splitter(), Splitter()
    score(INPUTS, tokenizer=one.cut, metrics=["rouge1"])
    score(INPUTS, tokenizer=one.cut, metrics=["rouge1"])  # a new bound-method object
    assert sorted(one.calls) == ["a b c", "a b d", "x y"]
    score(INPUTS, tokenizer=other.cut, metrics=["rouge1"])
    assert sorted(other.calls) == ["a b c", "a b d", "x y"]
    score(INPUTS, tokenizer=one, metrics=["rouge1"])  # the instance as a callable: own memo
    assert len(one.calls) == 6


def test_the_memo_goes_with_its_tokenizer() -> None:
    splitter = Splitter()
    score(INPUTS, tokenizer=splitter.cut, metrics=["rouge1"])
    key = id(splitter)
    assert key in text._custom_memos
    del splitter
    gc.collect()
    assert key not in text._custom_memos


def test_a_tokenizer_without_weak_references_is_memoised_per_call() -> None:
    tokenizer = NoWeakref()
    score(INPUTS, tokenizer=tokenizer, metrics=["rouge1"])
    assert sorted(tokenizer.calls) == ["a b c", "a b d", "x y"]
    score(INPUTS, tokenizer=tokenizer, metrics=["rouge1"])
    assert len(tokenizer.calls) == 6
    assert id(tokenizer) not in text._custom_memos


def test_a_full_memo_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text, "MEMO_SIZE", 3)
    splitter = Splitter()
    score(INPUTS, tokenizer=splitter, metrics=["rouge1"])  # fills it: 3 texts
    score(INPUTS, tokenizer=splitter, metrics=["rouge1"])
    assert len(splitter.calls) == 6
    assert len(text._custom_memos[id(splitter)][None]) == 3  # the callable itself


def test_the_built_in_memo_is_bounded() -> None:
    assert text._tokenize_cached.cache_info().maxsize == text.BUILTIN_MEMO_SIZE


def test_the_built_in_memo_keeps_what_is_scored_close_together_not_a_whole_run() -> None:
    # A run scores each answer once: a memo of every text of a 100,000-question run
    # held 170 MB to its end. The last BUILTIN_MEMO_SIZE texts are kept.
    clear_cache()
    answers = [f"Antwort {n}: 答案 {n}. Ответ {n}." for n in range(text.BUILTIN_MEMO_SIZE + 500)]
    score([MetricInput([], [], answer, "答案 7.") for answer in answers],
          metrics=["rouge1"])
    info = text._tokenize_cached.cache_info()
    assert info.currsize == text.BUILTIN_MEMO_SIZE
    assert text.tokenize_tuples(answers[-1]) is text.tokenize_tuples(answers[-1])
    clear_cache()
