"""Longest common subsequences over token sequences, bit-parallel.

Python integers serve as bit vectors (Allison-Dix / Hyyrö): one machine-level pass of
a few big-int operations per token of the first sequence, instead of a Python loop
over every cell of the dynamic-programming table.

For ``b`` of length ``w`` and ``M[t]`` the bits ``j`` with ``b[j] == t``, the row
vector ``V_i`` after the first ``i`` tokens of ``a`` satisfies: bit ``j-1`` of
``V_i`` is 0 exactly when ``T[i][j] = T[i][j-1] + 1``, where ``T`` is the usual LCS
table. Hence ``T[i][j] = j - popcount(V_i & (2**j - 1))`` and the LCS length is the
number of zero bits of ``V_|a|``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

__all__ = [
    "lcs_length",
    "lcs_length_of_matches",
    "lcs_tokens",
    "match_masks",
]

#: 1 << position for the positions of typical sentences and answers.
_BITS = [1 << position for position in range(512)]


def match_masks(b: Sequence[str]) -> dict[str, int]:
    """For each token of ``b``, the bit set of its positions."""
    masks: dict[str, int] = {}
    get = masks.get
    bits = _BITS if len(b) <= len(_BITS) else [1 << position for position in range(len(b))]
    for token, bit in zip(b, bits, strict=False):
        masks[token] = get(token, 0) | bit
    return masks


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of a longest common subsequence of ``a`` and ``b``."""
    if not a or not b:
        return 0
    return lcs_length_of_matches(list(map(match_masks(b).get, a, repeat(0))), len(b))


def lcs_length_of_matches(matches: Sequence[int], width: int) -> int:
    """:func:`lcs_length` of ``a`` and ``b`` from ``matches``, the
    ``match_masks(b).get(token, 0)`` of each token of ``a``, with ``width = len(b)``."""
    row = full = (1 << width) - 1
    for mask in matches:
        hits = row & mask
        if hits:
            # Carries only travel up: bits past ``width`` may fill with junk, never the rest.
            row = (row + hits) | (row - hits)
    return width - (row & full).bit_count()


def lcs_tokens(
    reference: Sequence[str],
    hypothesis: Sequence[str],
    hypothesis_masks: dict[str, int] | None = None,
) -> list[str]:
    """One LCS of ``reference`` (table rows) and ``hypothesis`` (table columns).

    The backtrack of the spec (and of WeKnora): from the bottom-right cell, on equal
    tokens take the token and go diagonal; otherwise go up (drop a reference token)
    when ``T[i-1][j] > T[i][j-1]``, else go left. Tokens come out last first.

    With unequal tokens ``T[i][j] = max(T[i-1][j], T[i][j-1])``, so the rule needs
    one bit: when ``T[i][j-1] == T[i][j]`` (bit ``j-1`` of ``V_i`` set) the up cell
    cannot exceed the left one and we go left; otherwise the up cell holds
    ``T[i][j]`` and the left one ``T[i][j] - 1``, and we go up. ``hypothesis_masks``
    may pass :func:`match_masks` of ``hypothesis`` when the caller reuses them.
    """
    if not reference or not hypothesis:
        return []
    column_masks = list(
        map((hypothesis_masks or match_masks(hypothesis)).get, reference, repeat(0))
    )
    row = (1 << len(hypothesis)) - 1
    rows: list[int] = []  # V_1 .. V_|reference|
    append = rows.append
    for mask in column_masks:
        hits = row & mask
        if hits:
            row = (row + hits) | (row - hits)
        append(row)
    # ``limit`` holds the bits of the columns left of the walk's column j, (1 << j) - 1.
    # Every step leaves row i (diagonal or up), so the walk visits the rows in turn
    # from the last one: a loop over them, read backwards.
    limit = (1 << len(hypothesis)) - 1
    taken: list[str] = []
    for token, token_mask, row in zip(
        reversed(reference), reversed(column_masks), reversed(rows), strict=True
    ):
        # Walking left along row i continues while the tokens differ and V_i's bit is
        # set; jump straight to the first column where either stops being true.
        stops = (token_mask | ~row) & limit
        if not stops:
            break  # the walk reaches column 0
        column = 1 << (stops.bit_length() - 1)
        if token_mask & column:
            taken.append(token)  # equal tokens: diagonal
            limit = column - 1
        else:
            limit = (column << 1) - 1  # T[i-1][j] > T[i][j-1]: up
    return taken
