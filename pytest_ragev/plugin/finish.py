"""The end of a run on the controller: evaluate, write every report, set the exit status.

The only module that writes report files (the gate writes its own baseline) and sets
``session.exitstatus``; it never raises from the terminal summary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import traceback
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any, Literal

import pytest

# pytest has no public way to reach these: the LogXML of --junitxml (its suite-level
# properties are what CI dashboards read) and the base class of a failure's rendering.
from _pytest._code.code import TerminalRepr
from _pytest.junitxml import xml_key

from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.gcpause import paused_gc
from pytest_ragev.core.io import (
    WRITE_ERRORS,
    is_stream,
    write_error_cause,
    write_error_fix,
    write_output,
    write_output_json,
)
from pytest_ragev.core.types import STATUS_FAILED
from pytest_ragev.evaluation import EvalInputs, Outcome, RunPlan, evaluate
from pytest_ragev.pipelines import write_run_answers
from pytest_ragev.plugin.answering import Answerer
from pytest_ragev.plugin.collect import NodeIds
from pytest_ragev.plugin.progress import ProgressFile
from pytest_ragev.plugin.records import RecordCollector
from pytest_ragev.plugin.signals import SigtermGuard
from pytest_ragev.report import (
    REPORT_RECORDS,
    final_report,
    junit_properties,
    render_html,
    render_markdown,
    terminal_lines,
)


def _unprefixed(message: str) -> str:
    # Errors of the computing modules start with "ragev: "; the summary adds its own.
    return message.removeprefix("ragev: ")


#: What a failed write leaves at the path, said in its error line.
UNTOUCHED = "the previous file, if any, is untouched"


def write_error_line(
    what: str, path: Path | str, exc: BaseException, *, previous: str = UNTOUCHED
) -> str:
    """One line naming the report file that could not be written, why, what is at the
    path now (``previous``), and the fix."""
    cause, content = write_error_cause(exc)
    # Named by its absolute path: the path as typed in ragev.toml is relative to the
    # config file, the one on the command line to the working folder.
    path = os.path.abspath(path)
    fix = ("return JSON values (finite numbers, strings, lists, dicts) from "
           "pytest_ragev_report hooks and custom metrics" if content else
           write_error_fix(exc))
    return (f"could not write the {what} {path}: {cause}; {previous} and the other reports "
            f"were written: {fix}")


@dataclasses.dataclass(frozen=True)
class _Crash:
    message: str


class _VerdictRepr(TerminalRepr):
    """The failed verdict as pytest shows a failure.

    ``reprcrash.message`` is what ``FAILED ... - <message>`` and JUnit's failure message
    show (the first failure line); ``str()`` (JUnit's failure text) holds every line. The
    terminal's FAILURES section points at the ragev summary printed right below it,
    which lists the lines beside the metrics they are about, instead of printing them
    twice.
    """

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.reprcrash = _Crash(lines[0] if lines else "ragev: verdict failed")

    def toterminal(self, tw: Any) -> None:
        count = len(self.lines)
        tw.line(f"the verdict failed: {count} reason(s), listed with the metrics in the ragev "
                "summary below", red=True)

    def __str__(self) -> str:
        return "\n".join(self.lines)


#: Runs with at least this many answers print a progress line per end-of-run phase:
#: below it the end of a run takes well under a second and the lines would be noise.
PHASE_LINES_FROM = 2_000


def _end_current_line(reporter: Any) -> None:
    """End the terminal's current line, whatever started it: pytest's own
    ``ensure_newline`` only knows about lines it started with a file path, not a line
    of ``-q`` progress dots."""
    reporter.ensure_newline()  # ends a -v item line
    # No public way to ask whether the current line is still not empty (-q dots);
    # without the attribute the line is left as pytest would leave it.
    if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
        reporter.write("\n")


def _line_writer(reporter: Any) -> Callable[[str], None]:
    """``reporter.write_line`` on a line of its own (see :func:`_end_current_line`)."""

    def write(line: str) -> None:
        _end_current_line(reporter)
        reporter.write_line(line)

    return write


#: The running report's phase (``data.phase.name``) for each end-of-run phase.
_REPORTED_PHASES = {"scoring": "scoring", "gate": "gating", "baseline": "gating",
                    "verdict": "gating", "reports": "writing_reports"}


class _Phases:
    """Prints a line as each end-of-run phase starts, and their seconds at the end; tells
    the progress file each phase (what a poller of the running report sees)."""

    def __init__(self, write: Callable[[str], None] | None,
                 progress: ProgressFile | None = None) -> None:
        self._write = write
        self._progress = progress
        self._started = time.perf_counter()
        self._current: tuple[str, float] | None = None
        self._seconds: list[tuple[str, float]] = []

    def __call__(self, name: str) -> None:
        self._close()
        self._current = (name, time.perf_counter())
        if self._progress is not None:
            self._progress.end_phase(_REPORTED_PHASES.get(name.split(" ", 1)[0], "gating"))
        if self._write is not None:
            self._write(f"ragev: end of run: {name}")

    def _close(self) -> None:
        if self._current is not None:
            name, started = self._current
            label = name.split(" ", 1)[0] if name.startswith("scoring") else name
            self._seconds.append((label, time.perf_counter() - started))
            self._current = None

    def done(self) -> None:
        """The closing line: the whole end of the run and each phase's seconds."""
        self._close()
        if self._write is not None:
            parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self._seconds)
            self._write(f"ragev: end of run took {time.perf_counter() - self._started:.1f} s "
                        f"({parts})")


