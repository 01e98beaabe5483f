"""``ragev report show|compare|html|markdown|merge|baseline``: saved reports, without
re-running anything.

A CI job that kept the JSON report of a run (``--ragev-report``) or a baseline file can
print it again as the plugin's summary (``show``), gate it against another saved file
with the plugin's own gate (``compare``: exit 1 on a regression), or render it as the
plugin's HTML or Markdown report. Each command reads either kind of file, by its content.
``merge`` makes one run of the partial reports of a sharded run (``--ragev-shard``) and
may gate it; ``baseline`` writes the baseline a run's report stands for, as
``--ragev-update-baseline`` would have.

Exit status: 0 done (``compare``, ``merge``: the verdict passed), 1 the verdict failed,
2 bad input: a missing file, a file that is neither a report nor a baseline, files that
cannot be compared or merged (one line saying why).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_ragev.cli import CommandAdder, warn
from pytest_ragev.config import RagevConfig, RunOptions, load_config
from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.gcpause import paused_gc
from pytest_ragev.core.io import atomic_write_json, atomic_write_text, dumps_json
from pytest_ragev.core.paths import shown_path
from pytest_ragev.core.types import BUILTIN_METRICS, METRIC_NAMES
from pytest_ragev.dataset import Dataset, corpus_fingerprint, load_dataset
from pytest_ragev.evaluation import EvalInputs, Outcome, RunPlan, evaluate
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
from pytest_ragev.report.shards import (
    check_shards,
    check_tokenizer,
    merge_options,
    merge_plan,
    merged_facts,
    merged_inputs,
    read_shard_report,
    recorded_metrics,
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


# ----------------------------------------------------------------------------- merge
def _config_of(path: str | None, recorded: str, what: str) -> RagevConfig:
    """``--config`` when given, else the config file ``what`` ran with (``recorded``,
    relative to its rootdir: the current folder of a CI job at the project root)."""
    if path is None:
        if not recorded:
            raise ReportError(f"{what} records no config file; pass --config ragev.toml")
        if not Path(recorded).is_file():
            raise ReportError(
                f"{what} ran with {recorded} (relative to its rootdir), which is not in "
                f"{os.getcwd()}; run from the project's root or pass --config PATH"
            )
        path = recorded
    try:
        return load_config(path)
    except RagevError as exc:
        raise ReportError(str(exc).removeprefix("ragev: ")) from None


def _dataset_of(config: RagevConfig, limit: int | None) -> Dataset:
    """The dataset ``config`` names, limited as the run was (``--ragev-limit``)."""
    dataset = load_dataset(config.dataset_path, dataset_id=config.dataset_id)
    return dataset.limit(limit) if limit else dataset


def _written_json(path: str, outcome: Outcome, params: Any, dataset_id: str) -> None:
    """The run's JSON report, written as the plugin writes it (``-``: standard output)."""
    report = final_report(outcome, dataset_id=dataset_id, params=params)
    if path == "-":
        sys.stdout.write(dumps_json(report, records=REPORT_RECORDS))
        return
    try:
        atomic_write_json(path, report, records=REPORT_RECORDS)
    except OSError as exc:
        raise ReportError(f"cannot write the JSON report to {path} ({exc.strerror or exc}); "
                          "choose a path in a folder you can write to") from None


def _merge(args: argparse.Namespace) -> int:
    # Reading the shards back, the run's end and its report make millions of containers
    # that live to the end: the collector's passes over them would be a third of the
    # merge. They are let go inside the pause, so none is traversed when it ends.
    with paused_gc():
        return _merged(args)


def _merged(args: argparse.Namespace) -> int:
    parts = [read_shard_report(path) for path in args.shards]
    check_shards(parts)
    config = _config_of(args.config, parts[0].part.config, parts[0].source)
    if args.gate:
        if args.baseline is None and config.baseline_path is None:
            raise ReportError(f"--gate needs a baseline: set [baseline] path in {config.source} "
                              "or pass --baseline PATH")
    else:
        # Not gated here: the merged report is the unsharded run's without a baseline,
        # for `ragev report compare BASELINE RUN.json`.
        config = replace(config, baseline_path=None)
    chosen: dict[str, Any] = {
        "report_json": None if args.output == "-" else Path(args.output),
        "report_markdown": None if args.markdown is None else Path(args.markdown),
        "report_html": None if args.html is None else Path(args.html),
        "baseline": Path(args.baseline) if args.gate and args.baseline else None,
    }
    options = merge_options(parts, **chosen)
    plan = merge_plan(parts, config, options)
    dataset = _dataset_of(config, options.limit)
    inputs = merged_inputs(parts, plan, dataset, merged_facts(parts, rootdir=os.getcwd()))
    outcome = evaluate(inputs)
    base = parts[0].saved.runs[0].params if parts[0].saved.runs else {}
    _written_json(args.output, outcome, base, dataset.dataset_id)
    return _conclude(outcome, args, wrote=args.output, stream=sys.stderr
                     if args.output == "-" else sys.stdout,
                     done=f"merged {len(parts)} shards ({len(dataset.pairs)} questions) into "
                     f"{args.output}")


def _conclude(outcome: Outcome, args: argparse.Namespace, *, wrote: str, stream: Any,
              done: str) -> int:
    """Print the summary, write the Markdown and HTML reports asked for; the exit status:
    2 when the baseline could not be used or written, 1 when the verdict failed."""
    color = stream.isatty() and "NO_COLOR" not in os.environ
    lines = list(terminal_lines(outcome, verbose=args.verbose, full=args.summary == "full"))
    while lines and not lines[0][0]:
        lines.pop(0)
    for line, markup in lines:
        print(_paint(line, markup, color), file=stream)
    if args.markdown is not None:
        _write(args.markdown, render_markdown(outcome), "Markdown report")
    if args.html is not None:
        _write(args.html, render_html(outcome), "HTML report")
    if wrote != "-":
        print(f"ragev: {done}", file=stream)
    gate = outcome.gate
    if gate.not_compared is not None or gate.write_error is not None:
        return 2
    return 1 if outcome.failed else 0


