"""gate/blas.py: the gate's products run on one BLAS thread, and the setting comes back."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from pytest_ragev.gate.blas import one_blas_thread
from pytest_ragev.gate.stats import maxt_columns


def _blas_threads() -> list[int]:
    return [int(lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads() -> object:
    if not _blas_threads():
        pytest.skip("numpy here has no BLAS threadpoolctl can find")
    with threadpool_limits(limits=2, user_api="blas") as limits:
        yield limits


@pytest.mark.usefixtures("two_blas_threads")
def test_a_decorated_function_runs_on_one_blas_thread_and_the_setting_comes_back() -> None:
    seen: list[list[int]] = []

    @one_blas_thread
    def product(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        seen.append(_blas_threads())
        return left @ right

    assert _blas_threads() == [2] * len(_blas_threads())
    result = product(np.ones((3, 4)), np.ones((4, 2)))
    assert result.tolist() == [[4.0, 4.0]] * 3
    assert seen == [[1] * len(seen[0])]
    assert _blas_threads() == [2] * len(_blas_threads())


@pytest.mark.usefixtures("two_blas_threads")
def test_the_setting_comes_back_when_the_function_raises() -> None:
    @one_blas_thread
    def broken() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        broken()
    assert _blas_threads() == [2] * len(_blas_threads())


def test_the_gates_p_values_do_not_depend_on_the_blas_threads() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.normal(0.02, 0.2, (3_000, 12))
    limited = maxt_columns(matrix, resamples=2_000, seed=3)
    with threadpool_limits(limits=2, user_api="blas"):
        again = maxt_columns.__wrapped__(matrix, resamples=2_000, seed=3)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(limited, again)
