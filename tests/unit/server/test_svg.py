"""The trend chart: one dot per run with a value, gaps for runs without one, escaped text."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from pytest_ragev.server.svg import Point, line_chart

NS = "{http://www.w3.org/2000/svg}"


def test_points_gaps_and_escaping() -> None:
    points = [Point("run <1>", 0.2), Point("run 2", None), Point("run 3", 0.5),
              Point("运行 4", 0.75)]
    svg = ET.fromstring(line_chart(points, title="recall & co"))
    dots = svg.findall(f"{NS}circle")
    assert len(dots) == 3
    assert dots[0].find(f"{NS}title").text == "run <1>: 0.200"
    lines = svg.findall(f"{NS}polyline")
    assert len(lines) == 1 and len(lines[0].get("points", "").split()) == 2  # gap after run 1
    ys = [float(d.get("cy", "0")) for d in dots]
    assert ys[0] > ys[1] > ys[2]  # higher values sit higher
    assert svg.find(f"{NS}text").text == "recall & co"


def test_no_runs() -> None:
    assert "no runs" in line_chart([], title="mrr")


def _dots(svg: ET.Element) -> list[tuple[float, float]]:
    return [(float(d.get("cx", "0")), float(d.get("cy", "0")))
            for d in svg.findall(f"{NS}circle")]


def test_runs_are_placed_by_when_they_ran_and_the_ends_are_dated() -> None:
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    points = [Point("运行 1", 0.4, start), Point("run 2", 0.5, start + timedelta(days=1)),
              Point("run 3", 0.6, start + timedelta(days=10))]
    svg = ET.fromstring(line_chart(points, title="ndcg10"))
    xs = [x for x, _ in _dots(svg)]
    # Day 1 of 10: a tenth of the way, not the middle an even spacing would give.
    assert abs((xs[1] - xs[0]) / (xs[2] - xs[0]) - 0.1) < 0.01
    dates = [t.text for t in svg.findall(f"{NS}text") if t.get("class") == "date"]
    assert dates == ["2026-03-01", "2026-03-11"]


def test_runs_of_one_day_are_dated_to_the_minute_or_the_second() -> None:
    start = datetime(2026, 3, 1, 9, 0, 5, tzinfo=UTC)
    for later, expected in ((timedelta(hours=3), ["03-01 09:00", "03-01 12:00"]),
                            (timedelta(seconds=20), ["03-01 09:00:05", "03-01 09:00:25"])):
        svg = ET.fromstring(line_chart([Point("a", 0.1, start), Point("b", 0.2, start + later)],
                                       title="mrr"))
        assert [t.text for t in svg.findall(f"{NS}text") if t.get("class") == "date"] == expected


def test_a_value_of_one_leaves_the_tick_label_readable() -> None:
    svg = ET.fromstring(line_chart([Point("a", 1.0), Point("b", 1.0)], title="recall"))
    ticks = [t for t in svg.findall(f"{NS}text") if t.get("class") == "tick"]
    one = next(t for t in ticks if t.text == "1")
    first_dot_x = min(x for x, _ in _dots(svg))
    # The label ends at its x (text-anchor end); the first dot (r=2.5) starts to its right.
    assert first_dot_x - 2.5 > float(one.get("x", "0")) + 4


def test_without_times_the_runs_are_evenly_spaced_and_undated() -> None:
    svg = ET.fromstring(line_chart([Point("a", 0.1), Point("b", 0.2), Point("c", 0.3)],
                                   title="map"))
    xs = [x for x, _ in _dots(svg)]
    assert abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 0.01
    assert not [t for t in svg.findall(f"{NS}text") if t.get("class") == "date"]
    assert "x axis: run" in (svg.get("aria-label") or "")
