"""Inline SVG line charts for the dashboard's trends (no script, no external asset)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class Point:
    """One run on a chart: its label (shown on hover), and the value (``None``: no data)."""

    label: str
    value: float | None


def line_chart(
    points: Sequence[Point],
    *,
    title: str,
    width: int = 240,
    height: int = 120,
    low: float = 0.0,
    high: float = 1.0,
) -> str:
    """One metric over runs, oldest left: a polyline with a dot and a tooltip per run.

    The y axis spans ``[low, high]`` (metrics live in [0, 1]); runs without a value
    leave a gap in the line. Labels and the title are escaped.
    """
    left, right, top, bottom = 34, 8, 20, 18
    plot_w, plot_h = width - left - right, height - top - bottom
    span = (high - low) or 1.0

    def x(i: int) -> float:
        return left + (plot_w * i / (len(points) - 1) if len(points) > 1 else plot_w / 2)

    def y(value: float) -> float:
        clipped = min(max(value, low), high)
        return top + plot_h * (1.0 - (clipped - low) / span)

    parts = [
        f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)} over {len(points)} runs">',
        f'<text x="{left}" y="13" class="t">{escape(title)}</text>',
    ]
    for tick in (low, (low + high) / 2, high):
        ty = y(tick)
        parts.append(f'<line x1="{left}" y1="{ty:.1f}" x2="{width - right}" y2="{ty:.1f}" '
                     'class="grid"/>')
        parts.append(f'<text x="{left - 4}" y="{ty + 4:.1f}" class="tick" '
                     f'text-anchor="end">{tick:g}</text>')
    segment: list[str] = []
    segments: list[list[str]] = []
    for i, point in enumerate(points):
        if point.value is None:
            if segment:
                segments.append(segment)
            segment = []
            continue
        segment.append(f"{x(i):.1f},{y(point.value):.1f}")
    if segment:
        segments.append(segment)
    for line in segments:
        if len(line) > 1:
            parts.append(f'<polyline points="{" ".join(line)}" class="line"/>')
    for i, point in enumerate(points):
        if point.value is None:
            continue
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(point.value):.1f}" r="2.5" class="dot">'
            f"<title>{escape(point.label)}: {point.value:.3f}</title></circle>"
        )
    last = next((p.value for p in reversed(points) if p.value is not None), None)
    if last is not None:
        parts.append(f'<text x="{width - right}" y="13" class="last" '
                     f'text-anchor="end">{last:.3f}</text>')
    if not points:
        parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" '
                     'class="tick" text-anchor="middle">no runs</text>')
    parts.append("</svg>")
    return "".join(parts)
