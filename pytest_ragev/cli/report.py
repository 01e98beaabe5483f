"""``ragev report show|compare|html|markdown``: saved reports, without re-running anything.

A CI job that kept the JSON report of a run (``--ragev-report``) or a baseline file can
print it again as the plugin's summary (``show``), gate it against another saved file
with the plugin's own gate (``compare``: exit 1 on a regression), or render it as the
plugin's HTML or Markdown report. Each command reads either kind of file, by its content.

Exit status: 0 done (``compare``: the verdict passed), 1 ``compare``'s verdict failed,
2 bad input: a missing file, a file that is neither a report nor a baseline, files that
cannot be compared (one line saying why).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace

from pytest_ragev.cli import CommandAdder, warn
from pytest_ragev.config import load_config
from pytest_ragev.core.io import atomic_write_json, atomic_write_text, dumps_json
from pytest_ragev.core.types import METRIC_NAMES
from pytest_ragev.dataset import Dataset, corpus_fingerprint, load_dataset
from pytest_ragev.evaluation import Outcome
from pytest_ragev.gate import GateRules
from pytest_ragev.report import (
    REPORT_RECORDS,
    final_report,
    render_html,
    render_markdown,
    terminal_lines,
)
from pytest_ragev.report.reader import (
    ReportError,
    Saved,
    compare_saved,
    outcome_from_report,
    read_saved,
)

#: ANSI codes of the terminal markup ``terminal_lines`` gives each line.
_ANSI = {"red": "31", "green": "32", "yellow": "33", "bold": "1"}


def _rules(config: str | None, saved: Sequence[Saved]) -> GateRules:
    """The ``[gate]`` rules of ``config`` (``[report] top_regressions`` when ``[gate]``
    does not set its own, as in the plugin); the defaults without a config."""
    if config is None:
        return GateRules()
    ragev = load_config(config)
    names = [*METRIC_NAMES]
    names += [m for s in saved for run in s.runs for m in run.summary if m not in names]
    return GateRules.from_config(ragev, metric_names=names)


def _paint(line: str, markup: dict[str, bool], color: bool) -> str:
    codes = [_ANSI[name] for name, on in markup.items() if on and name in _ANSI]
    if not color or not codes or not line:
        return line
    return f"\033[{';'.join(codes)}m{line}\033[0m"


def _print_summary(outcome: Outcome, args: argparse.Namespace) -> None:
    """The plugin's terminal summary of ``outcome``, as ``-v``/``--summary`` ask."""
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    # A saved report is read to be looked at: its slices are shown when it has any.
    lines = list(terminal_lines(outcome, verbose=args.verbose, full=args.summary == "full",
                                slices=True))
    # The plugin's summary opens with a blank line to set it off pytest's own output.
    while lines and not lines[0][0]:
        lines.pop(0)
    for line, markup in lines:
        print(_paint(line, markup, color))


