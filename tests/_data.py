"""The datasets the tests share: five questions and seven passages; any number of
questions in six languages (:func:`write_questions`)."""

from __future__ import annotations

from pathlib import Path

from pytest_ragev.dataset import write_dataset

#: A small English dataset: five questions, seven passages (two distractors).
CORPUS = {
    1: "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    2: "The Eiffel Tower is about 330 metres tall including its antennas.",
    3: "Mount Everest, on the border of Nepal and China, is 8,849 metres high.",
    4: "Python was created by Guido van Rossum and first released in 1991.",
    5: "The Great Wall of China stretches over twenty thousand kilometres.",
    6: "The Louvre in Paris is the most visited art museum in the world.",
    7: "Rust is a systems programming language focused on memory safety.",
}
QUERIES = {
    1: "When was the Eiffel Tower completed?",
    2: "How tall is the Eiffel Tower?",
    3: "How high is Mount Everest?",
    4: "Who created Python?",
    5: "How long is the Great Wall of China?",
}
ANSWERS = {
    11: "The Eiffel Tower was completed in 1889.",
    12: "The Eiffel Tower is about 330 metres tall.",
    13: "Mount Everest is 8,849 metres high.",
    14: "Python was created by Guido van Rossum.",
    15: "The Great Wall is over twenty thousand kilometres long.",
}
QRELS = [(1, 1), (2, 2), (2, 1), (3, 3), (4, 4), (5, 5)]
QAS = [(1, 11), (2, 12), (3, 13), (4, 14), (5, 15)]


#: Question templates in six languages; question q uses template q % 6.
TEMPLATES = (
    "长城第{q}段有多长？", "Wie hoch ist der Berg Nummer {q}?", "Какая река номер {q}?",
    "{q}番目の山の高さは？", "{q}번째 섬은 어디에 있습니까?", "When was building {q} finished?",
)
FACTS = (
    "长城第{q}段长{n}公里。", "Der Berg Nummer {q} ist {n} Meter hoch.",
    "Река номер {q} длиной {n} километров.", "{q}番目の山の高さは{n}メートルです。",
    "{q}번째 섬은 {n}번 바다에 있습니다.", "Building {q} was finished in {n}.",
)


def write_questions(folder: Path, count: int) -> None:
    """``count`` questions, each with one gold passage and a reference answer, and ten
    distractor passages."""
    queries = {q: TEMPLATES[q % 6].format(q=q) for q in range(1, count + 1)}
    corpus = {q: FACTS[q % 6].format(q=q, n=q * 37 % 1000) for q in queries}
    corpus.update({100_000 + d: f"Distractor {d}: 无关的段落 {d}." for d in range(10)})
    answers = {10_000 + q: FACTS[q % 6].format(q=q, n=q * 37 % 1000) for q in queries}
    write_dataset(folder, queries=queries, corpus=corpus, answers=answers,
                  qrels=[(q, q) for q in queries], qas=[(q, 10_000 + q) for q in queries])
