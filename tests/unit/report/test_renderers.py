"""Report renderers: Markdown, JUnit properties, terminal text and the HTML report."""

from __future__ import annotations

import dataclasses
import itertools
import random
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.gate import (
    GateRules,
    check_thresholds,
    compare,
    compare_variants,
    thresholds_from_table,
    top_regressions,
)
from pytest_ragev.report import (
    ReportModel,
    Verdict,
    _svg,
    junit_properties,
    render_html,
    render_markdown,
)
from pytest_ragev.report.terminal import (
    render_comparison,
    render_question_diffs,
    render_variant_table,
    variant_cell,
)

METRICS = ("recall", "ndcg10", "bleu4")
EVIL = "<script>alert('x')</script> | pipe & “quotes”"


def make_run(
    seed: int, *, shift: float = 0.0, variant: str | None = None, top_k: int = 5, n: int = 60
) -> RunResult:
    rng = random.Random(seed)
    level = random.Random(0)
    samples = []
    for qid in range(1, n + 1):
        base = level.random()
        # Questions 1-8 are the ones a bad change breaks; the others only jitter.
        broken = shift < 0 and qid <= 8
        values = {
            m: min(1.0, max(0.0, base + (shift * 4 if broken else 0.0) + rng.gauss(0, 0.01)))
            for m in METRICS
        }
        question = f"问题 {qid}: {EVIL}" if qid == 1 else f"问题 {qid}：什么是检索增强生成？"
        samples.append(SampleResult(
            qid=qid,
            question=question,
            retrieval_gt=[[qid * 10, qid * 10 + 1]],
            retrieval_ids=[qid * 10 + 5, qid * 10] if broken else [qid * 10, qid * 10 + 1, 7],
            generated_text=f"answer {qid} {EVIL}" if broken else f"answer {qid}",
            generated_gt="ref",
            metrics=values,
            variant=variant,
        ))
    summary = {
        m: MetricSummary(m, sum(s.metrics[m] for s in samples) / n, n) for m in METRICS
    }
    return RunResult(
        dataset_id="samples", fingerprint="0123456789abcdef" * 4, dataset_stats={},
        profile="weknora-0.9", params={"pipeline": {"top_k": top_k}}, params_hash="x",
        samples=samples, summary=summary, variant=variant,
    )


RULES = GateRules(resamples=2000, correction="holm")


def full_model() -> ReportModel:
    baseline = make_run(1)
    current = make_run(2, shift=-0.1)
    variants = [make_run(3, shift=0.02, variant="k10", top_k=10),
                make_run(4, variant=f"v{EVIL}", top_k=3)]
    comparison = compare(baseline, current, RULES)
    checks = thresholds_from_table({"recall": 0.9, "bleu4": 0.1}, source="ragev.toml",
                                   directions=dict.fromkeys(METRICS, "higher"))
    thresholds = check_thresholds(current, checks)
    failures = [*(t.reason for t in thresholds if t.reason), *comparison.failure_lines]
    return ReportModel.build(
        runs=[current, *variants],
        passed=not failures,
        failures=failures,
        thresholds=thresholds,
        comparisons=[comparison],
        baseline_runs={None: baseline},
        variant_table=compare_variants(current, variants, RULES),
        regressions=top_regressions(baseline, current, 10),
        errors=2,
        fallbacks=1,
        task_id="evaluation_ci_1_abcd_samples",
        start_time="2026-01-02T03:04:05.000+00:00",
        duration_s=12.5,
        baseline_path="ragev-baseline.json",
        notes=["ragev: 2 question(s) not in the baseline (added, not compared): 61, 62"],
    )


@pytest.fixture(scope="module")
def model() -> ReportModel:
    return full_model()


# ----------------------------------------------------------------- markdown


def test_markdown_sections(model: ReportModel) -> None:
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


def test_markdown_variants_table_has_metrics_as_rows(model: ReportModel) -> None:
    lines = render_markdown(model).splitlines()
    start = lines.index("### Variants") + 2
    table = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    header, _marks, *body = [line.strip("|").split(" | ") for line in table]
    assert [c.strip() for c in header][:3] == ["metric", "(base)", "k10"]
    assert len(header) == 4  # one column per configuration, not one per metric
    assert [row[0].strip() for row in body] == [*METRICS, "changed knobs"]
    assert all(len(row) == len(header) for row in body)
    assert "`pipeline.top_k`" in body[-1][2]

def test_markdown_escapes_user_text(model: ReportModel) -> None:
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
    text = render_markdown(ReportModel.build(runs=[run], passed=True))
    assert text.startswith("## pytest-ragev: ✅ passed")
    assert "| metric | mean | n |" in text and "| recall |" in text
    assert "### Failures" not in text and "### Variants" not in text


# ----------------------------------------------------------------- junit


