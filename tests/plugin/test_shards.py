"""End to end: a run split across jobs (``--ragev-shard K/N``), merged, gated once.

Three shards of a 300-question dataset, each a real pytest run, merged by the installed
``ragev report merge``: the merged report is the unsharded run's (every per-question
value and mean, bit for bit), its verdict the unsharded run's, serially and under
``-n 2``, with a variant. Shards that are not one run are refused in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests._data import write_questions
from tests._pytester import SERIAL_AND_XDIST, read_json, run_ragev

#: Good answers are gold; a "worse" pipeline misses one question in four (a regression)
#: and the "sloppy" variant one in three. Latency is recorded (for balancing the shards).
CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        quality = settings.options.get("quality", "good")
        miss = {"good": 0, "worse": 4, "sloppy": 3}[quality]
        if case.qid in settings.options.get("fail", []):
            raise RuntimeError(f"the service dropped q{case.qid}")
        if miss and case.qid % miss == 0:
            return Answer(retrieved=[100_000 + case.qid % 10, case.qid],
                          text="不知道。", meta={"latency_s": case.qid / 1000})
        return Answer(retrieved=list(case.pids), text=case.answer or "",
                      meta={"latency_s": case.qid / 1000})
    """
)

CONFIG = """\
[dataset]
path = "questions"
id = "sharded"

[pipeline]
name = "hooks"
quality = "good"

[[variants]]
name = "sloppy"
pipeline = {{ quality = "sloppy" }}

[baseline]
path = "ragev-baseline.json"
{extra}"""


def make_project(pytester: pytest.Pytester, count: int) -> Path:
    write_questions(pytester.path / "questions", count)
    pytester.makeconftest(CONFTEST)
    config = pytester.path / "ragev.toml"
    config.write_text(CONFIG.format(extra=""), encoding="utf-8")
    return config


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """The 300-question project."""
    return make_project(pytester, 300)


@pytest.fixture
def small(pytester: pytest.Pytester) -> Path:
    """The same project with 30 questions: for what does not need 300."""
    return make_project(pytester, 30)


