"""``similarity``: cosines of embeddings rescaled against unrelated texts, deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pytest_ragev.metrics import similarity
from pytest_ragev.metrics.similarity import BASELINE, cosines, rescale, similarity_scores

vectors = arrays(np.float32, (3, 8), elements=st.floats(-1, 1, width=32)).filter(
    lambda a: bool(np.all(np.linalg.norm(a, axis=1) > 1e-3)))


def test_the_scale_runs_from_the_baseline_of_unrelated_texts_to_identity() -> None:
    raw = np.array([1.0, BASELINE, BASELINE - 0.1, (1 + BASELINE) / 2, 1.2])
    assert rescale(raw).tolist() == [1.0, 0.0, 0.0, 0.5, 1.0]


@given(vectors, vectors)
def test_scores_lie_in_0_1_are_symmetric_and_a_text_matches_itself(
    a: np.ndarray, b: np.ndarray
) -> None:
    scores = similarity_scores(a, b)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores == similarity_scores(b, a)
    assert similarity_scores(a, a) == [1.0] * len(a)
    # Four decimals at most: the last bits of a CPU's kernels never reach a baseline.
    assert all(round(s, similarity.DECIMALS) == s for s in scores)


def test_length_does_not_matter_and_a_zero_vector_matches_nothing() -> None:
    a = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    assert cosines(a, a * 7.5)[0] == pytest.approx(1.0, abs=1e-3)
    assert cosines(a, a)[1] == 0.0


def test_rounding_to_float16_hides_differences_a_cpu_may_make() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((50, 384)).astype(np.float32)
    b = rng.standard_normal((50, 384)).astype(np.float32)
    # A perturbation in the last bits of float32, as another SIMD kernel may give.
    jitter = a * (1 + rng.uniform(-2e-7, 2e-7, a.shape)).astype(np.float32)
    same = sum(x == y for x, y in zip(similarity_scores(a, b), similarity_scores(jitter, b),
                                      strict=True))
    assert same >= 49  # a value right at a rounding boundary may still move
