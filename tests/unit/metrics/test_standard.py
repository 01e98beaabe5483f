"""Cross-checks against the field's reference tools, on thousands of seeded random cases.

* profile "standard" must equal ``pytrec_eval`` (set_P, set_recall, ndcg_cut_3,
  ndcg_cut_10, recip_rank, map; binary and graded), Google ``rouge-score`` (rouge1,
  rouge2, rougeL with a tokenizer returning our tokens) and NLTK ``sentence_bleu``
  without smoothing, to 1e-9;
* profile "weknora" must meet those tools where the definitions coincide.
"""

from __future__ import annotations

import random
import sys
import warnings
from collections.abc import Callable, Iterator
from fractions import Fraction
from itertools import pairwise
from typing import Any

import pytest
import pytrec_eval
from nltk.translate.bleu_score import sentence_bleu
from rouge_score import rouge_scorer

from pytest_ragev import GENERATION_METRICS, RETRIEVAL_METRICS, MetricInput, score
from pytest_ragev.metrics import tokenize, words

TREC_NAMES = {
    "precision": "set_P",
    "recall": "set_recall",
    "ndcg3": "ndcg_cut_3",
    "ndcg10": "ndcg_cut_10",
    "mrr": "recip_rank",
    "map": "map",
}
BLEU_WEIGHTS = {
    "bleu1": (1.0, 0.0, 0.0, 0.0),
    "bleu2": (0.5, 0.5, 0.0, 0.0),
    "bleu4": (0.25, 0.25, 0.25, 0.25),
}
EXACT = 1e-9

# A small vocabulary makes repeats, shared n-grams, partial matches and case
# differences (BLEU lowercases, ROUGE does not) frequent.
VOCABULARY = [
    "the", "The", "cat", "Cat", "sat", "on", "mat", "a", "A", "dog", "is", "ran",
    "big", "red", "fish", "Hello,", "world!", "why?", "x_1", "42", "(", ")", "-",
]  # fmt: skip
CHINESE = ["计算机", "操作系统", "我们", "今天", "天气", "很好", "、", "，", "：", "和"]
# German, Russian, Japanese, Korean, Arabic, Hindi and Thai words (with their case
# differences, diacritics and the punctuation of their scripts).
OTHER_SCRIPTS = [
    "Größe", "größe", "für", "Straße", "Привет,", "привет", "мир!", "Мир", "パッケージ", "を",
    "更新", "します", "한국어를", "배우고", "있습니다", "السلام", "عليكم", "،", "हिन्दी", "भाषा",
    "ภาษาไทย", "Ελλάδα",
]  # fmt: skip


def _random_text(rng: random.Random, vocabulary: list[str], max_sentences: int = 3) -> str:
    sentences = []
    for _ in range(rng.randint(0, max_sentences)):
        tokens = [rng.choice(vocabulary) for _ in range(rng.randint(0, 9))]
        sentences.append(" ".join(tokens))
    ending = rng.choice(["", ".", "。"])
    return rng.choice([". ", "。"]).join(sentences) + ending


def _text_pairs(
    seed: int, count: int, extra: list[str] | None = None
) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        vocabulary = VOCABULARY if rng.random() < 0.8 else VOCABULARY + CHINESE
        if extra is not None:
            vocabulary = vocabulary + extra
        reference = _random_text(rng, vocabulary)
        if rng.random() < 0.3:
            # A near copy: long shared n-grams, so BLEU-4 is rarely zero.
            hypothesis = " ".join(
                rng.choice(vocabulary) if rng.random() < 0.15 else token
                for token in reference.split(" ")
            )
        else:
            hypothesis = _random_text(rng, vocabulary)
        pairs.append((hypothesis, reference))
    return pairs


class _OurTokens:
    """rouge-score tokenizer object returning exactly our tokens (no lowercasing)."""

    def tokenize(self, text: str) -> list[str]:
        return words(text)


