"""Reports of a run: the JSON report, the terminal summary, Markdown, JUnit properties, HTML.

Every renderer is a pure function of one :class:`~pytest_ragev.evaluation.Outcome`
(:mod:`.reader` reads a saved report or baseline back into one). Writing files is the
plugin shell's business.
"""

from __future__ import annotations

from pytest_ragev.report.html import render_html
from pytest_ragev.report.json import REPORT_RECORDS, final_report, progress_report
from pytest_ragev.report.junit import junit_properties
from pytest_ragev.report.markdown import render_markdown
from pytest_ragev.report.terminal import terminal_lines

__all__ = [
    "REPORT_RECORDS",
    "final_report",
    "junit_properties",
    "progress_report",
    "render_html",
    "render_markdown",
    "terminal_lines",
]
