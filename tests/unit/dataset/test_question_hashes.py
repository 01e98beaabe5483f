"""Per-question content hashes: what a baseline pairs questions by across dataset edits."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.core.types import QAPair
from pytest_ragev.dataset import load_dataset, question_hash, write_dataset

QUERIES = {1: "火星有几颗卫星？", 2: "Wie hoch ist der Eiffelturm?", 3: "Кто написал «Войну и мир»?"}
CORPUS = {
    10: "火星有两颗天然卫星：火卫一和火卫二。",
    11: "Der Eiffelturm ist etwa 330 Meter hoch.",
    12: "«Война и мир» — роман Льва Толстого.",
    13: "エッフェル塔はパリにあります。",
    14: "에펠탑은 파리에 있다.",
}
ANSWERS = {100: "两颗。", 101: "Etwa 330 Meter.", 102: "Лев Толстой."}
QRELS = [(1, 10), (2, 11), (2, 13, 2), (3, 12)]
QAS = [(1, 100), (2, 101), (3, 102)]


def _hashes(folder: Path, **overrides: Any) -> dict[int, str]:
    parts: dict[str, Any] = {"queries": QUERIES, "corpus": CORPUS, "answers": ANSWERS,
                             "qrels": [(*q, 1)[:3] for q in QRELS], "qas": QAS}
    parts.update(overrides)
    write_dataset(folder, **parts)
    return dict(load_dataset(folder).question_hashes)


def test_hashes_follow_the_content_of_each_question(tmp_path: Path) -> None:
    original = _hashes(tmp_path / "a")
    assert sorted(original) == [1, 2, 3]
    assert all(len(h) == 16 and int(h, 16) >= 0 for h in original.values())
    assert len(set(original.values())) == 3
    assert _hashes(tmp_path / "same") == original

    def changed(name: str, **overrides: Any) -> set[int]:
        edited = _hashes(tmp_path / name, **overrides)
        return {qid for qid in original if edited.get(qid) != original[qid]}

    # The question text, a relevant passage's text or grade, the reference answer.
    assert changed("text", queries={**QUERIES, 1: "火星有多少颗卫星？"}) == {1}
    assert changed("passage", corpus={**CORPUS, 13: "エッフェル塔は東京にはない。"}) == {2}
    assert changed("grade", qrels=[(1, 10, 1), (2, 11, 1), (2, 13, 1), (3, 12, 1)]) == {2}
    assert changed("answer", answers={**ANSWERS, 102: "Толстой."}) == {3}
    assert changed("qrel", qrels=[(1, 10, 1), (2, 11, 1), (3, 12, 1)]) == {2}
    # Not: a passage no question cites, a new question, the corpus renumbered.
    assert changed("unrelated", corpus={**CORPUS, 14: "에펠탑은 프랑스 파리에 있다."}) == set()
    assert changed("added", queries={**QUERIES, 4: "Neue Frage?"}) == set()
    renumbered = {pid + 100: text for pid, text in CORPUS.items()}
    assert changed("renumbered", corpus=renumbered,
                   qrels=[(1, 110, 1), (2, 111, 1), (2, 113, 2), (3, 112, 1)]) == set()


def test_a_limited_dataset_keeps_the_hashes_of_its_questions(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", queries=QUERIES, corpus=CORPUS, answers=ANSWERS, qrels=QRELS,
                  qas=QAS)
    dataset = load_dataset(tmp_path / "d")
    limited = dataset.limit(2)
    assert dict(limited.question_hashes) == {q: dataset.question_hashes[q] for q in (1, 2)}
    assert dataset.question_hashes is dataset.question_hashes  # computed once


_texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
_pairs = st.builds(
    lambda question, passages, answer: QAPair(
        qid=1, question=question, pids=tuple(range(len(passages))),
        passages=tuple(text for text, _ in passages), aid=None if answer is None else 9,
        answer=answer, grades=tuple(grade for _, grade in passages),
    ),
    _texts,
    st.lists(st.tuples(_texts, st.sampled_from([1.0, 2.0, 0.5])), max_size=3),
    st.one_of(st.none(), _texts),
)


def _content(pair: QAPair) -> tuple[object, ...]:
    return (pair.question, sorted(zip(pair.passages, pair.grades, strict=True)), pair.answer)


@settings(max_examples=300, deadline=None)
@given(one=_pairs, two=_pairs)
def test_equal_hashes_mean_equal_content(one: QAPair, two: QAPair) -> None:
    # Every field is written with its length, so texts cannot shift between fields
    # ("ab" + "c" vs "a" + "bc"); a missing answer is not an empty one.
    assert (question_hash(one) == question_hash(two)) == (_content(one) == _content(two))


def test_passage_order_and_qid_do_not_matter() -> None:
    pair = QAPair(qid=1, question="Q", pids=(1, 2), passages=("a", "b"), aid=1, answer="A",
                  grades=(1.0, 2.0))
    swapped = dataclasses.replace(pair, qid=7, pids=(5, 4), passages=("b", "a"),
                                  grades=(2.0, 1.0))
    assert question_hash(pair) == question_hash(swapped)
    assert question_hash(pair) != question_hash(dataclasses.replace(pair, answer=""))
    assert question_hash(dataclasses.replace(pair, answer=None)) != question_hash(
        dataclasses.replace(pair, answer="")
    )
