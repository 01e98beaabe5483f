"""The verdict store: keys of everything a verdict depends on, a file git diff reads."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.evaluation import JudgeConfig, JudgedTexts, StoredVerdict, VerdictStore
from pytest_ragev.evaluation.judge import Judge, shown_texts
from pytest_ragev.evaluation.verdicts import verdict_key, write_store

JUDGE = JudgeConfig.from_table({"base_url": "http://127.0.0.1:8000/v1", "model": "judge-1"},
                               source="ragev.toml", base_dir=Path("."))
texts = st.text(max_size=40)
judged = st.builds(JudgedTexts, question=texts, answer=texts, reference=texts,
                   passages=st.lists(texts, max_size=4).map(tuple))
#: The inputs each metric's verdict depends on (its prompt shows them).
DEPENDS = {"correctness": {"question", "answer", "reference"},
           "faithfulness": {"answer", "passages"},
           "context_relevance": {"question", "passages"}}


def _changed(value: JudgedTexts, name: str) -> JudgedTexts:
    if name == "passages":
        return replace(value, passages=(*value.passages, "ein weiterer Abschnitt"))
    return replace(value, **{name: getattr(value, name) + " 追加"})


@given(judged, st.sampled_from(sorted(DEPENDS)))
def test_changing_any_input_a_verdict_depends_on_changes_its_key(
    value: JudgedTexts, metric: str
) -> None:
    judge = Judge(JUDGE)
    key = judge.key(metric, value)
    for name in ("question", "answer", "reference", "passages"):
        other = judge.key(metric, _changed(value, name))
        if name in DEPENDS[metric]:
            assert other != key, name
        else:
            assert other == key, name  # an edit it does not read judges nothing again


@given(judged, st.sampled_from(sorted(DEPENDS)))
def test_the_judge_and_the_prompt_are_part_of_every_key(
    value: JudgedTexts, metric: str
) -> None:
    shown = shown_texts(metric, value)
    base = verdict_key(judge=JUDGE.identity(), prompt=f"{metric}/1", texts=shown)
    assert verdict_key(judge=JUDGE.identity(), prompt=f"{metric}/2", texts=shown) != base
    for knob, changed in (("model", "judge-2"), ("base_url", "http://127.0.0.1:9000/v1"),
                          ("seed", 7), ("max_tokens", 100), ("json_mode", False)):
        identity = {**JUDGE.identity(), knob: changed}
        assert verdict_key(judge=identity, prompt=f"{metric}/1", texts=shown) != base, knob
    # The passages' order is part of what the judge saw (its prompt numbers them).
    flipped = replace(value, passages=tuple(reversed(value.passages)))
    if "passages" in DEPENDS[metric] and flipped.passages != value.passages:
        assert verdict_key(judge=JUDGE.identity(), prompt=f"{metric}/1",
                           texts=shown_texts(metric, flipped)) != base


def _entry(key: str, score: float = 0.5, question: str = "塔有多高？") -> StoredVerdict:
    return StoredVerdict(key=key, metric="correctness", score=score, reason="Halb richtig.",
                         judge="judge-1 @ http://127.0.0.1:8000/v1", prompt="correctness/1",
                         prompt_tokens=200, completion_tokens=20, question=question)


def test_the_file_is_one_sorted_line_per_verdict_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "eval" / "verdicts.jsonl"
    write_store(path, [_entry("b" * 64), _entry("a" * 64, 1.0, "Wie hoch ist der Turm?")])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["a" * 64, "b" * 64]
    assert "塔有多高" in lines[1]  # readable in review: no \\u escapes
    store = VerdictStore.load(path)
    assert len(store) == 2 and store.get("a" * 64) == _entry("a" * 64, 1.0,
                                                              "Wie hoch ist der Turm?")
    assert store.get("c" * 64) is None
    # Unchanged verdicts: nothing to write; a new one: the file would change.
    assert not store.changed_by([_entry("a" * 64, 1.0, "Wie hoch ist der Turm?")], prune=False)
    assert store.changed_by([_entry("c" * 64)], prune=False)
    # A complete run keeps only its own verdicts; a partial one keeps the others.
    assert [e.key for e in store.merged([_entry("c" * 64)], prune=True)] == ["c" * 64]
    assert [e.key for e in store.merged([_entry("c" * 64)], prune=False)] == [
        "a" * 64, "b" * 64, "c" * 64]
    assert VerdictStore.load(tmp_path / "missing.jsonl").get("a" * 64) is None


@pytest.mark.parametrize(("line", "message"), [
    ("<<<<<<< HEAD", "line 2 is not JSON (a merge conflict?)"),
    ("[1, 2]", "line 2 is not a JSON object"),
    ('{"key": "abc", "metric": "correctness", "score": 0.5}',
     "line 2: key 'abc' is not a sha256 hex digest"),
    ('{"key": "' + "d" * 64 + '", "metric": "correctness", "score": 5}',
     "line 2: score 5 is not a number in [0, 1]"),
    ('{"key": "' + "d" * 64 + '", "score": 0.5}', "line 2 has no 'metric'"),
])
def test_a_damaged_line_is_one_line_naming_the_file_and_line(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "verdicts.jsonl"
    write_store(path, [_entry("a" * 64)])
    path.write_text(path.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        VerdictStore.load(path)
    assert str(error.value).startswith(f"{path} {message}")
    assert "restore the file from version control" in str(error.value)
