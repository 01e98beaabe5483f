"""Number and text formatting shared by the report renderers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pytest_ragev.gate.checks import CORRECTION_NAMES

if TYPE_CHECKING:
    from pytest_ragev.gate.checks import Comparison
    from pytest_ragev.report.model import ReportModel

_MINUS = "−"  # U+2212: figures line up and read as numbers, not dashes


def num(value: float | None, *, signed: bool = False, digits: int = 3) -> str:
    """``0.612``, ``+0.013``, ``−0.043``; ``n/a`` for a missing value."""
    if value is None:
        return "n/a"
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


def run_facts(model: ReportModel, *, value: Callable[[str], str]) -> list[str]:
    """The headline facts of a report (task, dataset, profile, counts, duration, start).

    ``value`` renders a user-supplied value for the target format (escaping, code spans).
    """
    facts = []
    base = model.base
    if model.task_id:
        facts.append(f"task {value(model.task_id)}")
    if base is not None:
        facts.append(f"dataset {value(base.dataset_id)} ({base.fingerprint[:12]})")
        facts.append(f"profile {value(base.profile)}")
        facts.append(f"{len(base.samples)} questions")
    variants = sum(run.variant is not None for run in model.runs)
    if variants:
        facts.append(f"{variants} variant(s)")
    facts.append(f"{model.errors} error(s)")
    facts.append(f"{model.fallbacks} fallback(s)")
    if model.duration_s is not None:
        facts.append(seconds(model.duration_s))
    return facts


def base_missing_note(model: ReportModel, *, value: Callable[[str], str]) -> str | None:
    """``The base configuration did not run; variants in this run: k10, k20.`` for a
    session of variants only (``--ragev-variant`` without ``base``), else ``None``.

    ``value`` renders each variant name for the target format (escaping, code spans).
    """
    if not model.runs or model.base_ran:
        return None
    names = ", ".join(value(str(run.variant)) for run in model.runs)
    return f"The base configuration did not run; variants in this run: {names}."


def correction_note(comparison: Comparison) -> str:
    """`` p is adjusted for the 12 metrics tested together (Holm).`` when a correction
    applied, else empty."""
    adjusted = [m for m in comparison.metrics if m.family > 1 and m.correction != "none"]
    if not adjusted:
        return ""
    name = CORRECTION_NAMES.get(adjusted[0].correction, adjusted[0].correction)
    return f" p is adjusted for the {adjusted[0].family} metrics tested together ({name})."
