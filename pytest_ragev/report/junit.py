"""JUnit XML properties: the run's figures where CI dashboards read test-suite metadata."""

from __future__ import annotations

from pytest_ragev.core.results import RunResult
from pytest_ragev.evaluation import Outcome, chunk_share, count_kinds, usage
from pytest_ragev.report._format import pipeline_label
from pytest_ragev.report._slices import slice_rows


def _run_label(run: RunResult) -> str:
    return "base" if run.variant is None else run.variant


def junit_properties(outcome: Outcome) -> list[tuple[str, str]]:
    """``(name, value)`` pairs for ``record_testsuite_property``.

    ``ragev.verdict``, counts (``ragev.errors.<type>`` per error type), the base run's
    ``ragev.pipeline``, ``ragev.chunks``/``ragev.unattributed_chunks`` (when the pipeline
    returned texts), ``ragev.latency_p50_s``/``_p95_s`` and ``ragev.tokens.prompt``/
    ``.completion``/``.total`` (when its answers reported them), then ``ragev.<metric>``
    per metric of the base run, ``ragev.<metric>.baseline``/``.delta``/``.status`` when
    compared, and ``ragev.<variant>.<metric>`` per variant; per slice of the base run
    (language, tag: ``ragev.slice.lang:zh.questions``, ``ragev.slice.lang:zh.<metric>``,
    and its ``.delta``/``.status`` when ``[gate] slices`` tested it). Means are written
    with six decimals.
    """
    props: list[tuple[str, str]] = [
        ("ragev.verdict", "passed" if outcome.passed else "failed"),
        ("ragev.failures", str(len(outcome.verdict_failures()))),
        ("ragev.errors", str(outcome.errors)),
        ("ragev.fallbacks", str(outcome.fallbacks)),
    ]
    for kind, count in count_kinds(outcome.error_list):
        props.append((f"ragev.errors.{kind.replace(' ', '_')}", str(count)))
    if outcome.facts.task_id:
        props.append(("ragev.task_id", outcome.facts.task_id))
    base = outcome.base
    if base is not None:
        props.append(("ragev.dataset", base.dataset_id))
        props.append(("ragev.questions", str(len(base.samples))))
        label = pipeline_label(base)
        if label:
            props.append(("ragev.pipeline", label))
        share = chunk_share(base.samples)
        if share.chunks:
            props.append(("ragev.chunks", str(share.chunks)))
            props.append(("ragev.unattributed_chunks", str(share.unattributed)))
        figures = usage(base.samples, outcome.pricing)
        if figures.latency_n:
            props.append(("ragev.latency_p50_s", _plain(figures.latency_p50)))
            props.append(("ragev.latency_p95_s", _plain(figures.latency_p95)))
        if figures.tokens_n:
            props.append(("ragev.tokens.prompt", str(figures.prompt_tokens)))
            props.append(("ragev.tokens.completion", str(figures.completion_tokens)))
            props.append(("ragev.tokens.total", str(figures.total_tokens)))
        for name, item in base.summary.items():
            props.append((f"ragev.{name}", _plain(item.mean)))
    if outcome.comparison is not None:
        for comparison in outcome.comparison.metrics:
            key = f"ragev.{comparison.metric}"
            props.append((f"{key}.baseline", _plain(comparison.baseline_mean)))
            props.append((f"{key}.delta", _plain(comparison.delta)))
            props.append((f"{key}.status", comparison.status))
    for run in outcome.variants:
        for name, item in run.summary.items():
            props.append((f"ragev.{_run_label(run)}.{name}", _plain(item.mean)))
    if base is not None:
        for row in slice_rows(outcome, base.variant):
            key = f"ragev.slice.{row.item.key}"
            props.append((f"{key}.questions", str(row.item.questions)))
            for name, item in row.item.summary.items():
                props.append((f"{key}.{name}", _plain(item.mean)))
                compared = row.metric(name)
                if compared is not None:
                    props.append((f"{key}.{name}.delta", _plain(compared.delta)))
                    props.append((f"{key}.{name}.status", compared.status))
    return props


def _plain(value: float | None) -> str:
    # Machine-read values: ASCII minus, fixed decimals, "nan" never appears.
    return "n/a" if value is None else f"{value:.6f}"
