"""``ragev report show|compare|html|markdown`` and ``ragev --version``, through ``cli.main``.

The reports are written by the plugin's own renderer (``final_report``) from runs made
here; the end-to-end tests with reports of real pytest runs are in
``tests/plugin/test_cli_report.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ragev.core.record import Record
from pytest_ragev.core.results import MetricSummary, RunResult
from pytest_ragev.core.version import __version__
from pytest_ragev.dataset import write_dataset
from pytest_ragev.evaluation import Outcome, RunFacts
from pytest_ragev.report import final_report
from tests.unit._cli import one_error_line, run_cli

QUESTIONS = ["埃菲尔铁塔有多高？", "Wie alt ist der Turm?", "Сколько ступенек?",
             "塔在哪个城市？", "Wer hat ihn gebaut?", "Когда его открыли?"]


def make_run(recalls: list[float], *, profile: str = "weknora",
             fingerprint: str = "f" * 64, variant: str | None = None,
             thresholds: dict[str, float] | None = None, tokenizer: str = "",
             answer: str = "答案") -> RunResult:
    samples = [Record(qid=i + 1, question=QUESTIONS[i % len(QUESTIONS)], retrieval_gt=[[i + 1]],
                      retrieval_ids=[i + 1] if r else [99], generated_text=answer,
                      generated_gt="答案", metrics={"recall": r}, variant=variant)
               for i, r in enumerate(recalls)]
    mean = sum(recalls) / len(recalls)
    metrics = {"profile": profile, **({"tokenizer": tokenizer} if tokenizer else {})}
    params = {"dataset": {"id": "tower", "fingerprint": fingerprint},
              "pipeline": {"name": "builtin"}, "metrics": metrics,
              "thresholds": thresholds or {}}
    return RunResult(dataset_id="tower", fingerprint=fingerprint, dataset_stats={},
                     profile=profile, params=params, params_hash="h", samples=samples,
                     summary={"recall": MetricSummary("recall", mean, len(recalls))},
                     variant=variant, tokenizer=tokenizer)


def write(path: Path, *runs: RunResult, failures: tuple[str, ...] = ()) -> Path:
    outcome = Outcome(runs=runs, facts=RunFacts(task_id="evaluation_1_ab_tower",
                                                total=len(runs[0].samples),
                                                finished=len(runs[0].samples)),
                      failures=failures)
    path.write_text(json.dumps(final_report(outcome, dataset_id="tower",
                                            params=runs[0].params), ensure_ascii=False),
                    encoding="utf-8")
    return path


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return write(tmp_path / "good.json", make_run([1.0] * 6, thresholds={"recall": 0.5}))


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    return write(tmp_path / "bad.json", make_run([0.0] * 4 + [1.0] * 2,
                                                 thresholds={"recall": 0.5}),
                 failures=("ragev: recall 0.333 < threshold 0.500 (n=6)",))


TOLERANCE = '[dataset]\npath = "data"\n\n[gate]\nmode = "tolerance"\nmax_drop = 0.1\n'


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    path = tmp_path / "ragev.toml"
    path.write_text(TOLERANCE, encoding="utf-8")
    return path


# --- show ---------------------------------------------------------------------------------------


def test_show_prints_the_saved_summary_and_exits_0_whatever_the_verdict(
    capsys: pytest.CaptureFixture[str], bad: Path
) -> None:
    code, out, err = run_cli(capsys, "report", "show", str(bad))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "ragev: tower (base configuration), 6 questions, profile weknora"
    assert "  recall         0.333      6      0.500  FAIL" in lines
    assert lines[-2:] == ["ragev: recall 0.333 < threshold 0.500 (n=6)",
                          "ragev: verdict FAILED (1 check)"]
    assert "\033[" not in out  # no colour codes when stdout is not a terminal


def test_show_verbose_lists_the_weakest_questions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "r.json"
    run_ = make_run([0.0, 1.0, 1.0])
    outcome = Outcome(runs=(run_,), facts=RunFacts(total=3, finished=3))
    report = final_report(outcome, dataset_id="tower", params=run_.params)
    report["data"]["lowest"] = {"recall": [{"qid": 1}]}  # the plugin listed one
    path.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    _, quiet, _ = run_cli(capsys, "report", "show", str(path))
    code, verbose, _ = run_cli(capsys, "report", "show", "-v", str(path))
    assert code == 0 and "lowest-scoring" not in quiet
    assert "ragev: 1 lowest-scoring question(s) by recall of 3 (* = relevant passage):" in verbose
    assert "  q1  recall 0.000  埃菲尔铁塔有多高？" in verbose


# --- compare ------------------------------------------------------------------------------------


def test_compare_exits_1_on_a_regression_and_0_otherwise(
    capsys: pytest.CaptureFixture[str], good: Path, bad: Path, config: Path
) -> None:
    code, out, err = run_cli(capsys, "report", "compare", str(good), str(bad), "--config",
                         str(config))
    assert code == 1 and err == ""
    assert ("ragev: recall 0.333 < baseline 1.000 (Δ −0.667, 90% CI [−1.000, −0.333], "
            "p=0.062, n=6)") in out.splitlines()
    assert out.splitlines()[-1] == "ragev: verdict FAILED (2 checks)"
    # The other way round recall improved, and good's thresholds hold.
    code, out, _ = run_cli(capsys, "report", "compare", str(bad), str(good), "--config",
                       str(config))
    assert code == 0 and out.splitlines()[-1] == "ragev: verdict passed"
    assert "  recall     0.333    1.000  +0.667  [0.333, 1.000]  0.062  6  not significant" in out
    code, out, _ = run_cli(capsys, "report", "compare", str(good), str(good))
    assert code == 0
    assert "ragev: base configuration against the baseline, 6 shared questions: no metric " \
           "changed" in out


def test_without_a_config_the_default_gate_needs_significance(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 6 questions, one losing its score: beyond no tolerance, but not significant.
    before = write(tmp_path / "a.json", make_run([1.0] * 6))
    after = write(tmp_path / "b.json", make_run([0.0] + [1.0] * 5))
    code, out, _ = run_cli(capsys, "report", "compare", str(before), str(after))
    assert code == 0 and "not significant" in out
    assert "ragev: warning: n=6 cannot detect a 0.05 drop" in out


def test_compare_writes_the_reports_of_the_comparison(
    capsys: pytest.CaptureFixture[str], good: Path, bad: Path, config: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, out, _ = run_cli(capsys, "report", "compare", str(good), str(bad), "--config",
                       str(config), "--json", str(out_dir / "c.json"), "--markdown",
                       str(out_dir / "c.md"), "--html", str(out_dir / "c.html"))
    assert code == 1
    assert f"wrote {out_dir / 'c.json'}" in out and f"wrote {out_dir / 'c.html'}" in out
    data = json.loads((out_dir / "c.json").read_text(encoding="utf-8"))["data"]
    assert data["baseline"]["path"] == str(good)
    assert data["baseline"]["comparisons"][0]["metrics"]["recall"]["status"] == "regressed"
    assert data["verdict"]["passed"] is False
    assert "regressed" in (out_dir / "c.md").read_text(encoding="utf-8")
    html = (out_dir / "c.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "Per-question changes against the baseline" \
        in html
    # "-" writes the JSON report to stdout, after the summary.
    code, out, _ = run_cli(capsys, "report", "compare", str(good), str(bad), "--json", "-")
    report = json.loads(out[out.index('{\n  "success"'):])
    assert report["data"]["baseline"]["compared"] is True


def test_compare_refuses_runs_of_another_metric_profile(
    capsys: pytest.CaptureFixture[str], good: Path, tmp_path: Path
) -> None:
    other = write(tmp_path / "standard.json", make_run([1.0] * 6, profile="standard"))
    code, out, err = run_cli(capsys, "report", "compare", str(good), str(other))
    one_error_line(code, err, "metric profile 'weknora'", "'standard'", "not comparable")
    assert out == ""


def test_compare_of_reports_of_other_tokenizers_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    current = write(tmp_path / "new.json", make_run([1.0] * 6, tokenizer="default/3 jieba==0.42.1"))
    same = write(tmp_path / "same.json", make_run([1.0] * 6, tokenizer="default/3 jieba==0.42.1"))
    code, out, err = run_cli(capsys, "report", "compare", str(same), str(current))
    assert code == 0 and err == "", err
    # Another version of the same rules: not compared, even on texts both read alike.
    older = write(tmp_path / "old.json", make_run([1.0] * 6, tokenizer="default/2 jieba==0.42.1"))
    code, out, err = run_cli(capsys, "report", "compare", str(older), str(current))
    one_error_line(code, err, "old.json was computed with the tokenizer 'default/2 "
                   "jieba==0.42.1', this run uses 'default/3 jieba==0.42.1'", "not comparable",
                   "--ragev-update-baseline")
    assert out == ""


def test_compare_after_a_dataset_edit_needs_hashes(
    capsys: pytest.CaptureFixture[str], good: Path, tmp_path: Path
) -> None:
    edited = write(tmp_path / "edited.json", make_run([1.0] * 6, fingerprint="e" * 64))
    code, _, err = run_cli(capsys, "report", "compare", str(good), str(edited))
    one_error_line(code, err, "the data changed", f"{good} records no per-question content "
                   "hashes")


def test_a_bad_gate_table_is_one_line(
    capsys: pytest.CaptureFixture[str], good: Path, config: Path
) -> None:
    config.write_text(TOLERANCE + "mood = 1\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "report", "compare", str(good), str(good), "--config",
                       str(config))
    one_error_line(code, err, "[gate]", "'mood'")


def test_dataset_must_be_the_one_current_ran_on(
    capsys: pytest.CaptureFixture[str], good: Path, tmp_path: Path
) -> None:
    folder = write_dataset(tmp_path / "data", queries={1: "塔有多高？"}, corpus={1: "330 米。"},
                           answers={1: "330 米。"}, qrels=[(1, 1)], qas=[(1, 1)])
    code, _, err = run_cli(capsys, "report", "compare", str(good), str(good), "--dataset",
                       str(folder))
    one_error_line(code, err, f"--dataset {folder} has fingerprint",
                   "pass the dataset folder the current run ran on")


# --- html / markdown ----------------------------------------------------------------------------


def test_html_and_markdown_render_a_saved_report(
    capsys: pytest.CaptureFixture[str], bad: Path, tmp_path: Path
) -> None:
    target = tmp_path / "new" / "r.html"
    code, out, _ = run_cli(capsys, "report", "html", str(bad), "-o", str(target))
    assert code == 0 and out == f"wrote {target}\n"
    html = target.read_text(encoding="utf-8")
    assert "<title>pytest-ragev: failed</title>" in html and "Wie alt ist der Turm?" in html
    assert " s</span>" not in html  # no duration: a saved report does not record it
    code, out, _ = run_cli(capsys, "report", "markdown", str(bad), "-o", "-")
    assert code == 0 and out.startswith("## pytest-ragev: ❌ failed\n")
    assert "- `ragev: recall 0.333 < threshold 0.500 (n=6)`" in out


def test_an_unwritable_output_is_one_line(
    capsys: pytest.CaptureFixture[str], bad: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    code, _, err = run_cli(capsys, "report", "html", str(bad), "-o", str(blocker / "r.html"))
    one_error_line(code, err, "cannot write the HTML report to", "choose a path")


# --- bad input, for every command ---------------------------------------------------------------

BAD_FILES: dict[str, tuple[bytes | None, str]] = {
    "missing": (None, "no such file; pass a JSON report (--ragev-report) or a baseline file"),
    "not json": (b"<html>", "is not valid JSON (line 1 column 1"),
    "neither": (b'{"rows": []}', "is neither a pytest-ragev JSON report"),
    "progress": (b'{"success": true, "data": {"task": {"status": 1, "finished": 2, '
                 b'"total": 9}, "params": {}, "metric": null}}',
                 "is a progress report (task status 1, running: 2 of 9 questions finished)"),
    "newer report": (b'{"success": true, "data": {"schema_version": 2, "task": {"status": 2}, '
                     b'"params": {}, "metric": {}}}',
                     "has report schema_version 2, this pytest-ragev reads up to 1"),
    "newer baseline": (b'{"schema": "pytest-ragev-baseline", "schema_version": 4}',
                       "has schema_version 4, this pytest-ragev reads 3"),
    "earlier baseline": (b'{"schema": "pytest-ragev-baseline", "schema_version": 2}',
                         "was made by an earlier pytest-ragev (schema_version 2); rewrite it "
                         "with --ragev-update-baseline"),
    # The running report shows the running means: still not a finished run.
    "running": (b'{"success": true, "data": {"task": {"status": 1, "finished": 3, '
                b'"total": 9}, "params": {}, "metric": {"retrieval_metrics": '
                b'{"recall": 0.5}, "generation_metrics": {}, "counts": {"recall": 3}}}}',
                "is a progress report (task status 1, running: 3 of 9 questions finished)"),
    "damaged baseline": (b'{"schema": "pytest-ragev-baseline", "schema_version": 3, '
                         b'"tokenizer": ""}', "dataset is missing"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["show", "compare", "html", "markdown"])
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, good: Path, kind: str, command: str
) -> None:
    content, message = BAD_FILES[kind]
    path = tmp_path / f"{kind}.json"
    if content is not None:
        path.write_bytes(content)
    argv: list[str] = ["report", command]
    argv += [str(good), str(path)] if command == "compare" else [str(path)]
    if command in ("html", "markdown"):
        argv += ["-o", str(tmp_path / "out")]
    code, out, err = run_cli(capsys, *argv)
    one_error_line(code, err, str(path), message)
    assert out == "" and not (tmp_path / "out").exists()


def test_the_module_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest_ragev.cli", "report", "show", str(tmp_path / "无.json")],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == (f"ragev: error: {tmp_path / '无.json'}: no such file; pass a JSON "
                             "report (--ragev-report) or a baseline file (ragev-baseline.json)\n")


def test_a_missing_command_prints_the_group_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "report")
    assert code == 2 and "show" in err and "compare" in err and "html" in err


# --- the ragev command itself -------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out == f"pytest-ragev {__version__}\n"


def _imported_after(argv: list[str]) -> set[str]:
    code = (
        "import sys, contextlib, io\n"
        "from pytest_ragev import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    cli.main({argv!r})\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


HEAVY = {"numpy", "pyarrow", "jieba", "regex", "fastapi", "pydantic", "uvicorn"}


def test_help_imports_no_heavy_module_and_no_group() -> None:
    modules = _imported_after(["--help"])
    assert not modules & HEAVY
    assert not {m for m in modules if m.startswith(("pytest_ragev.cli.", "pytest_ragev.server",
                                                    "pytest_ragev.report"))}


def test_a_group_imports_only_its_own_modules() -> None:
    modules = _imported_after(["dataset", "--help"])
    assert "pytest_ragev.cli.dataset" in modules
    assert not {m for m in modules if m.startswith(("pytest_ragev.cli.report",
                                                    "pytest_ragev.report", "pytest_ragev.server"))}
    assert "pytest_ragev.cli.report" in _imported_after(["report", "--help"])