# -------------------------------------------------------------------------- baseline
def _baseline(args: argparse.Namespace) -> int:
    saved = read_saved(args.path)
    if saved.kind != "report":
        raise ReportError(f"{saved.source} is a baseline file; pass the JSON report of the run "
                          "to record (--ragev-report, or ragev report merge -o RUN.json)")
    if saved.shard is not None:
        raise ReportError(f"{saved.source} is a partial report ({saved.shard.spec.words}); "
                          "merge every shard's report first (ragev report merge "
                          "SHARD.json... -o RUN.json) and record the merged one")
    if not saved.runs:
        raise ReportError(f"{saved.source} holds no run to record")
    config = _config_of(args.config or "ragev.toml", "", saved.source)
    target = Path(args.output) if args.output else config.baseline_path
    if target is None:
        raise ReportError(f"{config.source} sets no [baseline] path; pass -o PATH")
    if target.exists() and not args.force:
        shown = shown_path(target, (Path.cwd(),))
        raise ReportError(
            f"{shown} exists and is never replaced unless asked; review the change (ragev "
            f"report compare {shown} {saved.source}), then pass --force to replace it"
        )
    first = saved.runs[0]
    limit = first.params.get("dataset", {}).get("limit")
    records = [sample for run in saved.runs for sample in run.samples]
    customs = [{"name": name, "direction": item.direction}
               for name, item in first.summary.items() if name not in BUILTIN_METRICS]
    options = RunOptions(
        limit=limit if isinstance(limit, int) else None, profile=first.profile,
        variants=tuple("base" if run.variant is None else run.variant for run in saved.runs),
        update_baseline=True, baseline=target,
    )
    try:
        plan = RunPlan.build(config, options, recorded_metrics(records, customs))
    except RagevError as exc:
        raise ReportError(str(exc).removeprefix("ragev: ")) from None
    check_tokenizer(plan, first.tokenizer, saved.source)
    dataset = _dataset_of(config, options.limit)
    if first.fingerprint and first.fingerprint != dataset.fingerprint:
        raise ReportError(
            f"the dataset at {dataset.path} has fingerprint {dataset.fingerprint[:12]}, but "
            f"{saved.source} ran on {first.fingerprint[:12]}; pass the config of that dataset"
        )
    facts = replace(outcome_from_report(saved).facts, rootdir=os.getcwd())
    inputs = EvalInputs(plan=plan, dataset=dataset, records=records, facts=facts,
                        params={run.variant: run.params for run in saved.runs},
                        scored=frozenset(record.key for record in records))
    with paused_gc():
        outcome = evaluate(inputs)
    gate = outcome.gate
    for line in (*gate.notes, *gate.failures):
        print(line, file=sys.stderr if line in gate.failures else sys.stdout)
    return 2 if gate.failures else 0


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

    merge = commands.add(
        "merge", handler=_merge,
        help="merge the partial reports of a sharded run (--ragev-shard) into one run",
        description="Make one run of the partial reports every shard of a run wrote "
        "(pytest --ragev-shard K/N --ragev-report SHARD.json): refused when they are not "
        "the shards of one run (another dataset, settings, profile, tokenizer or plugin "
        "version; overlapping or missing shards). The merged report is the report the "
        "unsharded run would have written, ended by the plugin's own code: gate it with "
        "`ragev report compare BASELINE RUN.json`, or here with --gate. Exit 0 when its "
        "verdict passes, 1 when it fails, 2 when the reports cannot be merged.",
    )
    merge.add_argument("shards", metavar="SHARD.json", nargs="+",
                       help="the partial report of each shard (each once)")
    merge.add_argument("-o", "--output", metavar="RUN.json", required=True,
                       help="the merged JSON report to write ('-': stdout)")
    merge.add_argument(
        "--config", metavar="TOML",
        help="the ragev.toml the shards ran with (default: the one they record, relative "
        "to the current folder): its dataset, [thresholds], [gate] and [baseline]",
    )
    merge.add_argument("--gate", action="store_true",
                       help="gate the merged run against the config's baseline (or "
                       "--baseline), as the unsharded run would have been")
    merge.add_argument("--baseline", metavar="PATH",
                       help="with --gate: the baseline to gate against (default: "
                       "[baseline] path)")
    _summary_options(merge)
    merge.add_argument("--markdown", metavar="PATH",
                       help="also write the merged run's Markdown summary ('-': stdout)")
    merge.add_argument("--html", metavar="PATH", help="also write its HTML report")

    baseline = commands.add(
        "baseline", handler=_baseline,
        help="write the baseline a saved run stands for (as --ragev-update-baseline would)",
        description="Write the baseline file a run's JSON report (a merged run's too) "
        "stands for: the file pytest --ragev-update-baseline would have written at the "
        "end of that run. An existing file is replaced only with --force. Exit 0 when "
        "written, 2 when it cannot be.",
    )
    baseline.add_argument("path", metavar="RUN.json", help="the JSON report of the run")
    baseline.add_argument("--config", metavar="TOML",
                          help="the ragev.toml the run used (default: ./ragev.toml): its "
                          "dataset and [baseline]")
    baseline.add_argument("-o", "--output", metavar="PATH",
                          help="the baseline file to write (default: [baseline] path)")
    baseline.add_argument("--force", action="store_true",
                          help="replace the file when it exists")
