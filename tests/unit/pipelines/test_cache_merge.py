"""``ragev cache merge``'s core: a union of answer caches by key, damaged rows left out."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pytest_ragev import Answer, Chunk
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.pipelines.answer_cache import DATABASE, AnswerCache, answer_cache_key
from pytest_ragev.pipelines.cache_merge import merge_caches


def key(qid: int) -> str:
    return answer_cache_key("fingerprint", "settings", qid)


def filled(folder: Path, qids: range, text: str) -> Path:
    cache = AnswerCache(folder, warn=pytest.fail)
    for qid in qids:
        cache.put(key(qid), Answer(retrieved=[qid, Chunk("长城全长超过两万公里。", 7)],
                                   text=f"{text} {qid}", meta={"model": "本地"}))
    cache.put_text_scores([(bytes(16) + qid.to_bytes(16, "big"), [0.5] * 6) for qid in qids])
    cache.close()
    return folder


def test_the_union_by_key_keeps_what_the_target_has(tmp_path: Path) -> None:
    one = filled(tmp_path / "one", range(0, 10), "Antwort")
    two = filled(tmp_path / "two", range(5, 15), "Ответ")
    target = filled(tmp_path / "target", range(0, 2), "答え")
    merged = merge_caches([one, two / DATABASE], target)
    assert (merged.added, merged.present, merged.damaged) == (13, 7, 0)
    assert merged.text_scores == 13
    cache = AnswerCache(target, warn=pytest.fail)
    answers = {qid: cache.get(key(qid)) for qid in range(15)}
    assert all(answer is not None for answer in answers.values())
    assert answers[1] is not None and answers[1].text == "答え 1"  # the target's row stays
    assert answers[7] is not None and answers[7].text == "Antwort 7"  # the first source's
    assert answers[14] is not None and answers[14].retrieved[1] == Chunk("长城全长超过两万公里。", 7)
    assert merged.line == ("13 answers added, 7 already there, 0 damaged left out; 13 "
                           "text-metric rows added")


def test_a_damaged_row_is_left_out(tmp_path: Path) -> None:
    source = filled(tmp_path / "source", range(3), "answer")
    with sqlite3.connect(source / DATABASE) as connection:
        connection.execute("UPDATE answers SET body = CAST(X'00' || body AS BLOB) WHERE key = ?",
                           (bytes.fromhex(key(1)),))
    merged = merge_caches([source], tmp_path / "target")
    assert (merged.added, merged.damaged) == (2, 1)
    cache = AnswerCache(tmp_path / "target", warn=pytest.fail)
    assert cache.get(key(1)) is None and cache.get(key(2)) is not None


def test_what_is_not_an_answer_cache_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing: no answer cache there \(no answers\.sqlite\)"):
        merge_caches([tmp_path / "missing"], tmp_path / "target")
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / DATABASE).write_text("not a database", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"answers\.sqlite is not an answer cache"):
        merge_caches([tmp_path / "text"], tmp_path / "target")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
    with pytest.raises(ConfigError, match="has no answers table"):
        merge_caches([other], tmp_path / "target")
    target = filled(tmp_path / "target", range(2), "x")
    with pytest.raises(ConfigError, match="is the target itself"):
        merge_caches([target], target)