def _write(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path`` atomically (``-``: standard output)."""
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise ReportError(f"cannot write the {what} to {path} ({exc.strerror or exc}); "
                          "choose a path in a folder you can write to") from None
    print(f"wrote {path}")


def _show(args: argparse.Namespace) -> int:
    saved = read_saved(args.path)
    outcome = outcome_from_report(saved, rules=_rules(args.config, [saved]))
    _print_summary(outcome, args)
    return 0


def _render(args: argparse.Namespace, render: str) -> int:
    saved = read_saved(args.path)
    outcome = outcome_from_report(saved, rules=_rules(args.config, [saved]))
    if render == "html":
        _write(args.output, render_html(outcome), "HTML report")
    else:
        _write(args.output, render_markdown(outcome), "Markdown report")
    return 0


def _html(args: argparse.Namespace) -> int:
    return _render(args, "html")


def _markdown(args: argparse.Namespace) -> int:
    return _render(args, "markdown")


def _on_dataset(current: Saved, dataset: Dataset, folder: str) -> Saved:
    """``current`` with its runs matched to the dataset folder they ran on.

    A ``--ragev-limit n`` run carries the fingerprint of the first ``n`` questions: as
    in the plugin, it is the full dataset with questions left out.
    """
    runs = []
    for run in current.runs:
        limit = run.params.get("dataset", {}).get("limit")
        if run.fingerprint == dataset.fingerprint:
            runs.append(run)
        elif isinstance(limit, int) and dataset.limit(limit).fingerprint == run.fingerprint:
            runs.append(replace(run, fingerprint=dataset.fingerprint))
        else:
            raise ReportError(
                f"--dataset {folder} has fingerprint {dataset.fingerprint[:12]}, but "
                f"{current.source} ran on {run.fingerprint[:12]}; pass the dataset folder "
                "the current run ran on"
            )
    return replace(current, runs=tuple(runs))


def _compare(args: argparse.Namespace) -> int:
    base = read_saved(args.base)
    current = read_saved(args.current)
    rules = _rules(args.config, [base, current])
    hashes = corpus = passages = None
    if args.dataset is not None:
        dataset = load_dataset(args.dataset)
        for line in dataset.warnings:
            warn(line)
        current = _on_dataset(current, dataset, args.dataset)
        hashes = dataset.question_hashes
        corpus = corpus_fingerprint(dataset.corpus)
        passages = dataset.stats.passages
    outcome = compare_saved(base, current, rules, hashes=hashes, corpus_fingerprint=corpus,
                            passages_after=passages)
    _print_summary(outcome, args)
    _write_outputs(outcome, args)
    return 1 if outcome.failed else 0


def _write_outputs(outcome: Outcome, args: argparse.Namespace) -> None:
    """The reports of the comparison the options ask for (as the plugin writes them)."""
    if args.json is not None:
        base = outcome.runs[0]
        report = final_report(outcome, dataset_id=base.dataset_id, params=base.params)
        if args.json == "-":
            _write("-", dumps_json(report, records=REPORT_RECORDS), "JSON report")
        else:
            try:
                atomic_write_json(args.json, report, records=REPORT_RECORDS)
            except OSError as exc:
                raise ReportError(f"cannot write the JSON report to {args.json} "
                                  f"({exc.strerror or exc})") from None
            print(f"wrote {args.json}")
    if args.markdown is None and args.html is None:
        return
    if args.markdown is not None:
        _write(args.markdown, render_markdown(outcome), "Markdown report")
    if args.html is not None:
        _write(args.html, render_html(outcome), "HTML report")


def _summary_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v", "--verbose", action="count", default=0,
        help="as pytest -v: every regressed question, all errors, the weakest questions",
    )
    parser.add_argument(
        "--summary", choices=("short", "full"), default="short",
        help="as --ragev-summary: 'full' prints every table (default: short)",
    )


def _config_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--config", metavar="TOML",
        help=f"the ragev.toml whose [gate] rules {what} (default: the built-in rules)",
    )


def configure(commands: CommandAdder) -> None:
    """The ``ragev report`` commands."""
    saved = "a JSON report (--ragev-report) or a baseline file"
    show = commands.add(
        "show", handler=_show,
        help="print a saved report or baseline as the plugin's terminal summary",
        description=f"Print {saved} as the plugin's terminal summary: the metrics, "
        "thresholds, errors, variants, the comparison the run was gated on and its "
        "verdict. Exit 0 once printed (whatever the saved verdict), 2 on bad input.",
    )
    show.add_argument("path", metavar="FILE", help=saved)
    _summary_options(show)
    _config_option(show, "the variants table uses")

    compare = commands.add(
        "compare", handler=_compare,
        help="gate CURRENT against BASE with the plugin's gate (exit 1 on a regression)",
        description="Judge CURRENT as the plugin judges a run against its baseline, with "
        "BASE as the baseline: the paired comparison of every metric, the most regressed "
        "questions, CURRENT's recorded [thresholds], its errors. Each of BASE and CURRENT "
        f"is {saved} (an .obtained.json too). Exit 0 when the verdict passes, 1 when it "
        "fails, 2 when the files cannot be read or compared.",
    )
    compare.add_argument("base", metavar="BASE", help="the baseline side: " + saved)
    compare.add_argument("current", metavar="CURRENT", help="the run to judge: " + saved)
    _config_option(compare, "apply (and [report] top_regressions)")
    compare.add_argument(
        "--dataset", metavar="DIR",
        help="the dataset folder CURRENT ran on: pairs questions by content when the "
        "dataset changed since BASE and CURRENT records no per-question hashes (a JSON "
        "report written before reports recorded them)",
    )
    _summary_options(compare)
    compare.add_argument("--json", metavar="PATH",
                         help="write the comparison as a JSON report ('-': stdout)")
    compare.add_argument("--markdown", metavar="PATH",
                         help="write the comparison as Markdown ('-': stdout)")
    compare.add_argument("--html", metavar="PATH", help="write the comparison as HTML")

    html = commands.add(
        "html", handler=_html, help="render a saved report or baseline as the HTML report",
        description=f"Render {saved} as the plugin's self-contained HTML report.",
    )
    html.add_argument("path", metavar="FILE", help=saved)
    html.add_argument("-o", "--output", metavar="PATH", required=True,
                      help="the HTML file to write ('-': stdout)")
    _config_option(html, "the variants table uses")

    markdown = commands.add(
        "markdown", handler=_markdown,
        help="render a saved report or baseline as the Markdown summary",
        description=f"Render {saved} as the plugin's Markdown summary (what it appends to "
        "$GITHUB_STEP_SUMMARY).",
    )
    markdown.add_argument("path", metavar="FILE", help=saved)
    markdown.add_argument("-o", "--output", metavar="PATH", required=True,
                          help="the Markdown file to write ('-': stdout)")
    _config_option(markdown, "the variants table uses")


