"""Arrow helpers of the dataset loader: the column types, and the few operations on
whole text columns that several modules of the package need."""

from __future__ import annotations

from typing import Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

IntArray: TypeAlias = npt.NDArray[np.int64]
#: A text column (string or large_string), as Parquet's row groups delivered it.
TextArray: TypeAlias = "pa.ChunkedArray[Any]"


def is_utf8(array: pa.Array[Any]) -> bool:
    """Whether every text of ``array`` is valid UTF-8 (one pass in C++, no GIL)."""
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def python_strings(texts: TextArray) -> list[str]:
    """A text column as a Python list (the loader has already rejected nulls).

    ``to_numpy`` builds the ``str`` objects in C++; ``to_pylist`` goes through one Arrow
    scalar per row and is 1.5-2.5x slower.
    """
    if len(texts) == 0:
        return []
    return cast("list[str]", texts.to_numpy(zero_copy_only=False).tolist())


def one_chunk(texts: TextArray) -> pa.Array[Any]:
    """``texts`` as one Arrow array (no copy when it already is one chunk, as read)."""
    # (pyarrow's stubs type combine_chunks as returning a ChunkedArray; it is an Array.)
    combined: Any = texts.chunk(0) if texts.num_chunks == 1 else texts.combine_chunks()
    return cast("pa.Array[Any]", combined)


def take_indices(positions: npt.NDArray[np.intp]) -> pa.Array[Any]:
    """``positions`` as an Arrow index array, 32-bit when every value fits."""
    if len(positions) and int(positions.max()) < 2**31:
        return pa.array(positions.astype(np.int32))
    return pa.array(positions)
