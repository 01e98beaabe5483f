"""BLEU-1/2/4, ROUGE-1/2 and ROUGE-L of one generated answer against its reference.

Both profiles read the same tokens (sentences of tokens from the tokenizer):

* ``weknora``: WeKnora's definitions with its v0.9.0 fixes — add-one smoothed BLEU
  where any zero precision gives 0, ROUGE-N over distinct n-grams, summary-level
  union-LCS ROUGE-L over distinct words, ``F1 = 2PR / (P + R + 1e-8)``.
* ``standard``: NLTK ``sentence_bleu`` without smoothing; Google ``rouge-score``
  ``rouge1``/``rouge2`` (multiset counts) and ``rougeL`` (LCS of the whole token
  sequences), plain F1.

BLEU lowercases tokens, ROUGE does not. The functions return the six values in
:data:`~pytest_ragev.core.types.GENERATION_METRICS` order.

How it stays fast (every count is exact; the tests compare with the plain
definitions and with rouge-score / NLTK): each text is read once into a
:class:`_Text`; n-gram overlaps come from bit sets of reference positions, not from
n-gram tuples: for each hypothesis token the bit set of the reference positions
holding the same token, and for longer n-grams ``m_n[i] = m_(n-1)[i] &
(m_1[i+n-1] >> (n-1))``, a few C-level ``map`` passes over small integers. A
nonzero item names one shared n-gram (its reference count is the popcount, its
hypothesis count the number of equal items), so clipping is a ``set`` or
``Counter`` of integers. The same bit sets feed the bit-parallel LCS. In the
``weknora`` profile, when lowercasing changes no token of either text, BLEU reuses
ROUGE's word and bigram sets instead (Chinese text, lowercase English).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache
from itertools import chain, pairwise, product, repeat
from operator import and_, rshift

from pytest_ragev.metrics._lcs import lcs_length_of_matches, lcs_tokens, match_masks

__all__ = [
    "EMPTY_SCORES",
    "GenerationScores",
    "score_standard",
    "score_texts",
    "score_weknora",
    "standard_pair",
    "standard_text",
    "weknora_pair",
    "weknora_text",
]

#: bleu1, bleu2, bleu4, rouge1, rouge2, rougel.
GenerationScores = tuple[float, float, float, float, float, float]

Sentences = Sequence[Sequence[str]]


def _flatten(sentences: Sentences) -> tuple[str, ...]:
    if len(sentences) == 1:
        only = sentences[0]
        return only if isinstance(only, tuple) else tuple(only)
    return tuple(chain.from_iterable(sentences))


def _matches(hypothesis: Sequence[str], reference_masks: dict[str, int]) -> list[int]:
    """For each hypothesis token, the bit set of the reference positions holding it."""
    return list(map(reference_masks.get, hypothesis, repeat(0)))


def _longer(matches: list[int], unigram_matches: list[int], n: int) -> list[int]:
    """The n-gram matches from the (n-1)-gram ones: bit ``j`` of item ``i`` is set
    when the n-grams at hypothesis position ``i`` and reference position ``j`` are equal."""
    return list(map(and_, matches, map(rshift, unigram_matches[n - 1 :], repeat(n - 1))))


def _clipped(matches: list[int], may_repeat: bool = True) -> tuple[int, bool]:
    """(Σ over the hypothesis's distinct n-grams of min(count in it, count in the
    reference), whether some shared n-gram repeats in the hypothesis).

    ``matches`` are n-gram matches (:func:`_longer`). Equal n-grams have equal
    items, different n-grams disjoint ones (a reference position holds one n-gram),
    so a nonzero item names an n-gram shared with the reference, the number of
    hypothesis items equal to it is its hypothesis count and its popcount its
    reference count. ``may_repeat=False`` says no shared (n-1)-gram repeats in the
    hypothesis, so no shared n-gram can.
    """
    hits = len(matches) - matches.count(0)
    if hits < 2:
        return hits, False
    if may_repeat:
        distinct = set(matches)
        if len(distinct) - (0 in distinct) < hits:
            counts = Counter(matches)
            # Item 0 (no match) adds min(count, popcount(0)) = 0.
            return sum(map(min, counts.values(), map(int.bit_count, counts))), True
    return hits, False  # each shared n-gram occurs once in the hypothesis: clips to 1


def _clipped_words(matches: list[int]) -> int:
    """The unigram clip count of :func:`_clipped`, where some shared word usually repeats."""
    counts = Counter(matches)
    return sum(map(min, counts.values(), map(int.bit_count, counts)))


def _bleu_clipped(matches: list[int]) -> list[int]:
    """Clipped n-gram matches for n = 1..4, given the unigram ``matches``."""
    first = _clipped_words(matches)
    if not first:
        return [0, 0, 0, 0]  # no n-gram matched, so no longer one can
    bigrams = _longer(matches, matches, 2)
    second, repeats = _clipped(bigrams)
    if not second:
        return [first, 0, 0, 0]
    trigrams = _longer(bigrams, matches, 3)
    third, repeats = _clipped(trigrams, repeats)
    if not third:
        return [first, second, 0, 0]
    return [first, second, third, _clipped(_longer(trigrams, matches, 4), repeats)[0]]


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


def _every_lcs_holds(first: Sequence[str], second: Sequence[str], shared: set[str]) -> bool:
    """Whether every LCS of ``first`` and ``second`` holds every token of ``shared``
    (the tokens both hold), so that no table is needed to know the LCS's tokens.

    No other token can be in a common subsequence, so the sequences reduced to the
    ``shared`` tokens have the same LCSs. When one reduced sequence is a subsequence
    of the other (equal ones included), it is the only LCS, and it holds every shared
    token. Between a reference and a close paraphrase this is the usual case: a
    repeated word dropped or added on one side breaks equal order, not this.
    """
    keep = shared.__contains__
    shorter, longer = list(filter(keep, first)), list(filter(keep, second))
    if len(shorter) > len(longer):
        shorter, longer = longer, shorter
    if len(shorter) == len(longer):
        return shorter == longer
    remaining = iter(longer)
    # ``token in remaining`` advances the iterator past the first match: a greedy
    # subsequence test in C.
    return all(token in remaining for token in shorter)


@lru_cache(maxsize=256)
def _sentence_pairs(references: int, hypotheses: int) -> tuple[tuple[int, int], ...]:
    """The (reference, hypothesis) sentence index pairs in the order ROUGE-L visits them.

    The union does not depend on the order. Matching sentences (the k-th of each)
    come first: they give most of it, and a later pair whose shared tokens are all in
    the union already is skipped without a table.
    """
    every = list(product(range(references), range(hypotheses)))
    return tuple(sorted(every, key=lambda pair: pair[0] != pair[1]))


def _rougel_weknora(
    hypothesis: Sentences,
    reference: Sentences,
    hypothesis_words: set[str],
    reference_words: set[str],
    shared: set[str],
) -> float:
    """Summary-level union LCS over distinct words (the spec's ``rougel``);
    ``shared`` = ``hypothesis_words & reference_words``, not empty."""
    union: set[str] = set()
    masks: dict[int, dict[str, int]] = {}
    order = _sentence_pairs(len(reference), len(hypothesis))
    sentence_shared: list[set[str] | None] = [None] * len(reference)
    for reference_position, position in order:
        reference_sentence = reference[reference_position]
        ref_shared = sentence_shared[reference_position]
        if ref_shared is None:
            ref_shared = sentence_shared[reference_position] = shared.intersection(
                reference_sentence
            )
        if not ref_shared:
            continue
        hypothesis_sentence = hypothesis[position]
        common = ref_shared.intersection(hypothesis_sentence)
        # An LCS only holds tokens both sentences share: when those are all in
        # the union already, this pair cannot add anything.
        if not common or common <= union:
            continue
        if len(common) == 1 or _every_lcs_holds(reference_sentence, hypothesis_sentence, common):
            union |= common
        else:
            sentence_masks = masks.get(position)
            if sentence_masks is None:
                sentence_masks = masks[position] = match_masks(hypothesis_sentence)
            union.update(lcs_tokens(reference_sentence, hypothesis_sentence, sentence_masks))
        if len(union) == len(shared):
            break
    precision = len(union) / len(hypothesis_words)
    recall = len(union) / len(reference_words)
    return _f1_weknora(precision, recall)


class _Text:
    """What the metrics read of one text, computed once per text (and per batch when
    the text occurs more than once in it); the reference's position masks are
    computed on first use."""

    __slots__ = (
        "bigrams",
        "length",
        "lower",
        "lower_masks",
        "masks",
        "sentences",
        "tokens",
        "words",
    )

    def __init__(self, sentences: Sentences, distinct: bool) -> None:
        tokens = _flatten(sentences)
        lower = tuple(map(str.lower, tokens))
        self.sentences = sentences
        self.tokens = tokens
        self.length = len(tokens)
        # BLEU reads lowercased tokens; when that changes none, it shares ROUGE's work.
        self.lower = tokens if lower == tokens else lower
        self.masks: dict[str, int] | None = None
        self.lower_masks: dict[str, int] | None = None
        if distinct:  # the weknora profile's distinct words and bigrams
            self.words: set[str] = set(tokens)
            self.bigrams: set[tuple[str, str]] = set(pairwise(tokens))

    def reference_masks(self) -> dict[str, int]:
        masks = self.masks
        if masks is None:
            masks = self.masks = match_masks(self.tokens)
        return masks

    def reference_lower_masks(self) -> dict[str, int]:
        if self.lower is self.tokens:
            return self.reference_masks()
        masks = self.lower_masks
        if masks is None:
            masks = self.lower_masks = match_masks(self.lower)
        return masks


def _ngrams(tokens: tuple[str, ...], n: int) -> Iterable[tuple[str, ...]]:
    """The n-grams of ``tokens`` in order, 2 <= n <= 4."""
    if n == 2:
        return pairwise(tokens)
    if n == 3:
        return zip(tokens, tokens[1:], tokens[2:], strict=False)
    return zip(tokens, tokens[1:], tokens[2:], tokens[3:], strict=False)


def _bleu_clipped_sets(hypothesis: _Text, reference: _Text, shared_words: set[str]) -> list[int]:
    """:func:`_bleu_clipped` from n-gram sets, for weknora texts whose lowercasing
    changes no token (their word and bigram sets serve BLEU as they are): when one
    side has no repeated n-gram, every shared one clips to 1 and no count is needed."""
    hyp, ref = hypothesis.tokens, reference.tokens
    clipped = [0, 0, 0, 0]
    common: AbstractSet[Hashable] = shared_words
    for n in (1, 2, 3, 4):
        if n == 2:
            hyp_set: AbstractSet[Hashable] = hypothesis.bigrams
            ref_set: AbstractSet[Hashable] = reference.bigrams
            common = hyp_set & ref_set
        elif n > 2:
            hyp_set, ref_set = set(_ngrams(hyp, n)), set(_ngrams(ref, n))
            common = hyp_set & ref_set
        else:
            hyp_set, ref_set = hypothesis.words, reference.words
        if not common:
            break  # no n-gram matched, so no longer one can
        if len(hyp_set) == len(hyp) - n + 1 or len(ref_set) == len(ref) - n + 1:
            clipped[n - 1] = len(common)
        else:
            hyp_counts: Counter[Hashable] = Counter(hyp if n == 1 else _ngrams(hyp, n))
            ref_counts: Counter[Hashable] = Counter(ref if n == 1 else _ngrams(ref, n))
            clipped[n - 1] = sum(
                map(min, map(hyp_counts.__getitem__, common), map(ref_counts.__getitem__, common))
            )
    return clipped


def weknora_text(sentences: Sentences) -> _Text:
    """Everything :func:`weknora_pair` needs of one text."""
    return _Text(sentences, True)


def standard_text(sentences: Sentences) -> _Text:
    """Everything :func:`standard_pair` needs of one text."""
    return _Text(sentences, False)


def weknora_pair(hypothesis: _Text, reference: _Text) -> GenerationScores:
    """The six ``weknora`` metrics of a pair of :func:`weknora_text` results."""
    hyp_words = hypothesis.words
    ref_words = reference.words
    shared = hyp_words & ref_words
    shared_words = len(shared)
    if shared_words:
        rouge1 = _f1_weknora(shared_words / len(hyp_words), shared_words / len(ref_words))
        hyp_bigrams = hypothesis.bigrams
        ref_bigrams = reference.bigrams
        shared_bigrams = len(hyp_bigrams & ref_bigrams)
        rouge2 = (
            _f1_weknora(shared_bigrams / len(hyp_bigrams), shared_bigrams / len(ref_bigrams))
            if shared_bigrams
            else 0.0
        )
        rougel = _rougel_weknora(
            hypothesis.sentences, reference.sentences, hyp_words, ref_words, shared
        )
    else:
        rouge1 = rouge2 = rougel = 0.0
    if hypothesis.lower is hypothesis.tokens and reference.lower is reference.tokens:
        # Lowercasing changes nothing: BLEU shares ROUGE's word and bigram sets.
        clipped = _bleu_clipped_sets(hypothesis, reference, shared)
    else:
        clipped = _bleu_clipped(_matches(hypothesis.lower, reference.reference_lower_masks()))
    bleu1, bleu2, bleu4 = _bleu_weknora(clipped, hypothesis.length, reference.length)
    return (bleu1, bleu2, bleu4, rouge1, rouge2, rougel)


def standard_pair(hypothesis: _Text, reference: _Text) -> GenerationScores:
    """The six ``standard`` metrics of a pair of :func:`standard_text` results."""
    hyp_length = hypothesis.length
    ref_length = reference.length
    matches = _matches(hypothesis.tokens, reference.reference_masks())
    matched_words = _clipped_words(matches)
    if matched_words:
        bigram_matches = _longer(matches, matches, 2)
        rouge1 = _rouge_n_standard(matched_words, hyp_length, ref_length)
        rouge2 = _rouge_n_standard(_clipped(bigram_matches)[0], hyp_length - 1, ref_length - 1)
        lcs = lcs_length_of_matches(matches, ref_length)
        rougel = _f1_standard(lcs / hyp_length, lcs / ref_length)
    else:
        rouge1 = rouge2 = rougel = 0.0
    if hypothesis.lower is not hypothesis.tokens or reference.lower is not reference.tokens:
        matches = _matches(hypothesis.lower, reference.reference_lower_masks())
    clipped = _bleu_clipped(matches)
    bleu1, bleu2, bleu4 = _bleu_standard(clipped, hyp_length, ref_length)
    return (bleu1, bleu2, bleu4, rouge1, rouge2, rougel)


def score_weknora(hypothesis: Sentences, reference: Sentences) -> GenerationScores:
    """The six generation metrics of the ``weknora`` profile."""
    return weknora_pair(weknora_text(hypothesis), weknora_text(reference))


def score_standard(hypothesis: Sentences, reference: Sentences) -> GenerationScores:
    """The six generation metrics of the ``standard`` profile."""
    return standard_pair(standard_text(hypothesis), standard_text(reference))


#: The six metrics of an answer without tokens, whatever the reference: 0 everywhere.
EMPTY_SCORES: GenerationScores = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def score_texts(
    hypotheses: Sequence[str],
    references: Sequence[str],
    segment: Callable[[str], Sentences],
    profile: str,
) -> list[GenerationScores]:
    """The six metrics of each (hypothesis, reference) pair of texts, in order.

    Each text is read once per pair (:func:`weknora_text` / :func:`standard_text`);
    a text that occurs more than once in the batch (a reference answer scored against
    several pipelines' answers) is read once for the whole batch. Only those are kept,
    so memory stays that of one pair for batches of distinct texts.

    Two kinds of pair cost (almost) nothing: an empty hypothesis scores
    :data:`EMPTY_SCORES` without being read, when ``segment("")`` has no token (true of
    every built-in tokenizer; a custom one that gives tokens for ``""`` is read as
    usual), and a pair of identical texts is scored once per distinct text (its
    scores depend on the text alone).
    """
    read: Callable[[Sentences], _Text] = weknora_text if profile == "weknora" else standard_text
    pair: Callable[[_Text, _Text], GenerationScores] = (
        weknora_pair if profile == "weknora" else standard_pair
    )
    empty_is_zero = "" in hypotheses and not any(segment(""))
    if empty_is_zero and not any(hypotheses):  # retrieval-only inputs
        return [EMPTY_SCORES] * len(hypotheses)
    if hypotheses == references:
        # Every answer equals its reference: score each distinct text once.
        scores = {
            text: EMPTY_SCORES if not text and empty_is_zero else _same(read(segment(text)), pair)
            for text in dict.fromkeys(hypotheses)
        }
        return list(map(scores.__getitem__, hypotheses))
    occurrences = Counter(hypotheses)
    occurrences.update(references)
    repeated = {text for text, count in occurrences.items() if count > 1}
    memo: dict[str, _Text] = {}
    identical: dict[str, GenerationScores] = {}
    rows: list[GenerationScores] = []
    append = rows.append
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        if not hypothesis and empty_is_zero:
            append(EMPTY_SCORES)
            continue
        if hypothesis == reference:
            known = identical.get(hypothesis)
            if known is None:
                cached = memo.get(hypothesis)
                text = read(segment(hypothesis)) if cached is None else cached
                known = identical[hypothesis] = _same(text, pair)
            append(known)
            continue
        if hypothesis in repeated:
            hyp = memo.get(hypothesis)
            if hyp is None:
                hyp = memo[hypothesis] = read(segment(hypothesis))
        else:
            hyp = read(segment(hypothesis))
        if reference in repeated:
            ref = memo.get(reference)
            if ref is None:
                ref = memo[reference] = read(segment(reference))
        else:
            ref = read(segment(reference))
        append(pair(hyp, ref))
    return rows


def _same(text: _Text, pair: Callable[[_Text, _Text], GenerationScores]) -> GenerationScores:
    """The scores of a text against itself (one reading serves both sides)."""
    return pair(text, text)


def _rouge_n_standard(overlap: int, hypothesis_count: int, reference_count: int) -> float:
    return _f1_standard(overlap / max(hypothesis_count, 1), overlap / max(reference_count, 1))
