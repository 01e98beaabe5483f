"""The small dataset the tests share: five questions, seven passages."""

from __future__ import annotations

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
