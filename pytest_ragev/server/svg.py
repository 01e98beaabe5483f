"""Inline SVG line charts for the dashboard's trends (no script, no external asset)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

from pytest_ragev.core import fmt

#: Pixels between the y axis's labels and the first run, so a dot never covers a label.
_INSET = 8


@dataclass(frozen=True)
class Point:
    """One run on a chart: its label (shown on hover), the value (``None``: no data) and
    when it ran (``None``: unknown; the chart then spaces the runs evenly)."""

    label: str
    value: float | None
    at: datetime | None = None


def _date_labels(first: datetime, last: datetime) -> tuple[str, str]:
    """The first and last runs' dates, as short as still tells them apart: the date for
    runs days apart, else the day and the minute, else the second."""
    formats: tuple[str, ...] = ("%m-%d %H:%M", "%m-%d %H:%M:%S")
    if last - first >= timedelta(days=2):
        formats = ("%Y-%m-%d", *formats)
    for form in formats:
        labels = (first.strftime(form), last.strftime(form))
        if labels[0] != labels[1]:
            return labels
    return labels


def line_chart(
    points: Sequence[Point],
    *,
    title: str,
    width: int = 240,
    height: int = 132,
    low: float = 0.0,
    high: float = 1.0,
) -> str:
    """One metric over runs, oldest left: a polyline with a dot and a tooltip per run.

    The x axis is time when every point says when it ran (the first and last runs'
    dates are written under it), else the run's position. The y axis spans
    ``[low, high]`` (metrics live in [0, 1]); runs without a value leave a gap in the
    line. Labels and the title are escaped; figures are written as the reports write
    them (:func:`pytest_ragev.core.fmt.num`).
    """
    left, right, top, bottom = 34, 10, 20, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    first_x, last_x = left + _INSET, left + plot_w
    span = (high - low) or 1.0
    times = [p.at for p in points]
    timed = [t for t in times if t is not None]
    by_time = len(timed) == len(points) and len(set(timed)) > 1
    start = min(timed) if by_time else None
    duration = (max(timed) - min(timed)) if by_time else timedelta(0)

    def x(i: int) -> float:
        if by_time and start is not None:
            at = times[i]
            assert at is not None
            share = (at - start) / duration
        else:
            share = i / (len(points) - 1) if len(points) > 1 else 0.5
        return first_x + (last_x - first_x) * share

    def y(value: float) -> float:
        clipped = min(max(value, low), high)
        return top + plot_h * (1.0 - (clipped - low) / span)

    axis = "time" if by_time else "run"
    parts = [
        f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)} over {len(points)} runs, x axis: {axis}">',
        f'<text x="{left}" y="13" class="t">{escape(title)}</text>',
    ]
    for tick in (low, (low + high) / 2, high):
        ty = y(tick)
        parts.append(f'<line x1="{left}" y1="{ty:.1f}" x2="{width - right}" y2="{ty:.1f}" '
                     'class="grid"/>')
        parts.append(f'<text x="{left - 4}" y="{ty + 3:.1f}" class="tick" '
                     f'text-anchor="end">{tick:g}</text>')
    label_y = height - 8
    if by_time:
        # The first and the last run's dates, under the ends of the time axis.
        oldest, newest = _date_labels(min(timed), max(timed))
        parts.append(f'<text x="{first_x - 4}" y="{label_y}" class="date" '
                     f'text-anchor="start">{escape(oldest)}</text>')
        parts.append(f'<text x="{last_x + 4}" y="{label_y}" class="date" '
                     f'text-anchor="end">{escape(newest)}</text>')
    elif len(points) == 1 and timed:
        parts.append(f'<text x="{x(0):.1f}" y="{label_y}" class="date" text-anchor="middle">'
                     f'{escape(timed[0].strftime("%Y-%m-%d %H:%M"))}</text>')
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
            f"<title>{escape(point.label)}: {escape(fmt.num(point.value))}</title></circle>"
        )
    last = next((p.value for p in reversed(points) if p.value is not None), None)
    if last is not None:
        parts.append(f'<text x="{width - right}" y="13" class="last" '
                     f'text-anchor="end">{escape(fmt.num(last))}</text>')
    if not points:
        parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" '
                     'class="tick" text-anchor="middle">no runs</text>')
    parts.append("</svg>")
    return "".join(parts)
