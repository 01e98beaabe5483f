"""Report renderers: terminal text, Markdown (CI summaries), JUnit properties, HTML.

Each renderer reads a :class:`pytest_ragev.report.model.ReportModel` (plain data) and
returns text; writing files is the caller's business. Nothing here imports pytest or
numpy, so the plugin can import the package when it loads.
"""

from __future__ import annotations

from pytest_ragev.report.html import render_html
from pytest_ragev.report.junit import junit_properties
from pytest_ragev.report.markdown import render_markdown
from pytest_ragev.report.model import ReportModel, Verdict

__all__ = ["ReportModel", "Verdict", "junit_properties", "render_html", "render_markdown"]
