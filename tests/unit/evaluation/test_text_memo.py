"""The text metrics kept between runs: read back only where they are the same numbers."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_ragev.core.segment as segment
import pytest_ragev.metrics.memo as memo_keys
import pytest_ragev.metrics.text as text_module
from pytest_ragev.core.record import Record
from pytest_ragev.core.segment import jieba_tokenizer, jieba_unchanged
from pytest_ragev.evaluation import TextScoreMemo, score_records
from pytest_ragev.metrics import TokenizerChoice, custom_tokenizer, resolve_tokenizer
from pytest_ragev.metrics.text import clear_cache
from pytest_ragev.pipelines.answer_cache import AnswerCache

DEFAULT = resolve_tokenizer("default", source="test")

#: Answer/reference pairs in several languages, each answer different from its reference.
PAIRS = [
    ("The Eiffel Tower is in Paris.", "The Eiffel Tower stands in Paris, France."),
    ("检索增强生成把检索到的段落交给模型。", "检索增强生成先检索段落，再生成答案。"),
    ("Der Turm steht in Paris. Er ist 330 Meter hoch.", "Der Eiffelturm steht in Paris."),
    ("Башня стоит в Париже.", "Эйфелева башня находится в Париже."),
    ("東京タワーは東京にあります。", "東京タワーは港区にあります。"),
    ("서울은 한국의 수도입니다.", "한국의 수도는 서울입니다."),
    ("I do not know.", "The answer is 42."),
]


def _records(pairs: Sequence[tuple[str, str]], *, has_answer: bool = True) -> list[Record]:
    return [Record(qid=qid, question=f"q{qid}?", retrieval_gt=[[qid, qid + 100]],
                   retrieval_ids=[qid + 100, 7, qid], generated_text=answer,
                   generated_gt=reference if has_answer else "", has_answer=has_answer)
            for qid, (answer, reference) in enumerate(pairs, start=1)]


def _metrics(records: Sequence[Record]) -> list[dict[str, float]]:
    return [dict(r.metrics) for r in records]


def _memo(tmp_path: Path, profile: str = "weknora",
          tokenizer: TokenizerChoice = DEFAULT) -> TextScoreMemo:
    return TextScoreMemo(AnswerCache(tmp_path / "cache"), profile=profile, tokenizer=tokenizer)


def _score(records: Sequence[Record], memo: TextScoreMemo | None, profile: str = "weknora",
           tokenizer: TokenizerChoice = DEFAULT) -> list[Record]:
    return score_records(records, profile=profile, tokenizer=tokenizer.tokenizer, memo=memo)


def _stored(tmp_path: Path) -> int:
    path = tmp_path / "cache" / "answers.sqlite"
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(path)) as connection:
        count: int = connection.execute("SELECT count(*) FROM text_scores").fetchone()[0]
    return count


@pytest.mark.parametrize("profile", ["weknora", "standard"])
def test_a_rerun_reads_the_same_numbers_it_kept(tmp_path: Path, profile: str) -> None:
    records = _records(PAIRS)
    fresh = _metrics(_score(records, None, profile))
    first = _memo(tmp_path, profile)
    assert _metrics(_score(records, first, profile)) == fresh
    assert (first.reused, first.kept) == (0, len(PAIRS))
    again = _memo(tmp_path, profile)  # a later run: a new memo over the same database
    assert _metrics(_score(records, again, profile)) == fresh
    assert (again.reused, again.kept) == (len(PAIRS), 0)
    assert _stored(tmp_path) == len(PAIRS)


def test_only_the_missing_pairs_are_scored(tmp_path: Path) -> None:
    _score(_records(PAIRS[:3]), _memo(tmp_path))
    memo = _memo(tmp_path)
    records = _records(PAIRS)
    assert _metrics(_score(records, memo)) == _metrics(_score(records, None))
    assert (memo.reused, memo.kept) == (3, len(PAIRS) - 3)


def test_cheap_pairs_and_questions_without_an_answer_are_not_kept(tmp_path: Path) -> None:
    memo = _memo(tmp_path)
    same = [("Paris.", "Paris."), ("", "Paris is in France."), ("検索", "")]
    records = _records(same) + _records(PAIRS[:2], has_answer=False)
    assert _metrics(_score(records, memo)) == _metrics(_score(records, None))
    assert memo.kept == 0 and _stored(tmp_path) == 0


def test_another_profile_tokenizer_or_code_reads_nothing(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    records = _records(PAIRS)
    _score(records, _memo(tmp_path))
    standard = _memo(tmp_path, "standard")
    assert _metrics(_score(records, standard, "standard")) == _metrics(
        _score(records, None, "standard"))
    assert standard.reused == 0
    korean = resolve_tokenizer("ko", source="test") if _has("fugashi") else None
    if korean is not None:
        by_ko = _memo(tmp_path, tokenizer=korean)
        assert _metrics(_score(records, by_ko, tokenizer=korean)) == _metrics(
            _score(records, None, tokenizer=korean))
        assert by_ko.reused == 0
    # Edited metric code (or another pytest-ragev version): a new digest, nothing read.
    monkeypatch.setattr(memo_keys, "code_digest", lambda: b"edited" * 5)
    edited = _memo(tmp_path)
    _score(records, edited)
    assert (edited.reused, edited.kept) == (0, len(PAIRS))


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_a_memo_never_serves_another_profile_or_tokenizer(tmp_path: Path) -> None:
    memo = _memo(tmp_path)
    assert memo.serves("weknora", DEFAULT.tokenizer)
    assert not memo.serves("standard", DEFAULT.tokenizer)
    assert not memo.serves("weknora", lambda text: [text.split()])


def test_a_custom_tokenizer_is_never_kept(tmp_path: Path) -> None:
    # The project's own code: it can change without anything a key could see.
    choice = custom_tokenizer(lambda text: [text.lower().split()], spec="test")
    memo = _memo(tmp_path, tokenizer=choice)
    assert not memo.serves("weknora", choice.tokenizer)
    records = _records(PAIRS)
    assert _metrics(score_records(records, profile="weknora", tokenizer=choice.tokenizer,
                                  memo=memo)) == _metrics(_score(records, None, tokenizer=choice))
    assert memo.kept == 0


def test_a_damaged_entry_is_scored_again(tmp_path: Path) -> None:
    records = _records(PAIRS)
    _score(records, _memo(tmp_path))
    with contextlib.closing(sqlite3.connect(tmp_path / "cache" / "answers.sqlite")) as connection, \
            connection:
        # One value changed (0.5 as a double): the checksum no longer matches.
        connection.execute("UPDATE text_scores SET body = CAST(x'000000000000E03F' || "
                           "substr(body, 9) AS BLOB) WHERE rowid = (SELECT min(rowid) FROM "
                           "text_scores)")
    warnings: list[str] = []
    cache = AnswerCache(tmp_path / "cache", warn=warnings.append)
    memo = TextScoreMemo(cache, profile="weknora", tokenizer=DEFAULT)
    assert _metrics(_score(records, memo)) == _metrics(_score(records, None))
    assert (memo.reused, memo.kept) == (len(PAIRS) - 1, 1)
    assert len(warnings) == 1 and "damaged text-metric entries" in warnings[0]
    assert (cache.damaged_text_scores, cache.damaged) == (1, 0)  # no answer was damaged
    assert _stored(tmp_path) == len(PAIRS)  # removed, then kept again


def test_a_cache_that_cannot_be_written_costs_only_the_saving(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the folder should be", encoding="utf-8")
    warnings: list[str] = []
    memo = TextScoreMemo(AnswerCache(tmp_path / "cache", warn=warnings.append),
                         profile="weknora", tokenizer=DEFAULT)
    records = _records(PAIRS)
    assert _metrics(_score(records, memo)) == _metrics(_score(records, None))
    assert len(warnings) == 1


_TEXT = st.text(st.sampled_from(list("abc xyz.ÄöПри检索生成東京タワー서울 ,!?")), max_size=30)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=8),
       profile=st.sampled_from(["weknora", "standard"]))
def test_kept_numbers_are_the_numbers(tmp_path_factory: pytest.TempPathFactory,
                                      pairs: list[tuple[str, str]], profile: str) -> None:
    folder = tmp_path_factory.mktemp("memo")
    records = _records(pairs)
    fresh = _metrics(_score(records, None, profile))
    assert _metrics(_score(records, _memo(folder, profile), profile)) == fresh
    second = _memo(folder, profile)
    assert _metrics(_score(records, second, profile)) == fresh
    assert second.kept == 0


# --- the jieba dictionary changed while the process runs -----------------------------------


@pytest.fixture
def own_jieba(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A jieba instance of this test's own (the process-wide one is put back after)."""
    monkeypatch.setattr(segment, "_jieba_instance", None)
    monkeypatch.setattr(segment, "_jieba_loaded", None)
    monkeypatch.setattr(segment, "_jieba_word_changes", 0)
    monkeypatch.setattr(text_module, "_segmenter", None)  # it holds the instance it found
    clear_cache()
    yield
    clear_cache()


