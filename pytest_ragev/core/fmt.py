"""Numbers and short texts as every report and gate line writes them.

One home for the formats: a figure printed in a failure line, the terminal table, the
Markdown summary and the HTML report reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

_MINUS = "−"  # U+2212: figures line up and read as numbers, not dashes


def num(value: float | None, *, signed: bool = False, digits: int = 3, missing: str = "n/a") -> str:
    """``0.612``, ``+0.013``, ``−0.043``; ``missing`` (``n/a``) for a missing value."""
    if value is None:
        return missing
    text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return text.replace("-", _MINUS)


def p_value(p: float | None) -> str:
    """``0.012``, ``<0.001``, ``n/a``."""
    if p is None:
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def level(ci_level: float) -> str:
    """``90%`` for 0.9."""
    return f"{ci_level * 100:.4g}%"


def ci(low: float | None, high: float | None) -> str:
    """``[−0.061, −0.025]`` or ``n/a``."""
    if low is None or high is None:
        return "n/a"
    return f"[{num(low)}, {num(high)}]"


def percent(share: float | None) -> str:
    """``52%``, ``<1%``, ``>99%``: a share as every report writes it."""
    if share is None:
        return "n/a"
    if 0 < share < 0.005:
        return "<1%"
    if 0.995 < share < 1:
        return ">99%"
    return f"{share:.0%}"


#: Items a one-line message lists before "… (N more)".
LISTED = 20


def listed(items: Sequence[object], limit: int = LISTED) -> str:
    """``1, 2, 3, … (48 more)``: at most ``limit`` items, for one-line messages and
    the reports' lists of question ids."""
    shown = ", ".join(str(item) for item in items[:limit])
    rest = len(items) - limit
    return shown + (f", … ({rest} more)" if rest > 0 else "")


def shorten(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (whitespace collapsed, ``…`` when cut)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: max(0, limit - 1)].rstrip() + "…"


def ids(values: Iterable[int], relevant: frozenset[int], *, limit: int = 10,
        mark: str = "*") -> str:
    """``[12*, 7, 33*]``: retrieved ids, relevant ones marked, at most ``limit`` shown."""
    items = list(values)
    shown = [f"{i}{mark}" if i in relevant else str(i) for i in items[:limit]]
    if len(items) > limit:
        shown.append(f"… +{len(items) - limit}")
    return "[" + ", ".join(shown) + "]"


def seconds(value: float | None) -> str:
    """``12.3 s`` / ``2 min 05 s``."""
    if value is None:
        return "n/a"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s"


def p_text(p: float) -> str:
    """``p=0.012`` or ``p<0.001``, as failure lines write a p-value."""
    return f"p{p_value(p)}" if p < 0.001 else f"p={p_value(p)}"


def label(metric: str, variant: str | None) -> str:
    """``recall`` for the base configuration, ``recall [k10]`` for a variant."""
    return f"{metric} [{variant}]" if variant else metric