class Finisher:
    """The end of a ragev run: the verdict, the reports, the exit status, the summary.

    The run is concluded when the test loop ends (so the verdict, reported as one more
    test, comes before pytest's final progress mark), or at session finish when the
    loop was interrupted; the exit status is set at session finish, once pytest has
    computed its own.

    What it reads of the run, each given by the composition root: ``records`` (what
    the test reports carried), ``progress`` (the report file while the run goes),
    ``signals`` (held while the reports are written), ``answerer`` (the answering, if
    it started: its knowledge bases are closed, its usage error or deadline said),
    ``close_pipelines`` (releases every pipeline, answering or not), ``node_ids`` (the
    verdict's node id), ``inputs`` (what :func:`evaluate` reads, given how the run was
    interrupted), ``params`` (a configuration's settings snapshot; ``None``: the
    base) and ``save_verdicts`` (writes the judge's verdict store, told whether every
    question was answered; returns the lines of a write that failed). ``empty_shard``
    says whether the run is a shard that owns no question (``--ragev-shard`` with more
    shards than questions), which still concludes: its partial report lets the merge
    see every shard. Files and the status are written on the controller only
    (``is_worker``).
    """

    def __init__(
        self,
        *,
        config: pytest.Config,
        is_worker: bool,
        records: RecordCollector,
        progress: ProgressFile,
        signals: SigtermGuard,
        answerer: Callable[[], Answerer | None],
        close_pipelines: Callable[[], None],
        node_ids: Callable[[], NodeIds],
        inputs: Callable[[str | None], EvalInputs],
        params: Callable[[str | None], Mapping[str, Any]],
        save_verdicts: Callable[[bool], list[str]] | None = None,
        empty_shard: Callable[[], bool] = lambda: False,
    ) -> None:
        self._save_verdicts = save_verdicts
        self._empty_shard = empty_shard
        self._config = config
        self._is_worker = is_worker
        self._records = records
        self._progress = progress
        self._signals = signals
        self._answerer = answerer
        self._close_pipelines = close_pipelines
        self._node_ids = node_ids
        self._inputs = inputs
        self._params = params
        #: The plan the run was evaluated with (what the reports and the summary read).
        self._plan: RunPlan | None = None
        self._concluded = False
        self.outcome: Outcome | None = None
        self.usage_error: str | None = None
        #: One line per report that could not be written (the run then exits with 4).
        self.write_errors: list[str] = []
        self._status: pytest.ExitCode | None = None

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        # trylast: the innermost wrapper, so this runs before the terminal reporter writes
        # the final [100%]. An interrupted loop raises through here: concluded at finish.
        result = yield
        if not self._is_worker and self._expects_questions():
            # Every question is answered: the knowledge bases go before the end of the
            # run builds the baseline and the reports (a built-in KB's mapped index is
            # as large as its corpus, and the scoring never reads it).
            answerer = self._answerer()
            if answerer is not None:
                answerer.close_knowledge_bases()
            self._conclude(session, exitstatus=None)
        return result

    def _expects_questions(self) -> bool:
        """Whether the run answers questions (collected one, or received a record)."""
        return not self._config.option.collectonly and (
            self._records.expects_questions or self._empty_shard())

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # tryfirst: the verdict and the JUnit properties must exist before junitxml writes.
        self._signals.hold()
        try:
            self._close_pipelines()
            if self._is_worker or not self._expects_questions():
                # No question was to be answered: no verdict, and the last report stays.
                return
            if not self._concluded:
                self._conclude(session, exitstatus)
            self._set_status(session)
        finally:
            self._signals.restore()

    def _interruption(self, session: pytest.Session, exitstatus: int | None) -> str | None:
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        stopped = session.shouldfail or session.shouldstop  # -x, --maxfail, ...
        records = self._records
        if stopped and not interrupted and records.finished < records.total:
            return f"stopped early ({stopped})"
        if not interrupted:
            return None
        answerer = self._answerer()
        terminated = self._signals.terminated_by or (
            None if answerer is None else answerer.stopped_by)
        return f"interrupted by {terminated}" if terminated else "interrupted"

    def _conclude(self, session: pytest.Session, exitstatus: int | None) -> None:
        """Evaluate, write every report, report the verdict test; remember the status."""
        self._concluded = True
        self._progress.stop()
        answerer = self._answerer()
        answerer_error = None if answerer is None else answerer.usage_error
        if answerer_error is not None:
            # A question showed a usage error (a custom metric out of range): the run
            # stopped there; say it as the settings errors are said. The verdicts it
            # paid for are kept.
            self._store_verdicts(finished=False)
            self._fail(_unprefixed(answerer_error), pytest.ExitCode.USAGE_ERROR)
            return
        interrupted = self._interruption(session, exitstatus)
        self._store_verdicts(finished=interrupted is None)
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        try:
            inputs = self._inputs(interrupted)
            self._plan = inputs.plan
            phases = _Phases(_line_writer(reporter) if reporter is not None
                             and len(inputs.records) >= PHASE_LINES_FROM else None,
                             self._progress)
            with paused_gc():
                outcome = evaluate(inputs, phase=phases)
                phases("reports")
                self._write_reports(outcome, inputs.plan, dataset_id=inputs.dataset.dataset_id)
            phases.done()
        except RagevError as exc:
            # A usage error found while evaluating (a baseline a partial update cannot
            # merge into, a misbehaving custom metric): say it, exit 4.
            self._fail(_unprefixed(str(exc)), pytest.ExitCode.USAGE_ERROR)
            return
        except Exception as exc:
            # A bug of ours must not hide the run's own summary behind an INTERNALERROR.
            traceback.print_exc()
            self._fail(f"internal error while evaluating: {type(exc).__name__}: {exc}",
                       pytest.ExitCode.INTERNAL_ERROR)
            return
        self.outcome = outcome
        self._report_verdict(outcome)

    def _store_verdicts(self, *, finished: bool) -> None:
        """Write the verdict store; a store that cannot be written is a write error
        (exit status 4), never a traceback."""
        if self._save_verdicts is None:
            return
        try:
            self.write_errors += self._save_verdicts(finished)
        except Exception as exc:  # a bug of ours must not hide the run's summary
            traceback.print_exc()
            self.write_errors.append(f"internal error while writing the verdict store: "
                                     f"{type(exc).__name__}: {exc}")

    def _set_status(self, session: pytest.Session) -> None:
        if self._status is not None:
            session.exitstatus = self._status
            return
        if self.outcome is None:
            return
        gate = self.outcome.gate
        if gate.not_compared is not None or gate.write_error is not None or self.write_errors:
            # The baseline could not be used or written, or a report not written: the
            # other files are written (metrics, the reason), and the run is a usage error.
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and (
                self._records.records or self._empty_shard()):
            session.exitstatus = pytest.ExitCode.OK
        if self.outcome.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _report_verdict(self, outcome: Outcome) -> None:
        """The verdict as a test of its own, ``<config>::<dataset>::verdict``.

        It passes or fails with the verdict's lines, so pytest's last line, ``FAILED``
        lists and ``--junitxml`` (also under xdist: this runs on the controller, where
        junitxml and the terminal hear every report) show a failed verdict as the failed
        test CI tools look for.
        """
        node_ids = self._node_ids()
        nodeid = node_ids.verdict()
        location = (node_ids.prefix, None, "ragev verdict")
        # verdict_failures() names the questions that raised: said once.
        lines = outcome.verdict_failures()
        hook = self._config.hook
        hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        for when in ("setup", "call", "teardown"):
            outcome_word: Literal["passed", "failed"] = (
                "failed" if outcome.failed and when == "call" else "passed")
            hook.pytest_runtest_logreport(report=pytest.TestReport(
                nodeid=nodeid, location=location, keywords={"ragev": 1}, outcome=outcome_word,
                longrepr=_VerdictRepr(lines) if outcome_word == "failed" else None,
                when=when, sections=[], duration=0.0, user_properties=[],
            ))
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)

    def _fail(self, message: str, status: pytest.ExitCode) -> None:
        self.outcome = None
        self.usage_error = message
        self._status = status
        self._progress.write(STATUS_FAILED, message)

    def _write(self, what: str, path: Path | str, write: Callable[[], object]) -> bool:
        """Run ``write``; a failure is one line naming ``what``/``path``, never a traceback,
        and the other reports are still written. Whether it was written."""
        try:
            write()
        except WRITE_ERRORS as exc:  # the disk, or content strict JSON refuses
            self.write_errors.append(write_error_line(what, path, exc))
            return False
        return True

    def _write_reports(self, outcome: Outcome, plan: RunPlan, *, dataset_id: str) -> None:
        config = self._config
        report = final_report(outcome, dataset_id=dataset_id,
                              params=self._params(None))
        config.hook.pytest_ragev_report(report=report)
        targets = (plan.report_json, plan.report_markdown, plan.report_html)
        if any(path is not None and is_stream(path) for path in targets):
            # A report to /dev/stdout starts on a line of its own, not after the dots of
            # pytest's progress line (-q included).
            terminal = config.pluginmanager.get_plugin("terminalreporter")
            if terminal is not None:
                _end_current_line(terminal)
        capture = config.pluginmanager.get_plugin("capturemanager")
        # A report may go to /dev/stdout: written past pytest's output capture.
        with (capture.global_and_fixture_disabled() if capture is not None
              else contextlib.nullcontext()):
            self._write_files(outcome, report, plan)

    def _write_files(self, outcome: Outcome, report: dict[str, Any], plan: RunPlan) -> None:
        json_path = plan.report_json
        if json_path is not None:
            self._write_json_report(json_path, report)
        answers_path = plan.options.answers_out
        if answers_path is not None:
            records = [sample for run in outcome.runs for sample in run.samples]
            self._write("answers file", answers_path,
                        lambda: write_run_answers(answers_path, records))
        md_path = plan.report_markdown
        summary_env = os.environ.get("GITHUB_STEP_SUMMARY")
        html_path = plan.report_html
        junit: Any = self._config.stash.get(xml_key, None)
        if md_path is None and not summary_env and html_path is None and junit is None:
            return
        if md_path is not None or summary_env:
            markdown = render_markdown(outcome)
            if md_path is not None:
                self._write("Markdown report", md_path, lambda: write_output(md_path, markdown))
            if summary_env:
                self._write("step summary ($GITHUB_STEP_SUMMARY)", summary_env,
                            lambda: _append(summary_env, markdown + "\n"))
        if html_path is not None:
            self._write("HTML report", html_path,
                        lambda: write_output(html_path, render_html(outcome)))
        if junit is not None:
            for name, value in junit_properties(outcome):
                junit.add_global_property(name, value)

    def _write_json_report(self, path: Path, report: dict[str, Any]) -> None:
        try:
            write_output_json(path, report, records=REPORT_RECORDS)
        except WRITE_ERRORS as exc:
            # Not left saying "pending" or "running" (a poller would wait forever): the
            # failure report, without what the report hooks added, if the file takes it;
            # else the progress file rewrites this run's stale report in place (a full
            # disk has no room for the atomic write's second copy) or removes it.
            progress = self._progress
            instead = "this failure report stands in its place"
            written = progress.write(
                STATUS_FAILED, write_error_line("JSON report", path, exc, previous=instead),
                quiet=True)
            previous = ("a failure report (status 3) stands in its place" if written
                        else progress.stale or UNTOUCHED)
            self.write_errors.append(write_error_line("JSON report", path, exc,
                                                      previous=previous))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._is_worker:
            return
        if self.usage_error:
            terminalreporter.write_line(f"ragev: error: {self.usage_error}", red=True, bold=True)
            return
        if self.outcome is None or self._plan is None:
            return
        try:
            verbose = self._config.option.verbose
            summary = self._plan.options.summary
            for line, markup in terminal_lines(self.outcome, verbose=verbose,
                                               full=summary == "full",
                                               slices=self._plan.options.slices):
                terminalreporter.write_line(line, **markup)
            for line in self.write_errors:
                terminalreporter.write_line(f"ragev: error: {line}", red=True, bold=True)
        except Exception as exc:  # never raise from the terminal summary
            terminalreporter.write_line(f"ragev: could not print the summary: {exc!r}", red=True)


def _append(path: str, text: str) -> None:
    # GitHub's step summary is appended to, by design, across steps.
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)
