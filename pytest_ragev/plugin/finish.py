"""The end of a run on the controller: evaluate, write every report, set the exit status.

The only module that writes report files (the gate writes its own baseline) and sets
``session.exitstatus``; it never raises from the terminal summary.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

# The LogXML of --junitxml, whose suite-level properties CI dashboards read: pytest has
# no public way to reach it.
from _pytest.junitxml import xml_key

from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.io import atomic_write_json, atomic_write_text
from pytest_ragev.core.types import STATUS_FAILED
from pytest_ragev.evaluation import EvalInputs, Outcome, evaluate
from pytest_ragev.report import (
    ReportModel,
    final_report,
    junit_properties,
    render_html,
    render_markdown,
    terminal_lines,
)

if TYPE_CHECKING:
    from pytest_ragev.plugin.run import ActiveRun


def _unprefixed(message: str) -> str:
    # Errors of the computing modules start with "ragev: "; the summary adds its own.
    return message.removeprefix("ragev: ")


class Finisher:
    """``pytest_sessionfinish`` and ``pytest_terminal_summary`` of a ragev run."""

    def __init__(
        self, run: ActiveRun, inputs: Callable[[str | None], EvalInputs]
    ) -> None:
        self._run = run
        self._inputs = inputs
        self.outcome: Outcome | None = None
        self.usage_error: str | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # tryfirst: the verdict and the JUnit properties must exist before junitxml writes.
        run = self._run
        run.signals.hold()
        try:
            run.answerer_close()
            if run.is_worker or not run.expects_questions():
                # No question was to be answered: no verdict, and the last report stays.
                return
            self._finish(session, exitstatus)
        finally:
            run.signals.restore()

    def _interruption(self, session: pytest.Session, exitstatus: int) -> str | None:
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        stopped = session.shouldfail or session.shouldstop  # -x, --maxfail, ...
        records = self._run.records
        if stopped and not interrupted and records.finished < records.total:
            return f"stopped early ({stopped})"
        if not interrupted:
            return None
        terminated = self._run.signals.terminated_by
        return f"interrupted by {terminated}" if terminated else "interrupted"

    def _finish(self, session: pytest.Session, exitstatus: int) -> None:
        interrupted = self._interruption(session, exitstatus)
        try:
            outcome = evaluate(self._inputs(interrupted))
            self._write_reports(outcome)
        except RagevError as exc:
            # A usage error found while evaluating (a baseline a partial update cannot
            # merge into, a misbehaving custom metric): say it, exit 4.
            self._fail(session, _unprefixed(str(exc)), pytest.ExitCode.USAGE_ERROR)
            return
        except Exception as exc:
            # A bug of ours must not hide the run's own summary behind an INTERNALERROR.
            traceback.print_exc()
            self._fail(session, f"internal error while evaluating: {type(exc).__name__}: {exc}",
                       pytest.ExitCode.INTERNAL_ERROR)
            return
        self.outcome = outcome
        if outcome.gate.not_compared is not None:
            # The baseline could not be used: the reports above are written (metrics,
            # "not compared: <reason>"), and the run is a usage error.
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and self._run.records.records:
            session.exitstatus = pytest.ExitCode.OK
        if outcome.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _fail(self, session: pytest.Session, message: str, status: pytest.ExitCode) -> None:
        self.outcome = None
        self.usage_error = message
        session.exitstatus = status
        self._run.progress.write(STATUS_FAILED, message)

    def _write_reports(self, outcome: Outcome) -> None:
        run = self._run
        plan = run.plan
        report = final_report(outcome, dataset_id=run.dataset.dataset_id,
                              params=run.params(None))
        run.config.hook.pytest_ragev_report(report=report)
        if plan.report_json is not None:
            atomic_write_json(plan.report_json, report)
        md_path = plan.report_markdown
        summary_env = os.environ.get("GITHUB_STEP_SUMMARY")
        html_path = plan.report_html
        junit: Any = run.config.stash.get(xml_key, None)
        if md_path is None and not summary_env and html_path is None and junit is None:
            return
        model = ReportModel.from_outcome(outcome)
        if md_path is not None or summary_env:
            markdown = render_markdown(model)
            if md_path is not None:
                atomic_write_text(md_path, markdown)
            if summary_env:
                # GitHub's step summary is appended to, by design, across steps.
                with open(summary_env, "a", encoding="utf-8") as handle:
                    handle.write(markdown + "\n")
        if html_path is not None:
            atomic_write_text(html_path, render_html(model))
        if junit is not None:
            for name, value in junit_properties(model):
                junit.add_global_property(name, value)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._run.is_worker:
            return
        if self.usage_error:
            terminalreporter.write_line(f"ragev: error: {self.usage_error}", red=True, bold=True)
            return
        if self.outcome is None:
            return
        try:
            verbose = self._run.config.option.verbose
            summary = self._run.plan.options.summary
            for line, markup in terminal_lines(self.outcome, verbose=verbose,
                                               full=summary == "full"):
                terminalreporter.write_line(line, **markup)
        except Exception as exc:  # never raise from the terminal summary
            terminalreporter.write_line(f"ragev: could not print the summary: {exc!r}", red=True)
