"""The gate's matrix products on one BLAS thread (:func:`one_blas_thread`).

The sign-flip tests multiply a block of random signs (flips x questions) by the
questions' differences (questions x a dozen metrics). Such a product is skinny and
bound by memory, not arithmetic: a second BLAS thread gains little on an idle machine,
and on a shared CI runner, where the other core is busy, OpenBLAS's threads wait for
each other and the same product takes several times as long (benchmarks/
bench_slices.py with ``OPENBLAS_NUM_THREADS`` 1 and 2 on this project's 2-core
machine; docs/slices.md quotes the figures). So the gate limits numpy's BLAS to one
thread while it resamples, and gives the setting back when it is done.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController

Params = ParamSpec("Params")
Result = TypeVar("Result")


@functools.cache
def _controller() -> ThreadpoolController:
    """The BLAS libraries of this process, found once (a lookup costs about 0.5 ms; a
    limit through the found controller about 25 us)."""
    import numpy  # noqa: F401  (its BLAS must be loaded to be found)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread(function: Callable[Params, Result]) -> Callable[Params, Result]:
    """Run ``function`` with numpy's BLAS limited to one thread (restored afterwards).

    The limit is process-wide while it lasts: another thread's products run on one BLAS
    thread meanwhile too, which changes their speed, never their results.
    """

    @functools.wraps(function)
    def limited(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        with _controller().limit(limits=1, user_api="blas"):
            return function(*args, **kwargs)

    return limited
