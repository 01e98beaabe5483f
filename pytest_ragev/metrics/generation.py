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
from collections.abc import Hashable, Iterable, Sequence
from itertools import chain, pairwise

from pytest_ragev.metrics._lcs import lcs_length, lcs_tokens, match_masks

__all__ = ["GenerationScores", "score_standard", "score_weknora"]

#: bleu1, bleu2, bleu4, rouge1, rouge2, rougel.
GenerationScores = tuple[float, float, float, float, float, float]

Sentences = Sequence[Sequence[str]]


def _flatten(sentences: Sentences) -> tuple[str, ...]:
    if len(sentences) == 1:
        only = sentences[0]
        return only if isinstance(only, tuple) else tuple(only)
    return tuple(chain.from_iterable(sentences))


def _ngrams(tokens: tuple[str, ...], n: int) -> Iterable[Hashable]:
    """The n-grams of ``tokens`` in order (the tokens themselves for n = 1), n <= 4."""
    if n == 1:
        return tokens
    if n == 2:
        return pairwise(tokens)
    if n == 3:
        return zip(tokens, tokens[1:], tokens[2:], strict=False)
    return zip(tokens, tokens[1:], tokens[2:], tokens[3:], strict=False)


def _clipped(
    candidate: tuple[str, ...],
    reference: tuple[str, ...],
    n: int,
    candidate_set: set[Hashable] | None = None,
    reference_set: set[Hashable] | None = None,
) -> int:
    """Σ over distinct n-grams of min(count in candidate, count in reference).

    The n-gram sets may be passed when the caller has them already.
    """
    if candidate_set is None:
        candidate_set = set(_ngrams(candidate, n))
    if reference_set is None:
        reference_set = set(_ngrams(reference, n))
    common = candidate_set & reference_set
    if not common:
        return 0
    if len(candidate_set) == len(candidate) - n + 1 or len(reference_set) == len(reference) - n + 1:
        # One side has no repeated n-gram: every shared n-gram clips to exactly 1.
        return len(common)
    candidate_counts = Counter(_ngrams(candidate, n))
    reference_counts = Counter(_ngrams(reference, n))
    # map() keeps the per-n-gram work in C (no generator frame per n-gram).
    return sum(
        map(
            min,
            map(candidate_counts.__getitem__, common),
            map(reference_counts.__getitem__, common),
        )
    )


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
        elif n <= len(known_sets):
            clipped.append(_clipped(candidate, reference, n, *known_sets[n - 1]))
        else:
            clipped.append(_clipped(candidate, reference, n))
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
    """BLEU-1, -2, -4 = BP * exp(sum of w_n * ln p_n); 0 when a weighted p_n is 0.

    A zero precision with positive weight makes the geometric mean 0 (WeKnora's
    v0.9.0 fix; NLTK without smoothing returns ~1e-77 and warns, i.e. 0 to 1e-9).
    """
    if candidate_length > reference_length:
        brevity = 1.0
    elif candidate_length:
        brevity = math.exp(1 - reference_length / candidate_length)
    else:
        brevity = 0.0
    p1, p2, p3, p4 = precisions
    if p1 == 0:
        return [0.0, 0.0, 0.0]
    log1 = math.log(p1)
    bleu1 = brevity * math.exp(log1)
    if p2 == 0:
        return [bleu1, 0.0, 0.0]
    log2 = math.log(p2)
    bleu2 = brevity * math.exp(0.5 * log1 + 0.5 * log2)
    if p3 == 0 or p4 == 0:
        return [bleu1, bleu2, 0.0]
    terms = [0.25 * log1, 0.25 * log2, 0.25 * math.log(p3), 0.25 * math.log(p4)]
    # NLTK sums with fsum, WeKnora in order: the same digits to ~1 ulp.
    log_mean = math.fsum(terms) if standard else terms[0] + terms[1] + terms[2] + terms[3]
    return [bleu1, bleu2, brevity * math.exp(log_mean)]


def _f1_weknora(precision: float, recall: float) -> float:
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def _f1_standard(precision: float, recall: float) -> float:
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def _same_order(first: Sequence[str], second: Sequence[str], shared: set[Hashable]) -> bool:
    """Whether both sequences, reduced to their ``shared`` tokens, are equal.

    The reduced sequence is a common subsequence of both; when they are equal it is
    the longest one, so any LCS holds exactly the shared tokens.
    """
    keep = shared.__contains__
    return list(filter(keep, first)) == list(filter(keep, second))


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
    masks: dict[int, dict[str, int]] = {}
    for reference_sentence in reference:
        sentence_shared = shared.intersection(reference_sentence)
        if not sentence_shared:
            continue
        for position, hypothesis_sentence in enumerate(hypothesis):
            common = sentence_shared.intersection(hypothesis_sentence)
            # An LCS only holds tokens both sentences share: when those are all in
            # the union already, this pair cannot add anything.
            if not common or common <= union:
                continue
            if len(common) == 1 or _same_order(reference_sentence, hypothesis_sentence, common):
                # Then every LCS uses all shared tokens: no table needed.
                union |= common
                continue
            sentence_masks = masks.get(position)
            if sentence_masks is None:
                sentence_masks = masks[position] = match_masks(hypothesis_sentence)
            union.update(lcs_tokens(reference_sentence, hypothesis_sentence, sentence_masks))
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
    hyp_bigrams: set[Hashable] = set(pairwise(hyp))
    ref_bigrams: set[Hashable] = set(pairwise(ref))

    matched_words = _clipped(hyp, ref, 1, hyp_words, ref_words)
    matched_bigrams = _clipped(hyp, ref, 2, hyp_bigrams, ref_bigrams) if matched_words else 0
    rouge1 = _rouge_n_standard(matched_words, len(hyp), len(ref))
    rouge2 = _rouge_n_standard(matched_bigrams, max(len(hyp) - 1, 0), max(len(ref) - 1, 0))
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
