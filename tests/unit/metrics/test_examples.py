"""The worked examples of the metric contract, profile "weknora" (the default).

Expected values are written out to 10 decimals, as the contract states them.
"""

from __future__ import annotations

import pytest

from pytest_ragev import GENERATION_METRICS, RETRIEVAL_METRICS, MetricInput, score
from pytest_ragev.metrics import tokenize, words

NAN = None  # the contract leaves these cells unspecified ("—")

RETRIEVAL_EXAMPLES = [
    # gt, ids, precision, recall, ndcg3, ndcg10, mrr, map
    ([[1, 2, 3]], [2, 5, 1, 3], 0.75, 1.0, 0.7039180890, 0.9060254355, 1.0, 0.8055555556),
    ([[7]], [], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    ([[4, 9]], [1, 2, 3, 9], 0.25, 0.5, 0.0, 0.2640681226, 0.25, 0.25),
    ([[1, 2], [3, 4]], [1, 3, 5], 0.3333333333, 0.5, NAN, NAN, 0.75, NAN),
]

GENERATION_EXAMPLES = [
    # generated, reference, bleu1, bleu2, bleu4, rouge1, rouge2, rougel
    (
        "The cat sat on the mat.",
        "The cat is on the mat.",
        (0.8571428571, 0.7559289460, 0.4889230224, 0.8333333283, 0.5999999950, 0.8333333283),
    ),
    (
        "Paris is the capital. It is in France.",
        "The capital of France is Paris.",
        (0.6666666667, 0.4082482905, 0.2509862124, 0.6153846104, 0.0, 0.3076923027),
    ),
    (
        "计算机的操作系统有Linux和Windows。",
        "计算机的操作系统有 UNIX、Linux、FreeBSD、Mac OS 和 DOS。",
        (0.3218945110, 0.2601300475, 0.2068738125, 0.6315789427, 0.3157894694, 0.6315789427),
    ),
    (
        "the the the the",
        "the cat",
        (0.4, 0.3162277660, 0.3593041120, 0.6666666622, 0.0, 0.6666666622),
    ),
    ("A. B. C.", "A. B. C.", (1.0, 1.0, 0.0, 0.9999999950, 0.9999999950, 0.9999999950)),
    ("Yes.", "Yes, it is.", (0.0676676416, 0.0, 0.0, 0.0, 0.0, 0.0)),
    ("", "", (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
]


@pytest.mark.parametrize("example", RETRIEVAL_EXAMPLES, ids=lambda example: str(example[:2]))
def test_retrieval_worked_examples(example: tuple[object, ...]) -> None:
    gt, ids, *expected = example
    row = score([MetricInput(gt, ids, "", "")], metrics=RETRIEVAL_METRICS)[0]  # type: ignore[arg-type]
    assert list(row) == list(RETRIEVAL_METRICS)
    for name, value in zip(RETRIEVAL_METRICS, expected, strict=True):
        if value is not None:
            assert row[name] == pytest.approx(value, abs=5e-11), name


def test_retrieval_example_with_two_sets_follows_the_written_definitions() -> None:
    # The contract leaves nDCG and MAP of [[1,2],[3,4]] vs [1,3,5] open; derive them from
    # the definitions: nDCG over the united sets {1,2,3,4}, AP per set then averaged.
    row = score([MetricInput([[1, 2], [3, 4]], [1, 3, 5], "", "")], metrics=RETRIEVAL_METRICS)[0]
    dcg3 = 1 + 1 / 1.584962500721156  # hits at ranks 1 and 2
    idcg3 = 1 + 1 / 1.584962500721156 + 0.5
    assert row["ndcg3"] == pytest.approx(dcg3 / idcg3, abs=1e-12)
    idcg10 = idcg3 + 1 / 2.321928094887362
    assert row["ndcg10"] == pytest.approx(dcg3 / idcg10, abs=1e-12)
    assert row["map"] == pytest.approx((1.0 + 0.5) / 2, abs=1e-12)


@pytest.mark.parametrize(("generated", "reference", "expected"), GENERATION_EXAMPLES)
def test_generation_worked_examples(
    generated: str, reference: str, expected: tuple[float, ...]
) -> None:
    row = score([MetricInput([], [], generated, reference)], metrics=GENERATION_METRICS)[0]
    assert list(row) == list(GENERATION_METRICS)
    for name, value in zip(GENERATION_METRICS, expected, strict=True):
        assert row[name] == pytest.approx(value, abs=5e-11), name


def test_all_examples_in_one_call_match_one_by_one() -> None:
    inputs = [MetricInput(gt, ids, "", "") for gt, ids, *_ in RETRIEVAL_EXAMPLES] + [
        MetricInput([], [], generated, reference) for generated, reference, _ in GENERATION_EXAMPLES
    ]
    together = score(inputs)
    alone = [score([one])[0] for one in inputs]
    assert together == alone


def test_chinese_example_tokens() -> None:
    assert words("计算机的操作系统有Linux和Windows。") == [
        "计算机", "的", "操作系统", "有", "Linux", "和", "Windows",
    ]  # fmt: skip
    assert words("计算机的操作系统有 UNIX、Linux、FreeBSD、Mac OS 和 DOS。") == [
        "计算机", "的", "操作系统", "有", "UNIX", "、", "Linux", "、",
        "FreeBSD", "、", "Mac", "OS", "和", "DOS",
    ]  # fmt: skip


def test_every_sentence_is_kept() -> None:
    # The original's Go splitter dropped every second sentence; the fix keeps them all.
    assert tokenize("Paris is the capital. It is in France.") == [
        ["Paris", "is", "the", "capital"],
        ["It", "is", "in", "France"],
    ]
    assert tokenize("一。二。三。四") == [["一"], ["二"], ["三"], ["四"]]


def test_perfect_match_is_just_below_one_for_rouge() -> None:
    # F1 = 2PR / (P + R + 1e-8): a perfect match scores 0.999999995, not 1.0.
    row = score([MetricInput([], [], "A b c d e.", "A b c d e.")])[0]
    for name in ("rouge1", "rouge2", "rougel"):
        assert row[name] == pytest.approx(2 / (2 + 1e-8), abs=1e-15)
    assert row["bleu4"] == 1.0
