"""The self-contained HTML report: charts, tables, escaping."""

from __future__ import annotations

import dataclasses

from pytest_ragev.evaluation import Outcome
from pytest_ragev.gate import (
    compare,
    top_regressions,
)
from pytest_ragev.report import (
    _svg,
    render_html,
)
from tests.unit.report._html import find, parse, rows, text, tree
from tests.unit.report._models import EVIL, METRICS, RULES, make_run, report_outcome


def test_html_has_its_charts(model: Outcome) -> None:
    page = render_html(model)
    doc = parse(page)
    svgs = [attrs for tag, attrs in doc.tags if tag == "svg"]
    assert any("bars" in (a.get("class") or "") for a in svgs)
    histograms = [a for a in svgs if "histogram" in (a.get("class") or "")]
    assert [a["data-metric"] for a in histograms] == list(METRICS)
    bars = [a for tag, a in doc.tags if tag == "rect" and a.get("class") == "bar"]
    # One bar per metric for baseline, current and each of the two variants.
    assert len(bars) == len(METRICS) * 4
    assert {a["data-series"] for a in bars} == {"baseline", "current", "k10", f"v{EVIL}"}
    bins = [a for tag, a in doc.tags if tag == "rect" and a.get("class") == "bin"]
    assert len(bins) == 20 * len(METRICS)
    # Every question's delta lands in a bin or in the "unchanged" count.
    recall_bins = bins[:20]
    assert sum(int(a["data-count"] or 0) for a in recall_bins) <= 60
    assert "of 60 unchanged" in "".join(doc.text)


# Elements without an end tag here (rect's <title> child is closed on its own).
def test_html_variants_table_has_metrics_as_rows(model: Outcome) -> None:
    page = tree(render_html(model))
    [table] = find(page, "table", "variants")
    body = rows(table)
    assert body[0] == ["metric", "(base)", "k10", f"v{EVIL}"]
    assert [row[0] for row in body[1:]] == [*METRICS, "changed knobs"]
    assert all(len(row) == 4 for row in body)
    assert body[-1][2:] == ["pipeline.top_k", "pipeline.top_k"]
    assert "▲" in body[1][2] or "▼" in body[1][2] or body[1][2].count(".") == 2
    # Every table sits in its own scrolling box, so none can widen the page.
    for wrapper in find(page, "div", "scroll"):
        assert [c["tag"] for c in wrapper["children"] if isinstance(c, dict)] == ["table"]  # type: ignore[attr-defined]
    assert len(find(page, "table")) == len(find(page, "div", "scroll"))


def test_html_histograms_have_a_count_axis(model: Outcome) -> None:
    page = tree(render_html(model))
    charts = find(page, "svg", "histogram")
    assert charts
    for chart in charts:
        counts = [int(r["attrs"]["data-count"]) for r in find(chart, "rect", "bin")]  # type: ignore[index]
        [axis] = find(chart, "g", "count-axis")
        peak = max(counts)
        assert axis["attrs"]["data-peak"] == str(peak)  # type: ignore[index]
        ticks = [text(t) for t in find(axis, "text", "tick")]
        assert ticks[0] == "0" and ticks[-1] == str(peak)
        assert "questions" in text(axis)


def test_html_says_no_change_and_unchanged_answers() -> None:
    baseline = make_run(1)
    current = make_run(2, shift=-0.1)
    # bleu4 and ndcg10 identical to the baseline on every question; answers identical too.
    samples = [
        dataclasses.replace(s, metrics={**s.metrics, "bleu4": b.metrics["bleu4"],
                                        "ndcg10": b.metrics["ndcg10"]},
                            generated_text=b.generated_text)
        for s, b in zip(current.samples, baseline.samples, strict=True)
    ]
    current = dataclasses.replace(current, samples=samples)
    model = report_outcome(
        runs=[current], comparisons=[compare(baseline, current, RULES)],
        baseline_runs={None: baseline}, regressions=top_regressions(baseline, current, 3),
        duration_s=3.5,
    )
    page = tree(render_html(model))
    assert [c["attrs"]["data-metric"] for c in find(page, "svg", "histogram")] == [  # type: ignore[index]
        "recall"]
    # The metrics no question moved on share one line, not an empty box each.
    assert not find(page, "div", "nochange")
    [line] = find(page, "p", "nochange")
    assert line["attrs"]["data-metrics"] == "ndcg10 bleu4"  # type: ignore[index]
    assert text(line) == "No change on ndcg10, bleu4: all 60 shared questions have the same value."
    [table] = find(page, "table", "regressions")
    body = rows(table)
    assert body[0][-2:] == ["answer before", "answer after"]
    assert [row[-1] for row in body[1:]] == ["unchanged"] * 3
    assert all(row[-2].startswith("answer ") for row in body[1:])
    facts = [text(f) for f in find(page, "span", "fact")]
    assert "3.5 s" in facts and "60 questions" in facts


def test_html_is_self_contained_and_escaped(model: Outcome) -> None:
    page = render_html(model)
    doc = parse(page)
    assert not [t for t, _ in doc.tags if t in ("link", "img", "iframe")]
    # One script, inline: it sorts and filters; nothing is fetched.
    assert [a for t, a in doc.tags if t == "script"] == [{}]
    assert "fetch(" not in page and "XMLHttpRequest" not in page and "import(" not in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    text = "".join(doc.text)
    assert EVIL in text  # shown to the reader, as text
    assert "<script>alert" not in page
    for heading in ("Metrics", "Means per metric", "Per-question changes against the baseline",
                    "Thresholds", "Variants", "Most regressed questions (10)"):
        assert heading in text
    assert "ragev: recall" in text and "failed" in text


def test_html_without_baseline_has_no_histograms() -> None:
    page = render_html(report_outcome(runs=[make_run(1)]))
    doc = parse(page)
    classes = [a.get("class") or "" for t, a in doc.tags if t == "svg"]
    assert classes == ["chart bars"]
    bars = [a for t, a in doc.tags if t == "rect" and a.get("class") == "bar"]
    assert {a["data-series"] for a in bars} == {"base"}


def test_histogram_binning() -> None:
    data = _svg.histogram([0.0, 0.0, 0.05, -0.05, -0.3, 0.31, 1e-9], bins=10)
    assert data.unchanged == 2 and data.total == 7
    assert data.span == 0.5
    assert sum(data.counts) == 5
    assert data.counts[4] == 1 and data.counts[5] == 2  # -0.05 | 0.05 and 1e-9
    assert data.counts[2] == 1 and data.counts[8] == 1
    assert _svg.histogram([]).counts == [0] * 20