@pytest.mark.usefixtures("own_jieba")
def test_a_changed_jieba_dictionary_turns_the_memo_off(tmp_path: Path) -> None:
    records = _records(PAIRS[1:2])  # Chinese: 检索增强生成 ...
    assert jieba_unchanged()  # not loaded yet: nothing can have changed it
    before = _metrics(_score(records, _memo(tmp_path)))
    assert jieba_unchanged() and _stored(tmp_path) == 1

    jieba_tokenizer().add_word("检索增强生成")
    clear_cache()
    assert not jieba_unchanged()
    memo = _memo(tmp_path)
    after = _metrics(_score(records, memo))
    assert after == _metrics(_score(records, None))
    assert after != before  # the new word changed the tokens, and the numbers were not read
    assert (memo.reused, memo.kept) == (0, 0)


@pytest.mark.usefixtures("own_jieba")
@pytest.mark.parametrize("change", ["del_word", "suggest_freq", "set_dictionary"])
def test_every_dictionary_change_is_seen(change: str) -> None:
    instance = jieba_tokenizer()
    assert jieba_unchanged()
    if change == "del_word":
        instance.del_word("检索")
    elif change == "suggest_freq":
        instance.suggest_freq(("检索", "增强"), tune=True)
    else:
        instance.set_dictionary(instance.get_dict_file().name)
    assert not jieba_unchanged()