def ragev(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The installed ``ragev`` command, run in ``cwd`` (the project's root, as in CI)."""
    script = Path(sys.executable).with_name("ragev")
    return subprocess.run([str(script), *argv], capture_output=True, text=True, check=False,
                          cwd=cwd)


def gate_lines(lines: list[str]) -> list[str]:
    """The lines of a verdict: the failures and the verdict line."""
    return [line for line in lines if line.startswith("ragev: ") and (
        " < baseline" in line or line.startswith("ragev: verdict"))]


def without_run_identity(report: dict[str, Any]) -> dict[str, Any]:
    """A report's data without what differs between any two runs: the task's id, start
    time and duration."""
    data = dict(report["data"])
    data["task"] = {key: value for key, value in data["task"].items()
                    if key not in ("id", "start_time", "duration_s")}
    return data


def run_shards(pytester: pytest.Pytester, total: int, *args: str, questions: int = 300
               ) -> list[Path]:
    """Run every shard of ``total``; each passes and says in one line it was not gated."""
    paths = []
    for index in range(1, total + 1):
        path = pytester.path / f"shard-{index}.json"
        result = run_ragev(pytester, "--ragev-shard", f"{index}/{total}",
                           "--ragev-report", path.name, *args)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        assert_not_gated(result, index, total, questions)
        paths.append(path)
    return paths


def assert_not_gated(result: pytest.RunResult, index: int, total: int, questions: int) -> None:
    """A shard's summary ends with the one line saying it was not gated: no verdict."""
    result.stdout.fnmatch_lines([
        f"ragev: shard {index} of {total}: * of {questions} questions answered, written as a "
        "partial report; not gated: merge every shard's report with `ragev report "
        "merge` and gate the merged run"
    ])
    result.stdout.no_fnmatch_line("ragev: verdict*")
    assert not any(" < baseline" in line for line in result.stdout.lines)


@pytest.mark.slow
@pytest.mark.parametrize("dist", SERIAL_AND_XDIST)
def test_three_shards_merged_are_the_unsharded_run(
    pytester: pytest.Pytester, project: Path, dist: list[str]
) -> None:
    assert run_ragev(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    project.write_text(CONFIG.format(extra="").replace('quality = "good"',
                                                       'quality = "worse"'), encoding="utf-8")
    whole = run_ragev(pytester, "--ragev-report", "whole.json", *dist)
    assert whole.ret == pytest.ExitCode.TESTS_FAILED
    verdict = gate_lines(whole.stdout.lines)
    assert verdict[-1].startswith("ragev: verdict FAILED") and len(verdict) > 1, verdict

    shards = run_shards(pytester, 3, *dist)
    owned = [read_json(path)["data"]["shard"]["questions"] for path in shards]
    assert sorted(q for share in owned for q in share) == list(range(1, 301))
    assert all(60 <= len(share) <= 140 for share in owned), [len(s) for s in owned]

    merged = ragev(pytester.path, "report", "merge", *map(str, reversed(shards)),
                   "-o", "merged.json", "--gate")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert gate_lines(merged.stdout.splitlines()) == verdict
    assert merged.stdout.splitlines()[-1] == "ragev: merged 3 shards (300 questions) into " \
                                             "merged.json"
    # Means, per-question values, counts, errors, usage, comparisons: the same report.
    whole_data = without_run_identity(read_json(pytester.path / "whole.json"))
    merged_data = without_run_identity(read_json(pytester.path / "merged.json"))
    assert merged_data["samples"] == whole_data["samples"]
    assert merged_data["metric"] == whole_data["metric"]
    assert merged_data["variants"] == whole_data["variants"]
    assert merged_data == whole_data

    # Merged without --gate, then gated by `compare`: the same failures again.
    assert ragev(pytester.path, "report", "merge", *map(str, shards),
                 "-o", "plain.json").returncode == 0
    for run in ("whole.json", "plain.json"):
        compared = ragev(pytester.path, "report", "compare", "ragev-baseline.json", run)
        assert compared.returncode == 1, compared.stdout + compared.stderr
        assert gate_lines(compared.stdout.splitlines()) == verdict


def test_a_shard_is_deterministic_and_the_ini_key_is_its_twin(
    pytester: pytest.Pytester, small: Path
) -> None:
    shards = run_shards(pytester, 2, questions=30)
    again = pytester.path / "again.json"
    pytester.makeini("[pytest]\nragev_shard = 2/2\n")
    result = run_ragev(pytester, "--ragev-report", again.name)
    assert result.ret == pytest.ExitCode.OK
    block = read_json(again)["data"]["shard"]
    assert block == read_json(shards[1])["data"]["shard"]
    assert (block["index"], block["total"], block["dataset_questions"]) == (2, 2, 30)
    assert block["configurations"] == [None, "sloppy"]
    # The option wins over the ini key.
    result = run_ragev(pytester, "--ragev-shard", "1/2", "--ragev-report", again.name)
    assert read_json(again)["data"]["shard"]["questions"] == \
        read_json(shards[0])["data"]["shard"]["questions"]


@pytest.mark.slow
def test_the_baseline_of_a_merged_run_is_the_unsharded_update(
    pytester: pytest.Pytester, small: Path
) -> None:
    assert run_ragev(pytester, "--ragev-update-baseline").ret == pytest.ExitCode.OK
    updated = (pytester.path / "ragev-baseline.json").read_bytes()
    shards = run_shards(pytester, 3, questions=30)
    assert ragev(pytester.path, "report", "merge", *map(str, shards),
                 "-o", "merged.json").returncode == 0
    written = ragev(pytester.path, "report", "baseline", "merged.json", "-o", "from-cli.json")
    assert written.returncode == 0, written.stderr
    assert (pytester.path / "from-cli.json").read_bytes() == updated
    # The configured baseline exists: replaced only when asked.
    kept = ragev(pytester.path, "report", "baseline", "merged.json")
    assert kept.returncode == 2 and kept.stderr.count("\n") == 1
    assert "ragev-baseline.json exists and is never replaced unless asked" in kept.stderr
    assert ragev(pytester.path, "report", "baseline", "merged.json",
                 "--force").returncode == 0
    assert (pytester.path / "ragev-baseline.json").read_bytes() == updated
    # A shard's report is not a run to record.
    partial = ragev(pytester.path, "report", "baseline", str(shards[0]), "-o", "no.json")
    assert partial.returncode == 2 and "is a partial report (shard 1 of 3)" in partial.stderr
    assert not (pytester.path / "no.json").exists()


def refused(pytester: pytest.Pytester, *shards: Path) -> str:
    """``ragev report merge`` of ``shards``: refused with exit 2 and one line, the line."""
    result = ragev(pytester.path, "report", "merge", *map(str, shards), "-o", "refused.json")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not (pytester.path / "refused.json").exists()
    return result.stderr.removeprefix("ragev: error: ").rstrip("\n")


@pytest.mark.slow
def test_shards_that_are_not_one_run_are_refused(
    pytester: pytest.Pytester, small: Path
) -> None:
    one, two, three = run_shards(pytester, 3, questions=30)
    assert refused(pytester, one, three) == (
        f"shard 2/3 missing: {one}, {three} are 2 of 3 shards; pass every shard's report "
        "(a missing shard's questions would go unjudged)")
    assert refused(pytester, one, two, two, three).startswith(
        f"{two} and {two} are both shard 2/3 (overlapping shards")
    # The same questions under another shard count overlap the first run's.
    halves = pytester.path / "halves"
    halves.mkdir()
    half = halves / "shard-1.json"
    assert run_ragev(pytester, "--ragev-shard", "1/2",
                     "--ragev-report", str(half)).ret == pytest.ExitCode.OK
    assert refused(pytester, one, two, half).startswith(
        f"{one} and {half} are shards of different runs: their shard counts differ")
    # Edited to claim shard 3 of 3: it owns questions shard 1 owns too.
    forged = pytester.path / "forged.json"
    report = read_json(half)
    report["data"]["shard"].update(index=3, total=3)
    forged.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    line = refused(pytester, one, two, forged)
    assert line.startswith((f"{one} and {forged} overlap: both own q",
                            f"{two} and {forged} overlap: both own q")), line

    # Another plugin version.
    other = pytester.path / "other-version.json"
    report = read_json(three)
    report["data"]["shard"]["plugin_version"] = "0.0.1"
    other.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    assert refused(pytester, one, two, other).startswith(
        f"{one} and {other} are shards of different pytest-ragev versions (")

    # Another setting, another metric profile, another dataset.
    small.write_text(CONFIG.format(extra="").replace('quality = "good"', 'quality = "worse"'),
                       encoding="utf-8")
    assert run_ragev(pytester, "--ragev-shard", "3/3",
                     "--ragev-report", "worse.json").ret == pytest.ExitCode.OK
    line = refused(pytester, one, two, pytester.path / "worse.json")
    assert line.startswith(f"{one} and {pytester.path / 'worse.json'} are shards of different "
                           "settings (the base configuration: pipeline.quality)"), line
    small.write_text(CONFIG.format(extra=""), encoding="utf-8")
    assert run_ragev(pytester, "--ragev-shard", "3/3", "--ragev-profile", "standard",
                     "--ragev-report", "standard.json").ret == pytest.ExitCode.OK
    assert refused(pytester, one, two, pytester.path / "standard.json").startswith(
        f"{one} and {pytester.path / 'standard.json'} are shards of different metric profiles")
    write_questions(pytester.path / "questions", 31)
    assert run_ragev(pytester, "--ragev-shard", "3/3",
                     "--ragev-report", "grown.json").ret == pytest.ExitCode.OK
    assert refused(pytester, one, two, pytester.path / "grown.json").startswith(
        f"{one} and {pytester.path / 'grown.json'} are shards of different datasets (")
    # A whole run's report is not a shard's.
    assert run_ragev(pytester, "--ragev-report", "whole.json",
                     "--ragev-no-baseline").ret == pytest.ExitCode.OK
    assert refused(pytester, one, pytester.path / "whole.json").startswith(
        f"{pytester.path / 'whole.json'} is not a partial report")
    # Nor is a partial report a run to compare.
    compared = ragev(pytester.path, "report", "compare", str(pytester.path / "whole.json"),
                     str(one))
    assert compared.returncode == 2
    assert f"{one} is a partial report (shard 1 of 3)" in compared.stderr


@pytest.mark.slow
def test_a_shard_fails_only_on_its_own_questions(
    pytester: pytest.Pytester, small: Path
) -> None:
    shares = [read_json(path)["data"]["shard"]["questions"]
              for path in run_shards(pytester, 3, questions=30)]
    broken = shares[1][0]
    small.write_text(CONFIG.format(extra="").replace(
        'quality = "good"', f'quality = "good"\nfail = [{broken}]'), encoding="utf-8")
    # Shards 1 and 3 do not ask the question that breaks: they pass.
    for index in (1, 3):
        assert run_ragev(pytester, "--ragev-shard", f"{index}/3", "--ragev-report",
                         f"s{index}.json").ret == pytest.ExitCode.OK
    result = run_ragev(pytester, "--ragev-shard", "2/3", "--ragev-report", "s2.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Its own errors fail it (the red lines), still without a verdict: not gated.
    result.stdout.fnmatch_lines([f"*ragev: 2 questions raised an error: q{broken}*"])
    assert_not_gated(result, 2, 3, 30)
    merged = ragev(pytester.path, "report", "merge", "s1.json", "s2.json", "s3.json",
                   "-o", "merged.json")
    assert merged.returncode == 1
    assert f"ragev: 2 questions raised an error: q{broken}" in merged.stdout


@pytest.mark.parametrize(("argv", "message"), [
    (["--ragev-shard", "4/3", "--ragev-report", "r.json"],
     "ERROR: --ragev-shard '4/3': shard 4 of 3 does not exist; write K/N with 1 <= K <= N*"),
    (["--ragev-shard", "half", "--ragev-report", "r.json"],
     "ERROR: --ragev-shard 'half' is not K/N; write K/N*"),
    (["--ragev-shard", "1/3"],
     "ERROR: --ragev-shard 1/3 writes its share as a partial JSON report*--ragev-report PATH*"),
    (["--ragev-shard", "1/3", "--ragev-report", "r.json", "--ragev-update-baseline"],
     "ERROR: --ragev-shard 1/3 and --ragev-update-baseline*ragev report baseline RUN.json*"),
])
def test_bad_shard_options_are_usage_errors(
    pytester: pytest.Pytester, small: Path, argv: list[str], message: str
) -> None:
    result = run_ragev(pytester, *argv)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert not (pytester.path / "r.json").exists()


@pytest.mark.slow
def test_balanced_shards_follow_the_recorded_latency(
    pytester: pytest.Pytester, small: Path
) -> None:
    assert run_ragev(pytester, "--ragev-report", "earlier.json",
                     "--ragev-no-baseline").ret == pytest.ExitCode.OK
    paths = run_shards(pytester, 3, "--ragev-shard-balance", "earlier.json",
                       questions=30)
    blocks = [read_json(path)["data"]["shard"] for path in paths]
    assert len({block["assignment"] for block in blocks}) == 1
    assert blocks[0]["assignment"].startswith("costs ")
    # Latency is qid/1000: longest first onto the least loaded shard evens the seconds.
    loads = [sum(blocks[k]["questions"]) / 1000 for k in range(3)]
    assert max(loads) - min(loads) <= 0.03, loads
    assert ragev(pytester.path, "report", "merge", *map(str, paths),
                 "-o", "merged.json").returncode == 0
    # A shard assigned by hash does not merge with balanced ones.
    plain = pytester.path / "plain.json"
    assert run_ragev(pytester, "--ragev-shard", "3/3",
                     "--ragev-report", plain.name).ret == pytest.ExitCode.OK
    line = refused(pytester, paths[0], paths[1], plain)
    assert "are shards of different assignments" in line, line