@pytest.fixture(scope="module")
def rouge() -> Any:
    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=_OurTokens())


def _nltk_bleu(
    hypothesis: str, reference: str, smoothing: Callable[..., Any] | None = None
) -> dict[str, float]:
    hyp = [token.lower() for token in words(hypothesis)]
    ref = [token.lower() for token in words(reference)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLTK warns on every zero n-gram precision
        # One call with the three weight vectors: NLTK counts the n-grams once.
        values = sentence_bleu(
            [ref], hyp, weights=list(BLEU_WEIGHTS.values()), smoothing_function=smoothing
        )
    return {name: float(value) for name, value in zip(BLEU_WEIGHTS, values, strict=True)}


@pytest.mark.parametrize(
    ("extra", "seed"), [(None, 20240601), (OTHER_SCRIPTS, 20240602)], ids=["en-zh", "every-script"]
)
def test_standard_generation_equals_rouge_score_and_nltk(
    rouge: Any, extra: list[str] | None, seed: int
) -> None:
    pairs = _text_pairs(seed=seed, count=2000, extra=extra)
    rows = score(
        [MetricInput([], [], hyp, ref) for hyp, ref in pairs],
        profile="standard",
        metrics=GENERATION_METRICS,
    )
    nonzero_bleu4 = 0
    for (hypothesis, reference), row in zip(pairs, rows, strict=True):
        expected = _nltk_bleu(hypothesis, reference)
        reference_scores = rouge.score(reference, hypothesis)  # (target, prediction)
        expected["rouge1"] = reference_scores["rouge1"].fmeasure
        expected["rouge2"] = reference_scores["rouge2"].fmeasure
        expected["rougel"] = reference_scores["rougeL"].fmeasure
        for name, value in expected.items():
            assert row[name] == pytest.approx(value, abs=EXACT), (name, hypothesis, reference)
        nonzero_bleu4 += row["bleu4"] > 0
    # The random cases do exercise the interesting branch, not only zeros.
    assert nonzero_bleu4 > 250


def test_standard_bleu_edge_cases_match_nltk() -> None:
    cases = [
        ("", ""),
        ("", "a b c"),
        ("a b c", ""),
        ("a", "a"),  # shorter than n for n >= 2
        ("a b", "a b c d e"),  # brevity penalty, no 3-grams
        ("Yes.", "Yes, it is."),  # no unigram match: NLTK returns 0
        ("x y z w", "w z y x"),  # unigrams match, no bigram
        ("The The the", "the"),  # lowercase clipping
    ]
    for hypothesis, reference in cases:
        row = score([MetricInput([], [], hypothesis, reference)], profile="standard")[0]
        for name, value in _nltk_bleu(hypothesis, reference).items():
            assert row[name] == pytest.approx(value, abs=EXACT), (name, hypothesis, reference)


def _trec_case(rng: random.Random, graded: bool) -> tuple[list[int], list[int], dict[int, int]]:
    pool = rng.randint(3, 40)
    gt = rng.sample(range(pool), rng.randint(0, min(pool, 8)))
    ids = [rng.randrange(pool) for _ in range(rng.randint(0, 15))]
    if rng.random() < 0.3 and gt:
        ids = gt[:] + ids  # every relevant passage retrieved
        rng.shuffle(ids)
    grades = {pid: rng.choice([0, 1, 1, 2, 3]) for pid in gt} if graded else {}
    return gt, ids, grades


def _pytrec(
    cases: list[tuple[list[int], list[int], dict[int, int]]],
) -> dict[str, dict[str, float]]:
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for index, (gt, ids, grades) in enumerate(cases):
        # trec_eval needs a judged document per query; "-1" is never retrieved.
        qrels[str(index)] = {str(pid): grades.get(pid, 1) for pid in gt} or {"-1": 0}
        ranking = list(dict.fromkeys(ids))  # first occurrence kept, as we do
        # trec_eval sorts by score: strictly decreasing scores fix the order.
        run[str(index)] = {str(pid): float(len(ranking) - rank) for rank, pid in enumerate(ranking)}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_NAMES.values()))
    result: dict[str, dict[str, float]] = evaluator.evaluate(run)
    return result


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_standard_retrieval_equals_pytrec_eval(graded: bool) -> None:
    rng = random.Random(7 + graded)
    cases = [_trec_case(rng, graded) for _ in range(4000)]
    expected = _pytrec(cases)
    rows = score(
        [MetricInput([gt], ids, "", "") for gt, ids, _ in cases],
        profile="standard",
        metrics=RETRIEVAL_METRICS,
        grades=[{pid: float(g) for pid, g in grades.items()} or None for _, _, grades in cases],
    )
    for index, row in enumerate(rows):
        trec = expected[str(index)]
        for ours, theirs in TREC_NAMES.items():
            assert row[ours] == pytest.approx(trec[theirs], abs=EXACT), (ours, cases[index])


