"""Slices (issue #31): each question's language and tags, and their means."""

from __future__ import annotations

import pytest

from pytest_ragev.core.results import RunResult
from pytest_ragev.core.types import QAPair
from pytest_ragev.evaluation.slices import (
    SliceThreshold,
    question_language,
    question_slices,
    resolve_slice,
    run_slices,
    slice_threshold_results,
)
from pytest_ragev.gate.thresholds import MinValue
from tests.unit.gate._runs import make_run


@pytest.mark.parametrize(("text", "code"), [
    ("What is the capital of France?", "en"),
    ("埃菲尔铁塔是什么时候建成的？", "zh"),
    ("東京タワーはいつ完成しましたか？", "ja"),  # Han between kana: Japanese
    ("에펠탑은 언제 완공되었나요?", "ko"),
    ("Когда была построена Эйфелева башня?", "ru"),
    ("Коли була збудована Ейфелева вежа? Її", "uk"),
    ("Wann wurde der Eiffelturm gebaut und wie hoch ist er?", "de"),
    ("Quand la tour Eiffel a-t-elle été construite et par qui?", "fr"),
    ("¿Cuándo se construyó la torre Eiffel y por qué?", "es"),
    ("Πότε χτίστηκε ο Πύργος του Άιφελ;", "el"),
    ("Python creator?", None),  # no stop word: the dataset decides
    ("12345 ???", None),
])
def test_a_question_s_language_by_its_script_then_its_stop_words(
    text: str, code: str | None
) -> None:
    assert question_language(text) == code


def test_a_lang_tag_wins_over_the_text() -> None:
    assert question_language("What is it?", ("lang:fr", "billing")) == "fr"


def _pair(qid: int, text: str, tags: tuple[str, ...] = ()) -> QAPair:
    return QAPair(qid=qid, question=text, pids=(qid,), passages=("p",), aid=qid,
                  answer="a", tags=tags)


def test_slices_of_a_bilingual_set_with_tags() -> None:
    pairs = [
        _pair(1, "Who wrote the book?", ("billing",)),
        _pair(2, "这本书是谁写的？", ("billing", "setup")),
        _pair(3, "Python creator?"),  # joins the set's most common language
        _pair(4, "How tall is the tower?", ("lang:de",)),  # a lang tag sets it, no tag slice
        _pair(5, "What is the price of it?"),
    ]
    slices = question_slices(pairs)
    assert slices == {
        1: ("lang:en", "tag:billing"),
        2: ("lang:zh", "tag:billing", "tag:setup"),
        3: ("lang:en",),
        4: ("lang:de",),
        5: ("lang:en",),
    }
    only_short = question_slices([_pair(1, "Python?"), _pair(2, "42")])
    assert only_short == {1: ("lang:en",), 2: ("lang:en",)}
    chinese_set = question_slices([_pair(1, "谁写的？"), _pair(2, "这本书？"), _pair(3, "GPU?")])
    assert chinese_set[3] == ("lang:zh",)


def _sliced_run() -> RunResult:
    from dataclasses import replace

    run = make_run({"recall": {q: (1.0 if q < 6 else 0.0) for q in range(10)},
                    "rougel": {q: 0.5 for q in range(10)}})
    keys = {q: ("lang:en" if q < 6 else "lang:zh", *(("tag:billing",) if q % 2 else ()))
            for q in range(10)}
    return replace(run, samples=[replace(s, slices=keys[s.qid]) for s in run.samples])


def test_each_slice_s_means_and_the_slices_under_the_minimum_size() -> None:
    slices = run_slices(_sliced_run(), min_size=5)
    assert slices.keys == ["lang:en", "tag:billing"]  # languages first, then by size
    en = slices.get("lang:en")
    assert en is not None and en.questions == 6
    assert en.summary["recall"].mean == 1.0 and en.summary["recall"].n == 6
    billing = slices.get("tag:billing")
    assert billing is not None and billing.summary["recall"].mean == pytest.approx(3 / 5)
    assert slices.small == (("lang:zh", 4),)
    assert slices.worth_showing


def test_slice_thresholds_name_the_slice_and_fail_for_an_unknown_one() -> None:
    run = _sliced_run()
    keys = run_slices(run, 1).keys
    assert resolve_slice("zh", keys) == ("lang:zh", None)
    assert resolve_slice("lang:zh", keys) == ("lang:zh", None)
    assert resolve_slice("fr", keys)[0] is None
    results = slice_threshold_results(run, [
        SliceThreshold(name="zh", checks=(MinValue("recall", 0.5),)),
        SliceThreshold(name="en", checks=(MinValue("recall", 0.5),)),
        SliceThreshold(name="fr", checks=(MinValue("recall", 0.5),)),
    ])
    zh, en, fr = results
    assert zh.reason == "ragev: zh: recall 0.000 < threshold 0.500 (n=4)"
    assert zh.slice == "lang:zh"
    assert en.passed
    assert fr.reason is not None and "[thresholds.slice.fr] recall = 0.500" in fr.reason
    assert "no question of the run is in it" in fr.reason
