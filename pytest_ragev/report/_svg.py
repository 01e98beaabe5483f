"""Inline SVG charts for the HTML report: grouped bars and delta histograms.

Hand-written SVG, no JavaScript, no external assets; ``<title>`` children give the
exact figures as native tooltips. Every text is escaped by the caller's rules here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from pytest_ragev.core import fmt

_FONT = (
    "font-family:system-ui,-apple-system,'Segoe UI','Noto Sans CJK SC','PingFang SC',"
    "'Microsoft YaHei',sans-serif;font-size:12px"
)


@dataclass(frozen=True)
class Series:
    """One bar per metric: a run's name, its colour and its metric means."""

    label: str
    color: str
    values: Mapping[str, float | None]


def _attr(value: str) -> str:
    return escape(value, quote=True)


def bar_chart(metrics: Sequence[str], series: Sequence[Series], *, width: int = 860) -> str:
    """Grouped horizontal bars: one group per metric, one bar per series.

    Each metric has its own scale, from 0 to the larger of 1 and its largest value, so
    a custom metric in milliseconds does not flatten the twelve built-ins.
    """
    # Wide enough for the longest name: custom metrics ("context_chars") are long.
    label_w = max(90, 12 + 7 * max((len(m) for m in metrics), default=0))
    value_w, bar_h, gap, group_gap = 64, 12, 2, 12
    plot_w = width - label_w - value_w - 10
    legend_h = 24
    group_h = len(series) * (bar_h + gap) - gap
    height = legend_h + len(metrics) * (group_h + group_gap) + 4
    parts = [
        f'<svg class="chart bars" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="mean of each metric per run" style="{_FONT}">'
    ]
    x = label_w
    for item in series:
        parts.append(
            f'<rect x="{x}" y="6" width="12" height="12" fill="{_attr(item.color)}"/>'
            f'<text x="{x + 16}" y="16">{escape(item.label)}</text>'
        )
        x += 24 + 7 * len(item.label)
    y = legend_h
    for metric in metrics:
        values = [item.values.get(metric) for item in series]
        present = [v for v in values if v is not None and math.isfinite(v)]
        top = max([1.0, *present])
        parts.append(
            f'<text x="{label_w - 8}" y="{y + group_h / 2 + 4:.1f}" text-anchor="end" '
            f'font-weight="600">{escape(metric)}</text>'
        )
        if top != 1.0:
            parts.append(
                f'<text x="{label_w + plot_w}" y="{y - 2}" text-anchor="end" fill="#777" '
                f'font-size="10">scale 0–{fmt.num(top)}</text>'
            )
        for index, (item, value) in enumerate(zip(series, values, strict=True)):
            bar_y = y + index * (bar_h + gap)
            shown = 0.0 if value is None or not math.isfinite(value) else max(0.0, value)
            bar_w = plot_w * shown / top
            tip = f"{item.label} · {metric}: {fmt.num(value, digits=4)}"
            parts.append(
                f'<rect class="bar" data-metric="{_attr(metric)}" data-series="{_attr(item.label)}"'
                f' x="{label_w}" y="{bar_y}" width="{bar_w:.1f}" height="{bar_h}" '
                f'fill="{_attr(item.color)}"><title>{escape(tip)}</title></rect>'
                f'<text x="{label_w + bar_w + 4:.1f}" y="{bar_y + bar_h - 2}" '
                f'fill="#333">{escape(fmt.num(value))}</text>'
            )
        y += group_h + group_gap
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Histogram:
    """Counts of non-zero per-question deltas in equal bins over ``[-span, span]``."""

    span: float
    counts: list[int]
    unchanged: int
    total: int

    @property
    def edges(self) -> list[float]:
        """The ``len(counts) + 1`` bin edges."""
        step = 2 * self.span / len(self.counts)
        return [-self.span + i * step for i in range(len(self.counts) + 1)]


def _nice_span(largest: float) -> float:
    # Round the axis up to 1, 2 or 5 times a power of ten so bin edges read well.
    if largest <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(largest))
    for factor in (1, 2, 5, 10):
        if largest <= factor * power:
            return float(factor * power)
    return float(10 * power)


