"""Exact vector search over the chunk vectors of a knowledge base.

Vectors are kept as float16 (half the memory and the cache on disk; the embedders are
4-bit or float32 models whose rankings float16 does not change). A query scans every
vector: a search reads the whole matrix, so its cost is memory bandwidth, and float16
halves it. With simsimd installed (the ``vectors`` extra) the scan runs on the float16
rows directly; otherwise numpy multiplies a float32 copy of the same float16 values, made
once per matrix. Both compute the same dot products up to rounding of the sum, and ties
break on chunk order, so results are deterministic.

simsimd picks its kernel by CPU, and on CPUs with AVX-512 FP16 (Intel Sapphire Rapids and
newer) its float16 dot product accumulates in float16: scores off by up to 2e-4 on unit
vectors, enough to reorder near neighbours, so a baseline recorded on one machine would
not hold on another. A probe run once per process therefore compares simsimd with a
float32 sum on fixed vectors. Where they differ, simsimd's AVX-512 FP16 kernels are
switched off (``disable_capability("sapphire")``, which concerns float16 kernels only:
simsimd then converts each float16 value to float32 and sums in float32, as on older
CPUs) and the probe runs again; simsimd is used only once it agrees, else numpy. That
switch is process-wide: other float16 code in the process that uses simsimd gets the
float32-summing kernel too (more exact, about as fast).

The scan runs on every core (simsimd's ``threads``; numpy's BLAS does the same): each
row's dot product is still summed by one thread, so the result does not depend on it.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_lock = threading.Lock()
#: ``id(float16 matrix) -> (weak reference, float32 copy)`` for the numpy scan.
_float32_copies: dict[int, tuple[Any, npt.NDArray[np.float32]]] = {}
_simsimd: Any = None


def stored(vectors: npt.NDArray[Any]) -> npt.NDArray[np.float16]:
    """``vectors`` as the knowledge base keeps them: C-contiguous float16."""
    import numpy as np

    return np.ascontiguousarray(vectors, dtype=np.float16)


#: The largest difference from a float32 sum the probe accepts. A float32 accumulation of
#: 384 products of unit vectors is off by about 1e-7; a float16 one by 1e-4 to 1e-3.
_PROBE_TOLERANCE = 1e-5


def accumulates_in_float32(module: Any) -> bool:
    """Whether ``module.cdist`` (simsimd's API) sums float16 dot products in float32.

    Computed on fixed pseudo-random unit vectors of the embedders' width against numpy's
    float32 product of the same float16 values.
    """
    import numpy as np

    rng = np.random.default_rng(20261205)
    rows = rng.standard_normal((64, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows16 = rows.astype(np.float16)
    query16 = rows16[0]
    expected = rows16.astype(np.float32) @ query16.astype(np.float32)
    try:
        got = np.asarray(module.cdist(query16[None, :], rows16, metric="dot",
                                      out_dtype="float32"), dtype=np.float32)[0]
    except Exception:  # an unusable build: the numpy scan is always there
        return False
    return bool(np.all(np.abs(got - expected) <= _PROBE_TOLERANCE))


#: The capability whose float16 kernels sum in float16 (simsimd's AVX-512 FP16 kernels).
_FLOAT16_SUMMING = "sapphire"
#: Threads of one scan: every core, at most eight (the scan is bound by memory bandwidth).
_THREADS = max(1, min(8, os.cpu_count() or 1))


def _float32_summing(module: Any) -> bool:
    """Whether ``module`` (simsimd) sums float16 in float32, after switching its float16-
    summing kernels off where needed (see the module docstring)."""
    if accumulates_in_float32(module):
        return True
    capabilities: dict[str, bool] = getattr(module, "get_capabilities", dict)()
    disable = getattr(module, "disable_capability", None)
    if not capabilities.get(_FLOAT16_SUMMING) or disable is None:
        return False
    try:
        disable(_FLOAT16_SUMMING)
    except Exception:  # an older simsimd without the switch: numpy then
        return False
    return accumulates_in_float32(module)


def _simsimd_module() -> Any:
    """simsimd, or ``False`` when it is not installed or cannot be made to sum float16 in
    float32 on this CPU (looked up once per process)."""
    global _simsimd
    with _lock:
        if _simsimd is None:
            try:
                import simsimd
            except ImportError:
                _simsimd = False
            else:
                _simsimd = simsimd if _float32_summing(simsimd) else False
    return _simsimd


def backend() -> str:
    """``"simsimd"`` or ``"numpy"``: which scan :func:`scores` uses in this process."""
    return "simsimd" if _simsimd_module() else "numpy"


def _float32(vectors: npt.NDArray[np.float16]) -> npt.NDArray[np.float32]:
    import numpy as np

    with _lock:
        entry = _float32_copies.get(id(vectors))
        if entry is not None and entry[0]() is vectors:
            return entry[1]
        copy = vectors.astype(np.float32)
        key = id(vectors)
        _float32_copies[key] = (weakref.ref(vectors, lambda _: _float32_copies.pop(key, None)),
                                copy)
        return copy


def scores(vectors: npt.NDArray[Any], query: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    """The dot product of every row of ``vectors`` with ``query`` (cosine for unit rows)."""
    import numpy as np

    query16 = np.ascontiguousarray(query, dtype=np.float16)
    simsimd = _simsimd_module()
    if simsimd and vectors.dtype == np.float16 and len(vectors):
        out = simsimd.cdist(query16[None, :], vectors, metric="dot", out_dtype="float32",
                            threads=_THREADS)
        result: npt.NDArray[np.float32] = np.asarray(out, dtype=np.float32)[0]
        return result
    matrix = _float32(vectors) if vectors.dtype == np.float16 else vectors
    return np.asarray(matrix @ query16.astype(np.float32), dtype=np.float32)


def top(values: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
    """The ``k`` best ``(row, score)`` pairs with a score above 0, best first.

    Equal scores keep row order (every row scoring like the k-th is considered before the
    cut), so the result does not depend on how the partition happened to split ties.
    """
    import numpy as np

    n = len(values)
    if k <= 0 or n == 0:
        return []
    if n > k:
        kth = np.partition(values, n - k)[n - k]
        keep = np.flatnonzero(values >= kth) if kth > 0 else np.flatnonzero(values > 0)
    else:
        keep = np.flatnonzero(values > 0)
    chosen = values[keep]
    order = np.lexsort((keep, -chosen))[:k]
    return [(int(keep[i]), float(chosen[i])) for i in order]