def test_junit_properties(model: ReportModel) -> None:
    props = dict(junit_properties(model))
    assert props["ragev.verdict"] == "failed"
    assert props["ragev.errors"] == "2" and props["ragev.fallbacks"] == "1"
    assert props["ragev.task_id"] == "evaluation_ci_1_abcd_samples"
    assert props["ragev.questions"] == "60"
    recall = model.runs[0].summary["recall"].mean
    assert props["ragev.recall"] == f"{recall:.6f}"
    assert props["ragev.recall.status"] == "regressed"
    assert float(props["ragev.recall.delta"]) < 0
    assert "ragev.k10.recall" in props
    names = [name for name, _ in junit_properties(model)]
    assert len(names) == len(set(names))
    passed = dict(junit_properties(ReportModel.build(runs=[make_run(1)], passed=True)))
    assert passed["ragev.verdict"] == "passed" and passed["ragev.failures"] == "0"


# ----------------------------------------------------------------- terminal text


def test_terminal_renderers(model: ReportModel) -> None:
    assert model.comparison is not None and model.variant_table is not None
    lines = render_comparison(model.comparison)
    assert lines[0] == "ragev: base configuration against the baseline, 60 shared questions:"
    assert lines[1].split() == ["metric", "baseline", "current", "Δ", "90%", "CI", "p", "n",
                                "status"]
    assert any(line.split()[0] == "recall" and line.endswith("regressed") for line in lines)
    # Columns line up: every row as long as the header once trailing status is dropped.
    assert len({line.index(" 60 ") for line in lines[2:]}) == 1

    diff_lines = render_question_diffs(model.regressions)
    assert diff_lines[0].startswith("ragev: 10 most regressed question(s)")
    assert any("retrieved [10*, 11*, 7] → [15, 10*]" in line for line in diff_lines)
    assert any(line.strip().startswith("answer    'answer 1' → ") for line in diff_lines)

    table_lines = render_variant_table(model.variant_table)
    table = model.variant_table
    names = [str(r.name) for r in table.rows]
    assert table_lines[1].split()[:2] == ["metric", "(base)"]
    assert all(name in table_lines[1] for name in names)
    recall = next(line for line in table_lines if line.strip().startswith("recall"))
    assert "▲" in recall
    assert "  k10 changes: pipeline.top_k" in table_lines
    # Right-aligned figures: every metric row's last cell ends at the same column.
    first = next(i for i, line in enumerate(table_lines) if line.split()[:1] == [table.metrics[0]])
    metric_rows = table_lines[first : first + len(table.metrics)]
    assert [row.split()[0] for row in metric_rows] == list(table.metrics)
    last = table.rows[-1]
    ends = {
        row.index(cell) + len(cell)
        for row, cell in (
            (row, variant_cell(last.cells[m].mean, last.cells[m].delta, last.cells[m].marker or " ").rstrip())
            for row, m in zip(metric_rows, table.metrics, strict=True)
        )
    }
    assert len(ends) == 1


# ----------------------------------------------------------------- html


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Collector:
    collector = _Collector()
    collector.feed(page)
    collector.close()
    return collector


def test_html_has_its_charts(model: ReportModel) -> None:
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
_VOID = frozenset({"br", "meta", "line", "rect", "img", "hr", "input", "link"})


class _Tree(HTMLParser):
    """The page as nested elements: enough to check a table's rows or an SVG's ticks."""

    def __init__(self) -> None:
        super().__init__()
        self.root: dict[str, object] = {"tag": "root", "attrs": {}, "children": []}
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node: dict[str, object] = {"tag": tag, "attrs": dict(attrs), "children": []}
        children = self.stack[-1]["children"]
        assert isinstance(children, list)
        children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        children = self.stack[-1]["children"]
        assert isinstance(children, list)
        children.append({"tag": tag, "attrs": dict(attrs), "children": []})

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        # Misnested markup is a rendering bug: fail instead of guessing.
        assert self.stack[-1]["tag"] == tag, f"</{tag}> closes <{self.stack[-1]['tag']}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        children = self.stack[-1]["children"]
        assert isinstance(children, list)
        children.append(data)


Node = dict[str, object]


def tree(page: str) -> Node:
    parser = _Tree()
    parser.feed(page)
    parser.close()
    assert len(parser.stack) == 1, "unclosed elements"
    return parser.root


def find(node: Node, tag: str, css: str | None = None) -> list[Node]:
    found = []
    for child in node["children"]:  # type: ignore[attr-defined]
        if isinstance(child, dict):
            classes = (child["attrs"].get("class") or "").split()
            if child["tag"] == tag and (css is None or css in classes):
                found.append(child)
            found.extend(find(child, tag, css))
    return found


def text(node: Node) -> str:
    return "".join(c if isinstance(c, str) else text(c) for c in node["children"])  # type: ignore[attr-defined]


def rows(table: Node) -> list[list[str]]:
    return [[text(cell) for cell in row["children"] if isinstance(cell, dict)]  # type: ignore[attr-defined]
            for row in find(table, "tr")]


def test_html_variants_table_has_metrics_as_rows(model: ReportModel) -> None:
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


