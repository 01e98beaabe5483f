"""BLEU-1/2/4, ROUGE-1/2 and ROUGE-L of one generated answer against its reference.

Both profiles read the same tokens (sentences of tokens from the tokenizer):

* ``weknora``: WeKnora's definitions with its v0.9.0 fixes — add-one smoothed BLEU
  where any zero precision gives 0, ROUGE-N over distinct n-grams, summary-level
  union-LCS ROUGE-L over distinct words, ``F1 = 2PR / (P + R + 1e-8)``.
* ``standard``: NLTK ``sentence_bleu`` without smoothing; Google ``rouge-score``
  ``rouge1``/``rouge2`` (multiset counts) and ``rougeL`` (LCS of the whole token
  sequences), plain F1.

BLEU lowercases tokens, ROUGE does not. The functions return the six values in
:data:`~pytest_ragev._types.GENERATION_METRICS` order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import chain, pairwise

from pytest_ragev.metrics._lcs import lcs_length, lcs_tokens

__all__ = ["GenerationScores", "score_standard", "score_weknora"]

#: bleu1, bleu2, bleu4, rouge1, rouge2, rougel.
GenerationScores = tuple[float, float, float, float, float, float]

Sentences = Sequence[Sequence[str]]

_BLEU_WEIGHTS: tuple[tuple[float, ...], ...] = (
    (1.0, 0.0, 0.0, 0.0),
    (0.5, 0.5, 0.0, 0.0),
    (0.25, 0.25, 0.25, 0.25),
)


def _flatten(sentences: Sentences) -> tuple[str, ...]:
    if len(sentences) == 1:
        return tuple(sentences[0])
    return tuple(chain.from_iterable(sentences))


def _ngrams(tokens: tuple[str, ...], n: int) -> Counter[Hashable]:
    if n == 1:
        return Counter(tokens)
    return Counter(zip(*(tokens[offset:] for offset in range(n)), strict=False))


def _clipped(candidate: Counter[Hashable], reference: Counter[Hashable]) -> int:
    """Σ over n-grams of min(candidate count, reference count)."""
    if len(reference) < len(candidate):
        candidate, reference = reference, candidate
    lookup = reference.get
    total = 0
    for gram, count in candidate.items():
        other = lookup(gram)
        if other:
            total += count if count < other else other
    return total


def _bleu_counts(
    candidate: tuple[str, ...],
    reference: tuple[str, ...],
    unigram_pair: tuple[Counter[Hashable], Counter[Hashable]] | None = None,
    bigram_pair: tuple[Counter[Hashable], Counter[Hashable]] | None = None,
) -> list[int]:
    """Clipped n-gram matches for n = 1..4 (lowercased tokens)."""
    clipped: list[int] = []
    for n in (1, 2, 3, 4):
        if len(candidate) < n or len(reference) < n or (clipped and clipped[-1] == 0):
            # No (n-1)-gram matched, so no n-gram can: skip counting.
            clipped.append(0)
            continue
        if n == 1 and unigram_pair is not None:
            pair = unigram_pair
        elif n == 2 and bigram_pair is not None:
            pair = bigram_pair
        else:
            pair = (_ngrams(candidate, n), _ngrams(reference, n))
        clipped.append(_clipped(*pair))
    return clipped


def _bleu_weknora(clipped: list[int], candidate_length: int, reference_length: int) -> list[float]:
    # p_n = (clipped + 1) / (total + 1), or 0 when the candidate has no n-gram.
    precisions = [
        (clipped[n] + 1) / (candidate_length - n + 1) if candidate_length > n else 0.0
        for n in range(4)
    ]
    return _bleu_combine(precisions, candidate_length, reference_length, standard=False)


def _bleu_standard(clipped: list[int], candidate_length: int, reference_length: int) -> list[float]:
    # NLTK: p_n = clipped / max(1, total); no unigram match (or no candidate) gives 0.
    if candidate_length == 0 or clipped[0] == 0:
        return [0.0, 0.0, 0.0]
    precisions = [clipped[n] / max(1, candidate_length - n) for n in range(4)]
    return _bleu_combine(precisions, candidate_length, reference_length, standard=True)


def _bleu_combine(
    precisions: list[float], candidate_length: int, reference_length: int, *, standard: bool
) -> list[float]:
    if candidate_length > reference_length:
        brevity = 1.0
    else:
        brevity = math.exp(1 - reference_length / candidate_length) if candidate_length else 0.0
    scores: list[float] = []
    for weights in _BLEU_WEIGHTS:
        if any(weight > 0 and p == 0 for weight, p in zip(weights, precisions, strict=True)):
            # A zero precision with positive weight makes the geometric mean 0 (v0.9.0
            # fix; NLTK without smoothing returns ~1e-77 and warns, i.e. 0 to 1e-9).
            scores.append(0.0)
            continue
        terms = [
            weight * math.log(p) for weight, p in zip(weights, precisions, strict=True) if weight
        ]
        # NLTK sums with fsum; WeKnora adds in order. Same digits to ~1 ulp.
        log_mean = math.fsum(terms) if standard else sum(terms)
        scores.append(brevity * math.exp(log_mean))
    return scores


def _f1_weknora(precision: float, recall: float) -> float:
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def _f1_standard(precision: float, recall: float) -> float:
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def _rougel_weknora(
    hypothesis: Sentences,
    reference: Sentences,
    hypothesis_words: set[str],
    reference_words: set[str],
) -> float:
    """Summary-level union LCS over distinct words (the spec's ``rougel``)."""
    if not hypothesis_words or not reference_words:
        return 0.0
    shared = hypothesis_words & reference_words
    if not shared:
        return 0.0
    union: set[str] = set()
    for reference_sentence in reference:
        sentence_shared = shared.intersection(reference_sentence)
        if not sentence_shared:
            continue
        for hypothesis_sentence in hypothesis:
            common = sentence_shared.intersection(hypothesis_sentence)
            # An LCS only holds tokens both sentences share: when those are all in
            # the union already, this pair cannot add anything.
            if common and not common <= union:
                union.update(lcs_tokens(reference_sentence, hypothesis_sentence))
        if len(union) == len(shared):
            break
    precision = len(union) / len(hypothesis_words)
    recall = len(union) / len(reference_words)
    return _f1_weknora(precision, recall)


def score_weknora(hypothesis: Sentences, reference: Sentences) -> GenerationScores:
    """The six generation metrics of the ``weknora`` profile."""
    hyp = _flatten(hypothesis)
    ref = _flatten(reference)
    hyp_lower = tuple(map(str.lower, hyp))
    ref_lower = tuple(map(str.lower, ref))

    hyp_words, ref_words = set(hyp), set(ref)
    shared_words = len(hyp_words & ref_words)
    if len(hyp) > 1 and len(ref) > 1:
        hyp_bigrams = set(pairwise(hyp))
        ref_bigrams = set(pairwise(ref))
        shared_bigrams = len(hyp_bigrams & ref_bigrams)
    else:
        hyp_bigrams, ref_bigrams, shared_bigrams = set(), set(), 0

    rouge1 = _f1_weknora(
        shared_words / len(hyp_words) if hyp_words else 0.0,
        shared_words / len(ref_words) if ref_words else 0.0,
    )
    rouge2 = _f1_weknora(
        shared_bigrams / len(hyp_bigrams) if hyp_bigrams else 0.0,
        shared_bigrams / len(ref_bigrams) if ref_bigrams else 0.0,
    )
    rougel = _rougel_weknora(hypothesis, reference, hyp_words, ref_words)

    clipped = _bleu_counts(hyp_lower, ref_lower)
    bleu1, bleu2, bleu4 = _bleu_weknora(clipped, len(hyp), len(ref))
    return (bleu1, bleu2, bleu4, rouge1, rouge2, rougel)


def score_standard(hypothesis: Sentences, reference: Sentences) -> GenerationScores:
    """The six generation metrics of the ``standard`` profile."""
    hyp = _flatten(hypothesis)
    ref = _flatten(reference)
    hyp_lower = tuple(map(str.lower, hyp))
    ref_lower = tuple(map(str.lower, ref))

    unigrams = (_ngrams(hyp, 1), _ngrams(ref, 1))
    bigrams = (_ngrams(hyp, 2), _ngrams(ref, 2))
    rouge1 = _rouge_n_standard(_clipped(*unigrams), len(hyp), len(ref))
    rouge2 = _rouge_n_standard(_clipped(*bigrams), max(0, len(hyp) - 1), max(0, len(ref) - 1))
    lcs = lcs_length(ref, hyp)
    rougel = _f1_standard(lcs / len(hyp), lcs / len(ref)) if hyp and ref else 0.0

    # Lowercasing changes nothing in most tokens: reuse the ROUGE counters then.
    if hyp_lower == hyp and ref_lower == ref:
        clipped = _bleu_counts(hyp_lower, ref_lower, unigrams, bigrams)
    else:
        clipped = _bleu_counts(hyp_lower, ref_lower)
    bleu1, bleu2, bleu4 = _bleu_standard(clipped, len(hyp), len(ref))
    return (bleu1, bleu2, bleu4, rouge1, rouge2, rougel)


def _rouge_n_standard(overlap: int, hypothesis_count: int, reference_count: int) -> float:
    return _f1_standard(overlap / max(hypothesis_count, 1), overlap / max(reference_count, 1))
