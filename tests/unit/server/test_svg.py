"""The trend chart: one dot per run with a value, gaps for runs without one, escaped text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

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
