"""The Markdown summary (CI step summaries, --ragev-markdown)."""

from __future__ import annotations

import itertools

from pytest_ragev.evaluation import Outcome
from pytest_ragev.report import (
    render_markdown,
)
from tests.unit.report._models import METRICS, make_run, report_outcome


def test_markdown_sections(model: Outcome) -> None:
    text = render_markdown(model)
    assert text.startswith("## pytest-ragev: ❌ failed\n")
    assert "task `evaluation_ci_1_abcd_samples`" in text and "2 error(s)" in text
    assert "1 fallback(s)" in text and "12.5 s" in text
    for heading in ("### Failures", "### Metrics", "### Thresholds", "### Variants",
                    "### Most regressed questions (10)"):
        assert heading in text
    assert "- `ragev: recall " in text and "< threshold 0.900 (n=60)`" in text
    assert "| metric | baseline | current | Δ | 90% CI | p | n | status |" in text
    assert "🔴 regressed" in text
    assert "| k10 |" in text and "`pipeline.top_k`" in text
    assert "> ragev: 2 question(s) not in the baseline" in text


def test_markdown_variants_table_has_metrics_as_rows(model: Outcome) -> None:
    lines = render_markdown(model).splitlines()
    start = lines.index("### Variants") + 2
    table = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    header, _marks, *body = [line.strip("|").split(" | ") for line in table]
    assert [c.strip() for c in header][:3] == ["metric", "(base)", "k10"]
    assert len(header) == 4  # one column per configuration, not one per metric
    assert [row[0].strip() for row in body] == [*METRICS, "changed knobs"]
    assert all(len(row) == len(header) for row in body)
    assert "`pipeline.top_k`" in body[-1][2]

def test_markdown_escapes_user_text(model: Outcome) -> None:
    text = render_markdown(model)
    assert "<script>" not in text
    assert "&lt;script&gt;" in text
    # A pipe in a question must not split the table cell.
    regression_rows = [line for line in text.splitlines() if line.startswith("| 1 |")]
    assert regression_rows and "\\| pipe" in regression_rows[0]
    cells = regression_rows[0].replace("\\|", "").split("|")
    assert len(cells) == 7  # 5 columns plus the two outer edges


def test_markdown_without_baseline_lists_means() -> None:
    run = make_run(1)
    text = render_markdown(report_outcome(runs=[run]))
    assert text.startswith("## pytest-ragev: ✅ passed")
    assert "| metric | mean | n |" in text and "| recall |" in text
    assert "### Failures" not in text and "### Variants" not in text