def test_standard_retrieval_long_lists_and_several_sets_equal_pytrec_eval() -> None:
    # Lists longer than the numpy path's width and several GT sets (united in this
    # profile) take the per-sample path; the numbers must not change.
    rng = random.Random(99)
    cases = []
    inputs = []
    for _ in range(300):
        gt = rng.sample(range(2000), rng.randint(1, 30))
        ids = [rng.randrange(2000) for _ in range(rng.randint(500, 700))] + gt[:3]
        split = rng.randint(0, len(gt))
        inputs.append(MetricInput([gt[:split], gt[split:]], ids, "", ""))
        cases.append((gt, ids, {}))
    expected = _pytrec(cases)
    rows = score(inputs, profile="standard", metrics=RETRIEVAL_METRICS)
    for index, row in enumerate(rows):
        for ours, theirs in TREC_NAMES.items():
            assert row[ours] == pytest.approx(expected[str(index)][theirs], abs=EXACT)


# ---------------------------------------------------------------------------------
# Profile "weknora" where its definitions coincide with the standard tools.


def test_weknora_retrieval_meets_pytrec_eval_where_definitions_coincide() -> None:
    rng = random.Random(11)
    cases = [_trec_case(rng, graded=False) for _ in range(4000)]
    expected = _pytrec(cases)
    rows = score(
        [MetricInput([gt], ids, "", "") for gt, ids, _ in cases], metrics=RETRIEVAL_METRICS
    )
    full_recall_cases = 0
    for index, row in enumerate(rows):
        trec = expected[str(index)]
        gt, ids, _ = cases[index]
        # One binary GT set, distinct ids: P, recall, nDCG and MRR are trec_eval's.
        for ours in ("precision", "recall", "ndcg3", "ndcg10", "mrr"):
            assert row[ours] == pytest.approx(trec[TREC_NAMES[ours]], abs=EXACT), (ours, gt, ids)
        if gt and set(gt) <= set(ids):
            full_recall_cases += 1
            assert row["map"] == pytest.approx(trec["map"], abs=EXACT), (gt, ids)
        elif trec["map"] > 0:
            # Found-normalised AP is never below trec_eval's |G|-normalised AP.
            assert row["map"] >= trec["map"] - EXACT
    assert full_recall_cases > 500


def _distinct_token_pair(rng: random.Random) -> tuple[str, str, list[list[str]], list[list[str]]]:
    pool = [f"w{index}" for index in range(40)]
    reference_tokens = rng.sample(pool, rng.randint(1, 14))
    hypothesis_tokens = rng.sample(pool, rng.randint(1, 14))

    def sentences(tokens: list[str]) -> list[list[str]]:
        cuts = sorted(rng.sample(range(1, len(tokens)), min(len(tokens) - 1, rng.randint(0, 2))))
        bounds = [0, *cuts, len(tokens)]
        return [tokens[a:b] for a, b in pairwise(bounds)]

    ref_sentences, hyp_sentences = sentences(reference_tokens), sentences(hypothesis_tokens)
    ours_ref = ". ".join(" ".join(s) for s in ref_sentences) + "."
    ours_hyp = ". ".join(" ".join(s) for s in hyp_sentences) + "."
    return ours_hyp, ours_ref, hyp_sentences, ref_sentences