def histogram(deltas: Sequence[float], *, bins: int = 20) -> Histogram:
    """Bin the non-zero deltas; exact zeros (unchanged questions) are counted apart.

    Unchanged questions usually dominate a comparison and would flatten every other bar.
    """
    moved = [d for d in deltas if d != 0 and math.isfinite(d)]
    span = _nice_span(max((abs(d) for d in moved), default=0.0))
    counts = [0] * bins
    for value in moved:
        index = int((value + span) / (2 * span) * bins)
        counts[min(max(index, 0), bins - 1)] += 1
    return Histogram(span=span, counts=counts, unchanged=len(deltas) - len(moved),
                     total=len(deltas))


def histogram_chart(
    title: str, data: Histogram, *, higher_is_better: bool, width: int = 270, height: int = 150
) -> str:
    """A small histogram: worse side red, better side green, zero line, both axes labelled.

    The left axis counts questions (ticks at 0, the middle when it is whole, and the
    tallest bin); the bottom axis is the per-question change.
    """
    left, right, top, bottom = 30, 8, 22, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(data.counts, default=0) or 1
    bar_w = plot_w / len(data.counts)
    parts = [
        f'<svg class="chart histogram" data-metric="{_attr(title)}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_attr(title)}: per-question change" style="{_FONT}">',
        f'<text x="{left}" y="14" font-weight="600">{escape(title)}</text>',
        f'<text x="{width - right}" y="14" text-anchor="end" fill="#777" font-size="10">'
        f"{data.unchanged} of {data.total} unchanged</text>",
    ]
    edges = data.edges
    for index, count in enumerate(data.counts):
        low, high = edges[index], edges[index + 1]
        centre = (low + high) / 2
        better = centre > 0 if higher_is_better else centre < 0
        color = "#3aa675" if better else "#d64545"
        bar_h = plot_h * count / peak
        x = left + index * bar_w
        tip = f"{count} question(s) with Δ in [{fmt.num(low)}, {fmt.num(high)})"
        parts.append(
            f'<rect class="bin" data-count="{count}" x="{x + 0.5:.1f}" '
            f'y="{top + plot_h - bar_h:.1f}" width="{max(bar_w - 1, 0.5):.1f}" '
            f'height="{bar_h:.1f}" fill="{color}"><title>{escape(tip)}</title></rect>'
        )
    zero_x = left + plot_w / 2
    base_y = top + plot_h
    ticks = sorted({0, peak, *([peak // 2] if peak % 2 == 0 and peak >= 4 else [])})
    axis = [f'<g class="count-axis" data-peak="{peak}" fill="#555" font-size="10">',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base_y}" stroke="#999"/>']
    for tick in ticks:
        tick_y = base_y - plot_h * tick / peak
        axis.append(
            f'<line x1="{left - 3}" y1="{tick_y:.1f}" x2="{left}" y2="{tick_y:.1f}" '
            'stroke="#999"/>'
            f'<text class="tick" x="{left - 5}" y="{tick_y + 3:.1f}" text-anchor="end">'
            f"{tick}</text>"
        )
    axis.append(
        f'<text x="9" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 9 {top + plot_h / 2:.1f})">questions</text></g>'
    )
    parts.append("".join(axis))
    parts.append(
        f'<line x1="{left}" y1="{base_y}" x2="{left + plot_w}" y2="{base_y}" stroke="#999"/>'
        f'<line x1="{zero_x}" y1="{top}" x2="{zero_x}" y2="{base_y}" stroke="#555" '
        'stroke-dasharray="3,2"/>'
        f'<text x="{left}" y="{base_y + 14}" fill="#555">{escape(fmt.num(-data.span))}</text>'
        f'<text x="{zero_x}" y="{base_y + 14}" text-anchor="middle" fill="#555">0</text>'
        f'<text x="{left + plot_w}" y="{base_y + 14}" text-anchor="end" fill="#555">'
        f"{escape(fmt.num(data.span, signed=True))}</text>"
        f'<text x="{zero_x}" y="{base_y + 27}" text-anchor="middle" fill="#777" font-size="10">'
        "Δ per question (current − baseline)</text>"
    )
    parts.append("</svg>")
    return "".join(parts)
