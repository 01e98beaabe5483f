"""JUnit XML properties: the run's figures where CI dashboards read test-suite metadata."""

from __future__ import annotations

from pytest_ragev.core.results import RunResult
from pytest_ragev.report.model import ReportModel


def _run_label(run: RunResult) -> str:
    return "base" if run.variant is None else run.variant


def junit_properties(model: ReportModel) -> list[tuple[str, str]]:
    """``(name, value)`` pairs for ``record_testsuite_property``.

    ``ragev.verdict``, counts, then ``ragev.<metric>`` per metric of the base run,
    ``ragev.<metric>.baseline``/``.delta``/``.status`` when compared, and
    ``ragev.<variant>.<metric>`` per variant. Means are written with six decimals.
    """
    props: list[tuple[str, str]] = [
        ("ragev.verdict", "passed" if model.verdict.passed else "failed"),
        ("ragev.failures", str(len(model.verdict.failures))),
        ("ragev.errors", str(model.errors)),
        ("ragev.fallbacks", str(model.fallbacks)),
    ]
    if model.task_id:
        props.append(("ragev.task_id", model.task_id))
    base = model.base
    if base is not None:
        props.append(("ragev.dataset", base.dataset_id))
        props.append(("ragev.questions", str(len(base.samples))))
        for name, item in base.summary.items():
            props.append((f"ragev.{name}", _plain(item.mean)))
    if model.comparison is not None:
        for comparison in model.comparison.metrics:
            key = f"ragev.{comparison.metric}"
            props.append((f"{key}.baseline", _plain(comparison.baseline_mean)))
            props.append((f"{key}.delta", _plain(comparison.delta)))
            props.append((f"{key}.status", comparison.status))
    for run in model.variants:
        for name, item in run.summary.items():
            props.append((f"ragev.{_run_label(run)}.{name}", _plain(item.mean)))
    return props


def _plain(value: float | None) -> str:
    # Machine-read values: ASCII minus, fixed decimals, "nan" never appears.
    return "n/a" if value is None else f"{value:.6f}"
