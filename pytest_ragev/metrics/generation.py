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


def _ngrams(tokens: tuple[str, ...], n: int) -> Sequence[Hashable]:
    """The n-grams of ``tokens`` in order (tokens themselves for n = 1), n <= 4."""
    if n == 1:
        return tokens
    if n == 2:
        return list(pairwise(tokens))
    if n == 3:
        return list(zip(tokens, tokens[1:], tokens[2:], strict=False))
    return list(zip(tokens, tokens[1:], tokens[2:], tokens[3:], strict=False))


def _clipped(
    candidate: Sequence[Hashable],
    reference: Sequence[Hashable],
    candidate_set: set[Hashable] | None = None,
    reference_set: set[Hashable] | None = None,
) -> int:
    """Σ over distinct n-grams of min(count in candidate, count in reference)."""
    if candidate_set is None:
        candidate_set = set(candidate)
    if reference_set is None:
        reference_set = set(reference)
    common = candidate_set & reference_set
    if not common:
        return 0
    if len(candidate_set) == len(candidate) or len(reference_set) == len(reference):
        # One side has no repeated n-gram: every shared n-gram clips to exactly 1.
        return len(common)
    candidate_counts = Counter(candidate)
    reference_counts = Counter(reference)
    return sum(min(candidate_counts[gram], reference_counts[gram]) for gram in common)


def _bleu_counts(
    candidate: tuple[str, ...],
    reference: tuple[str, ...],
    known_sets: Sequence[tuple[set[Hashable], set[Hashable]]] = (),
) -> list[int]:
    """Clipped n-gram matches for n = 1..4 (of lowercased tokens).

    ``known_sets`` may hold the (candidate, reference) n-gram sets for n = 1, 2, ...
    when the caller has them already.
    """
    clipped: list[int] = []
    for n in (1, 2, 3, 4):
        if len(candidate) < n or len(reference) < n or (clipped and clipped[-1] == 0):
            # No (n-1)-gram matched, so no n-gram can: skip counting.
            clipped.append(0)
            continue
        candidate_grams, reference_grams = _ngrams(candidate, n), _ngrams(reference, n)
        if n <= len(known_sets):
            clipped.append(_clipped(candidate_grams, reference_grams, *known_sets[n - 1]))
        else:
            clipped.append(_clipped(candidate_grams, reference_grams))
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
    hypothesis_words: set[Hashable],
    reference_words: set[Hashable],
) -> float:
    """Summary-level union LCS over distinct words (the spec's ``rougel``)."""
    if not hypothesis_words or not reference_words:
        return 0.0
    shared = hypothesis_words & reference_words
    if not shared:
        return 0.0
    union: set[Hashable] = set()
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
    hyp_words: set[Hashable] = set(hyp)
    ref_words: set[Hashable] = set(ref)
    hyp_bigrams: set[Hashable] = set(pairwise(hyp))
    ref_bigrams: set[Hashable] = set(pairwise(ref))
    shared_words = len(hyp_words & ref_words)
    shared_bigrams = len(hyp_bigrams & ref_bigrams) if shared_words else 0

    rouge1 = _f1_weknora(
        shared_words / len(hyp_words) if hyp_words else 0.0,
        shared_words / len(ref_words) if ref_words else 0.0,
    )
    rouge2 = _f1_weknora(
        shared_bigrams / len(hyp_bigrams) if hyp_bigrams else 0.0,
        shared_bigrams / len(ref_bigrams) if ref_bigrams else 0.0,
    )
    rougel = _rougel_weknora(hypothesis, reference, hyp_words, ref_words)

    clipped = _lowercase_bleu_counts(hyp, ref, [(hyp_words, ref_words), (hyp_bigrams, ref_bigrams)])
    bleu1, bleu2, bleu4 = _bleu_weknora(clipped, len(hyp), len(ref))
    return (bleu1, bleu2, bleu4, rouge1, rouge2, rougel)


def _lowercase_bleu_counts(
    hyp: tuple[str, ...],
    ref: tuple[str, ...],
    case_sensitive_sets: Sequence[tuple[set[Hashable], set[Hashable]]],
) -> list[int]:
    hyp_lower = tuple(map(str.lower, hyp))
    ref_lower = tuple(map(str.lower, ref))
    # Lowercasing changes no token in most texts: the ROUGE n-gram sets serve BLEU then.
    if hyp_lower == hyp and ref_lower == ref:
        return _bleu_counts(hyp, ref, case_sensitive_sets)
    return _bleu_counts(hyp_lower, ref_lower)


def score_standard(hypothesis: Sentences, reference: Sentences) -> GenerationScores:
    """The six generation metrics of the ``standard`` profile."""
    hyp = _flatten(hypothesis)
    ref = _flatten(reference)
    hyp_words: set[Hashable] = set(hyp)
    ref_words: set[Hashable] = set(ref)
    hyp_bigram_list, ref_bigram_list = _ngrams(hyp, 2), _ngrams(ref, 2)
    hyp_bigrams: set[Hashable] = set(hyp_bigram_list)
    ref_bigrams: set[Hashable] = set(ref_bigram_list)

    matched_words = _clipped(hyp, ref, hyp_words, ref_words)
    matched_bigrams = (
        _clipped(hyp_bigram_list, ref_bigram_list, hyp_bigrams, ref_bigrams) if matched_words else 0
    )
    rouge1 = _rouge_n_standard(matched_words, len(hyp), len(ref))
    rouge2 = _rouge_n_standard(matched_bigrams, len(hyp_bigram_list), len(ref_bigram_list))
    if matched_words:
        lcs = lcs_length(ref, hyp)
        rougel = _f1_standard(lcs / len(hyp), lcs / len(ref))
    else:
        rougel = 0.0

    clipped = _lowercase_bleu_counts(hyp, ref, [(hyp_words, ref_words), (hyp_bigrams, ref_bigrams)])
    bleu1, bleu2, bleu4 = _bleu_standard(clipped, len(hyp), len(ref))
    return (bleu1, bleu2, bleu4, rouge1, rouge2, rougel)


def _rouge_n_standard(overlap: int, hypothesis_count: int, reference_count: int) -> float:
    return _f1_standard(overlap / max(hypothesis_count, 1), overlap / max(reference_count, 1))
