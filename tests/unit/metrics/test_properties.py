"""Property tests of the metric engine (hypothesis)."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragev import GENERATION_METRICS, METRIC_NAMES, RETRIEVAL_METRICS, MetricInput, score
from pytest_ragev.metrics import generation, retrieval
from pytest_ragev.metrics._lcs import lcs_length, lcs_tokens
from pytest_ragev.metrics._validate import flat_ids as flat
from pytest_ragev.metrics.text import _tokenize_ascii, _tokenize_unicode

PROFILES = ("weknora", "standard")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

pids = st.integers(min_value=0, max_value=25)
id_lists = st.lists(pids, max_size=14)
gt_sets = st.lists(st.lists(pids, max_size=8), max_size=3)
# Words, punctuation of several scripts, Chinese, sentence ends, spaces and symbols.
text_pieces = st.sampled_from(
    ["the", "The", "cat", "sat", "a", "Hello,", "x_1", "42", "、", "，", "(", "—", "$", "é",
     "计算机", "操作系统", "我们", "天气", "很好", ".", "。", " ", " ", "!", "?"]
)  # fmt: skip
texts = st.lists(text_pieces, max_size=30).map("".join) | st.lists(text_pieces, max_size=30).map(
    " ".join
)


@st.composite
def metric_inputs(draw: st.DrawFn) -> MetricInput:
    return MetricInput(
        retrieval_gt=draw(gt_sets),
        retrieval_ids=draw(id_lists),
        generated_text=draw(texts),
        generated_gt=draw(texts),
    )


@FAST
@given(st.lists(metric_inputs(), max_size=6), st.sampled_from(PROFILES))
def test_every_value_is_a_float_in_unit_interval(inputs: list[MetricInput], profile: str) -> None:
    rows = score(inputs, profile=profile)
    assert len(rows) == len(inputs)
    for row in rows:
        assert list(row) == list(METRIC_NAMES)
        for value in row.values():
            assert type(value) is float
            assert math.isfinite(value)
            assert 0.0 <= value <= 1.0


@FAST
@given(
    st.lists(pids, min_size=1, max_size=20, unique=True), st.randoms(), st.sampled_from(PROFILES)
)
def test_perfect_retrieval_scores_one(gt: list[int], rng: random.Random, profile: str) -> None:
    ids = gt[:]
    rng.shuffle(ids)  # any order of exactly the relevant passages is perfect
    row = score([MetricInput([gt], ids, "", "")], profile=profile, metrics=RETRIEVAL_METRICS)[0]
    for name in RETRIEVAL_METRICS:
        assert math.isclose(row[name], 1.0, abs_tol=1e-12), name


@FAST
@given(st.lists(pids, min_size=1, max_size=10, unique=True), st.sampled_from(PROFILES))
def test_relevant_first_then_noise_keeps_recall_ndcg_mrr_map_at_one(
    gt: list[int], profile: str
) -> None:
    noise = [100 + index for index in range(5)]
    row = score([MetricInput([gt], gt + noise, "", "")], profile=profile)[0]
    for name in ("recall", "mrr", "map", "ndcg10"):
        assert math.isclose(row[name], 1.0, abs_tol=1e-12), name
    assert math.isclose(row["precision"], len(gt) / (len(gt) + len(noise)))


@FAST
@given(gt_sets, id_lists, st.randoms(), st.sampled_from(PROFILES))
def test_order_and_repeats_inside_ground_truth_do_not_matter(
    gt: list[list[int]], ids: list[int], rng: random.Random, profile: str
) -> None:
    shuffled = []
    for group in gt:
        copy = group + group[: rng.randint(0, len(group))]  # repeats too
        rng.shuffle(copy)
        shuffled.append(copy)
    rng.shuffle(shuffled)  # and the order of the sets
    before = score([MetricInput(gt, ids, "", "")], profile=profile, metrics=RETRIEVAL_METRICS)
    after = score([MetricInput(shuffled, ids, "", "")], profile=profile, metrics=RETRIEVAL_METRICS)
    for name in RETRIEVAL_METRICS:
        assert math.isclose(before[0][name], after[0][name], abs_tol=1e-12), name


@FAST
@given(gt_sets, id_lists, st.sampled_from(PROFILES))
def test_repeated_ids_count_once_at_their_best_rank(
    gt: list[list[int]], ids: list[int], profile: str
) -> None:
    distinct = list(dict.fromkeys(ids))
    rows = score(
        [MetricInput(gt, ids, "", ""), MetricInput(gt, distinct, "", "")],
        profile=profile,
        metrics=RETRIEVAL_METRICS,
    )
    assert rows[0] == rows[1]


@FAST
@given(
    st.lists(st.tuples(st.lists(pids, max_size=8), id_lists), max_size=12),
    st.sampled_from(PROFILES),
    st.randoms(),
)
def test_numpy_path_equals_reference_path(
    cases: list[tuple[list[int], list[int]]], profile: str, rng: random.Random
) -> None:
    grades = [{pid: float(rng.choice([0, 1, 2, 3])) for pid in gt} or None for gt, _ in cases]
    flat_ids = flat([ids for _, ids in cases])
    flat_gt = flat([gt for gt, _ in cases])
    assert flat_ids is not None and flat_gt is not None
    columns = retrieval.score_batch(flat_ids, flat_gt, profile=profile, grades=grades)
    for index, (gt, ids) in enumerate(cases):
        expected = retrieval.score_one(
            retrieval.dedupe(ids), [gt], profile=profile, grades=grades[index]
        )
        for column, value in zip(columns, expected, strict=True):
            assert math.isclose(float(column[index]), value, abs_tol=1e-12)


@FAST
@given(st.lists(metric_inputs(), max_size=8), st.sampled_from(PROFILES))
def test_a_batch_scores_like_its_samples_one_by_one(
    inputs: list[MetricInput], profile: str
) -> None:
    together = score(inputs, profile=profile)
    for sample, row in zip(inputs, together, strict=True):
        alone = score([sample], profile=profile)[0]
        for name in METRIC_NAMES:
            assert math.isclose(row[name], alone[name], abs_tol=1e-12), name


@FAST
@given(texts, texts, st.sampled_from(PROFILES))
def test_rouge_n_is_symmetric(first: str, second: str, profile: str) -> None:
    one, two = score(
        [MetricInput([], [], first, second), MetricInput([], [], second, first)],
        profile=profile,
        metrics=("rouge1", "rouge2", "rougel"),
    )
    names = ("rouge1", "rouge2", "rougel") if profile == "standard" else ("rouge1", "rouge2")
    for name in names:
        assert math.isclose(one[name], two[name], abs_tol=1e-12), name


@FAST
@given(st.lists(st.sampled_from(["a", "b", "c", "D", "e", "f"]), min_size=4, max_size=25))
def test_identical_texts(tokens: list[str]) -> None:
    text = " ".join(tokens)
    weknora, standard = (
        score([MetricInput([], [], text, text)], profile=profile)[0]
        for profile in ("weknora", "standard")
    )
    for name in ("bleu1", "bleu2", "bleu4"):
        assert standard[name] == 1.0
        assert math.isclose(weknora[name], 1.0, abs_tol=1e-12)
    for name in ("rouge1", "rouge2", "rougel"):
        assert standard[name] == 1.0
        assert math.isclose(weknora[name], 2 / (2 + 1e-8), abs_tol=1e-12)


def test_empty_inputs() -> None:
    assert score([]) == []
    assert score([], profile="standard", metrics=GENERATION_METRICS) == []
    for profile in PROFILES:
        for sample in (
            MetricInput([], [1, 2], "", "x"),
            MetricInput([[]], [1, 2], "", ""),
            MetricInput([[1]], [], "", "x y"),
        ):
            assert set(score([sample], profile=profile)[0].values()) == {0.0}


def test_empty_reference() -> None:
    # Only add-one smoothed BLEU-1 sees a non-empty answer against an empty reference:
    # p1 = (0 + 1) / (1 + 1) and no brevity penalty (c > r), as the definition says.
    weknora = score([MetricInput([], [], "x", "")])[0]
    assert weknora == {**dict.fromkeys(METRIC_NAMES, 0.0), "bleu1": 0.5}
    standard = score([MetricInput([], [], "x", "")], profile="standard")[0]
    assert set(standard.values()) == {0.0}


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_ascii_fast_path_equals_the_pattern_scan(text: str) -> None:
    assert _tokenize_ascii(text) == _tokenize_unicode(text)


def _lcs_table(a: list[str], b: list[str]) -> list[list[int]]:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    return table


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from("abcde"), max_size=70),
    st.lists(st.sampled_from("abcde"), max_size=70),
)
def test_bit_parallel_lcs_equals_the_dynamic_programme(a: list[str], b: list[str]) -> None:
    table = _lcs_table(a, b)
    assert lcs_length(a, b) == table[-1][-1]
    # The spec's backtrack on the full table.
    i, j, expected = len(a), len(b), []
    while i > 0 and j > 0:
        if a[i - 1] == b[j - 1]:
            expected.append(a[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    assert lcs_tokens(a, b) == expected


def _spec_lcs_tokens(reference: list[str], hypothesis: list[str]) -> list[str]:
    table = _lcs_table(reference, hypothesis)
    i, j, taken = len(reference), len(hypothesis), []
    while i > 0 and j > 0:
        if reference[i - 1] == hypothesis[j - 1]:
            taken.append(reference[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return taken


sentence_lists = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "g"]), min_size=1, max_size=9),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(sentence_lists, sentence_lists)
def test_weknora_rougel_is_the_plain_union_lcs(
    hypothesis: list[list[str]], reference: list[list[str]]
) -> None:
    # The engine skips pairs and tables where the result is known; the plain
    # definition computes every pair's LCS by the full table.
    union: set[str] = set()
    for reference_sentence in reference:
        for hypothesis_sentence in hypothesis:
            union.update(_spec_lcs_tokens(reference_sentence, hypothesis_sentence))
    hyp_words = {t for s in hypothesis for t in s}
    ref_words = {t for s in reference for t in s}
    p = len(union) / len(hyp_words) if hyp_words else 0.0
    r = len(union) / len(ref_words) if ref_words else 0.0
    expected = 2.0 * ((p * r) / (p + r + 1e-8))
    text = ". ".join(" ".join(s) for s in hypothesis)
    gold = ". ".join(" ".join(s) for s in reference)
    row = score([MetricInput([], [], text, gold)], metrics=["rougel"])[0]
    assert row["rougel"] == expected


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=10),
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=10),
)
def test_the_no_table_shortcut_only_fires_when_the_lcs_holds_every_shared_token(
    reference: list[str], hypothesis: list[str]
) -> None:
    from pytest_ragev.metrics.generation import _every_lcs_holds

    shared = set(reference) & set(hypothesis)
    if shared and _every_lcs_holds(reference, hypothesis, shared):
        assert set(_spec_lcs_tokens(reference, hypothesis)) == shared
    # And it fires in the case it is there for: a repeat dropped on one side.
    assert _every_lcs_holds(["a", "b", "a", "c"], ["a", "b", "c"], {"a", "b", "c"})
    assert not _every_lcs_holds(["a", "b"], ["b", "a"], {"a", "b"})

# The plain definitions of the six generation metrics (spec / rouge-score / NLTK),
# straight from the text: n-gram Counters and full LCS tables, no shortcut.
def _plain_ngrams(tokens: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _plain_bleu(hypothesis: list[str], reference: list[str], profile: str) -> list[float]:
    hyp = [token.lower() for token in hypothesis]
    ref = [token.lower() for token in reference]
    precisions = []
    for n in (1, 2, 3, 4):
        total = max(len(hyp) - n + 1, 0)
        clipped = sum((_plain_ngrams(hyp, n) & _plain_ngrams(ref, n)).values())
        if profile == "weknora":
            precisions.append((clipped + 1) / (total + 1) if total > 0 else 0.0)
        else:
            precisions.append(clipped / max(1, total))
    if not hyp:
        brevity = 0.0
    elif len(hyp) > len(ref):
        brevity = 1.0
    else:
        brevity = math.exp(1 - len(ref) / len(hyp))
    values = []
    for weights in ((1.0,), (0.5, 0.5), (0.25, 0.25, 0.25, 0.25)):
        used = precisions[: len(weights)]
        if profile == "standard" and precisions[0] == 0:
            values.append(0.0)  # NLTK: no unigram match gives 0
        elif any(p == 0 for p in used):
            values.append(0.0)
        else:
            values.append(
                brevity * math.exp(sum(w * math.log(p) for w, p in zip(weights, used, strict=True)))
            )
    return values


def _plain_scores(
    hypothesis: list[list[str]], reference: list[list[str]], profile: str
) -> list[float]:
    hyp = [token for sentence in hypothesis for token in sentence]
    ref = [token for sentence in reference for token in sentence]
    rouge = []
    if profile == "weknora":

        def f1(p: float, r: float) -> float:
            return 2.0 * ((p * r) / (p + r + 1e-8))

        for n in (1, 2):
            hyp_set, ref_set = set(_plain_ngrams(hyp, n)), set(_plain_ngrams(ref, n))
            shared = len(hyp_set & ref_set)
            p = shared / len(hyp_set) if hyp_set else 0.0
            r = shared / len(ref_set) if ref_set else 0.0
            rouge.append(f1(p, r))
        union: set[str] = set()
        for reference_sentence in reference:
            for hypothesis_sentence in hypothesis:
                union.update(_spec_lcs_tokens(reference_sentence, hypothesis_sentence))
        p = len(union) / len(set(hyp)) if hyp else 0.0
        r = len(union) / len(set(ref)) if ref else 0.0
        rouge.append(f1(p, r))
    else:

        def f1(p: float, r: float) -> float:
            return 2 * p * r / (p + r) if p + r > 0 else 0.0

        for n in (1, 2):
            overlap = sum((_plain_ngrams(hyp, n) & _plain_ngrams(ref, n)).values())
            total_hyp, total_ref = max(len(hyp) - n + 1, 0), max(len(ref) - n + 1, 0)
            rouge.append(f1(overlap / max(total_hyp, 1), overlap / max(total_ref, 1)))
        lcs = _lcs_table(ref, hyp)[-1][-1] if hyp and ref else 0
        rouge.append(f1(lcs / len(hyp), lcs / len(ref)) if lcs else 0.0)
    return _plain_bleu(hyp, ref, profile) + rouge


# Few words, case variants that BLEU's lowercasing merges: many repeated n-grams.
cased_sentences = st.lists(
    st.lists(st.sampled_from(["a", "A", "b", "B", "c", "d", "x"]), min_size=1, max_size=12),
    max_size=4,
)


@settings(max_examples=400, deadline=None)
@given(cased_sentences, cased_sentences, st.sampled_from(PROFILES))
def test_fast_generation_metrics_equal_the_plain_definitions(
    hypothesis: list[list[str]], reference: list[list[str]], profile: str
) -> None:
    score_pair = generation.score_weknora if profile == "weknora" else generation.score_standard
    hyp = tuple(tuple(sentence) for sentence in hypothesis)
    ref = tuple(tuple(sentence) for sentence in reference)
    fast = score_pair(hyp, ref)
    plain = _plain_scores(hypothesis, reference, profile)
    assert list(fast) == pytest.approx(plain, rel=1e-12, abs=1e-15)
    # The batch path gives the same values, for texts read once ("once") and for
    # texts shared across pairs ("hyp", "ref").
    segment = {"once": hyp, "hyp": hyp, "ref": ref}.__getitem__
    batch = generation.score_texts(
        ["hyp", "ref", "hyp", "once"], ["ref", "ref", "ref", "ref"], segment, profile
    )
    assert batch[0] == batch[2] == batch[3] == fast
    assert batch[1] == score_pair(ref, ref)