def test_html_histograms_have_a_count_axis(model: ReportModel) -> None:
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
    # bleu4 identical to the baseline on every question; answers identical too.
    samples = [
        dataclasses.replace(s, metrics={**s.metrics, "bleu4": b.metrics["bleu4"]},
                            generated_text=b.generated_text)
        for s, b in zip(current.samples, baseline.samples, strict=True)
    ]
    current = dataclasses.replace(current, samples=samples)
    model = ReportModel.build(
        runs=[current], passed=False, comparisons=[compare(baseline, current, RULES)],
        baseline_runs={None: baseline}, regressions=top_regressions(baseline, current, 3),
        duration_s=3.5,
    )
    page = tree(render_html(model))
    assert [c["attrs"]["data-metric"] for c in find(page, "svg", "histogram")] == [  # type: ignore[index]
        "recall", "ndcg10"]
    [box] = find(page, "div", "nochange")
    assert box["attrs"]["data-metric"] == "bleu4"  # type: ignore[index]
    assert "no change: all 60 shared questions have the same value" in text(box)
    [table] = find(page, "table", "regressions")
    body = rows(table)
    assert body[0][-2:] == ["answer before", "answer after"]
    assert [row[-1] for row in body[1:]] == ["unchanged"] * 3
    assert all(row[-2].startswith("answer ") for row in body[1:])
    facts = [text(f) for f in find(page, "span", "fact")]
    assert "3.5 s" in facts and "60 questions" in facts


def test_html_is_self_contained_and_escaped(model: ReportModel) -> None:
    page = render_html(model)
    doc = parse(page)
    assert not [t for t, _ in doc.tags if t in ("script", "link", "img", "iframe")]
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
    page = render_html(ReportModel.build(runs=[make_run(1)], passed=True))
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


def test_model_build_computes_duration_and_properties() -> None:
    runs = [make_run(1), make_run(2, variant="b")]
    model = ReportModel.build(runs=runs, passed=True, start_time="2000-01-01T00:00:00+00:00")
    assert model.duration_s is not None and model.duration_s > 0
    assert model.base is runs[0] and model.variants == [runs[1]]
    assert model.comparison is None and model.baseline is None
    assert model.verdict == Verdict(passed=True, failures=[])
    assert ReportModel.build(runs=runs, passed=True, start_time="junk").duration_s is None


def test_write_example_report(tmp_path: Path, model: ReportModel) -> None:
    # The renderer's output is a plain string; writing it is all a caller does.
    target = tmp_path / "report.html"
    target.write_text(render_html(model), encoding="utf-8")
    assert target.stat().st_size > 5000


def test_reports_of_a_variant_only_session_name_the_variant() -> None:
    variant = make_run(3, variant="k10")
    alone = ReportModel.build(runs=[variant], passed=True)
    markdown = render_markdown(alone)
    assert "The base configuration did not run; variants in this run: `k10`." in markdown
    assert "Means of variant `k10`:" in markdown and "| recall |" in markdown
    page = tree(render_html(alone))
    assert "The base configuration did not run; variants in this run: k10." in text(page)
    bars = [r["attrs"]["data-series"] for r in find(page, "rect", "bar")]  # type: ignore[index]
    assert set(bars) == {"k10"}
    compared = ReportModel.build(
        runs=[variant], passed=True, comparisons=[compare(make_run(4, variant="k10"), variant,
                                                          RULES)],
        baseline_runs={"k10": make_run(4, variant="k10")},
    )
    markdown = render_markdown(compared)
    assert "#### Variant k10 against its baseline" in markdown
    assert "Means of variant" not in markdown


def test_reports_say_when_p_is_adjusted(model: ReportModel) -> None:
    # The fixture's comparison gates three metrics with the Holm correction.
    note = "p is adjusted for the 3 metrics tested together (Holm)."
    assert note in render_markdown(model)
    assert note in text(tree(render_html(model)))
    baseline, current = make_run(1), make_run(2, shift=-0.1)
    plain = ReportModel.build(
        runs=[current], passed=False, baseline_runs={None: baseline},
        comparisons=[compare(baseline, current, GateRules(resamples=2000, correction="none"))],
    )
    assert "adjusted" not in render_markdown(plain)


def test_facts_of_a_variant_only_session_count_every_variant() -> None:
    runs = [make_run(3, variant="k10"), make_run(4, variant="k20")]
    model = ReportModel.build(runs=runs, passed=True)
    assert not model.base_ran
    assert "2 variant(s)" in render_markdown(model)
    assert "2 variant(s)" in text(tree(render_html(model)))
    names = "The base configuration did not run; variants in this run: "
    assert names + "`k10`, `k20`." in render_markdown(model)
    assert names + "k10, k20." in text(tree(render_html(model)))
    both = ReportModel.build(runs=[make_run(1), runs[0]], passed=True)
    assert both.base_ran and "1 variant(s)" in render_markdown(both)