def test_weknora_rouge_meets_rouge_score_on_distinct_tokens() -> None:
    # With no repeated token, distinct-n-gram ROUGE-N is rouge-score's multiset ROUGE-N
    # and the union-LCS ROUGE-L is rougeLsum (sentences given one per line). WeKnora's
    # F1 has + 1e-8 in the denominator, which moves values by at most 5e-9.
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeLsum"], tokenizer=_OurTokens())
    rng = random.Random(5)
    for _ in range(2000):
        hypothesis, reference, hyp_sentences, ref_sentences = _distinct_token_pair(rng)
        assert tokenize(hypothesis) == hyp_sentences
        row = score([MetricInput([], [], hypothesis, reference)], metrics=GENERATION_METRICS)[0]
        by_line = scorer.score(
            "\n".join(" ".join(s) for s in ref_sentences),
            "\n".join(" ".join(s) for s in hyp_sentences),
        )
        assert row["rouge1"] == pytest.approx(by_line["rouge1"].fmeasure, abs=1e-8)
        assert row["rouge2"] == pytest.approx(by_line["rouge2"].fmeasure, abs=1e-8)
        assert row["rougel"] == pytest.approx(by_line["rougeLsum"].fmeasure, abs=1e-8)


def _add_one_where_ngrams_exist(p_n: list[Fraction], **kwargs: Any) -> list[Any]:
    """WeKnora's smoothing expressed as an NLTK smoothing function."""
    hyp_len = kwargs["hyp_len"]
    return [
        Fraction(p.numerator + 1, p.denominator + 1) if hyp_len > order else sys.float_info.min
        for order, p in enumerate(p_n)
    ]


def test_weknora_bleu_is_nltk_bleu_with_add_one_smoothing() -> None:
    # NLTK returns 0 before smoothing when no unigram matches, so compare the cases
    # where one does; WeKnora's zero for an order without n-grams is NLTK's
    # sys.float_info.min (0 to 1e-9).
    pairs = [pair for pair in _text_pairs(seed=3, count=2000) if _shares_a_word(*pair)]
    assert len(pairs) > 800
    rows = score([MetricInput([], [], h, r) for h, r in pairs], metrics=("bleu1", "bleu2", "bleu4"))
    for (hypothesis, reference), row in zip(pairs, rows, strict=True):
        expected = _nltk_bleu(hypothesis, reference, _add_one_where_ngrams_exist)
        for name, value in expected.items():
            assert row[name] == pytest.approx(value, abs=EXACT), (name, hypothesis, reference)


def _shares_a_word(hypothesis: str, reference: str) -> bool:
    return bool({t.lower() for t in words(hypothesis)} & {t.lower() for t in words(reference)})


def _pairs_iter(pairs: list[tuple[str, str]]) -> Iterator[MetricInput]:
    for hypothesis, reference in pairs:
        yield MetricInput([], [], hypothesis, reference)


def test_profiles_agree_on_bleu_when_every_ngram_order_matches() -> None:
    # Both profiles share tokens, brevity penalty and combination; only the
    # precision estimate differs. A hypothesis equal to its reference scores 1 in both.
    pairs = [(reference, reference) for _, reference in _text_pairs(seed=8, count=300)]
    standard = score(_pairs_iter(pairs), profile="standard", metrics=("bleu1", "bleu4"))
    weknora = score(_pairs_iter(pairs), metrics=("bleu1", "bleu4"))
    for (text, _), ours, theirs in zip(pairs, weknora, standard, strict=True):
        length = len(words(text))
        if length >= 4:
            assert ours == theirs == {"bleu1": 1.0, "bleu4": 1.0}
