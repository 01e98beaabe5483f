"""End to end: the caches of a run split across CI jobs.

Each shard's answer cache, merged by ``ragev cache merge`` into one store, serves every
answer of the next (unsharded) run; the knowledge base built once by a setup job and
restored from its artifact folder is loaded by every shard, not built again.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._data import write_questions
from tests._pytester import read_json, run_ragev

Project = Callable[..., Path]

CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        text = case.answer if case.qid % 3 else "答案不详。"
        return Answer(retrieved=list(case.pids), text=text or "")
    """
)

CONFIG = """\
[dataset]
path = "questions"
id = "cached"

[pipeline]
name = "hooks"

[[variants]]
name = "twin"
pipeline = { twin = true }

[run]
cache = true
"""


def ragev(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("ragev")
    return subprocess.run([str(script), *argv], capture_output=True, text=True, check=False,
                          cwd=cwd)


@pytest.mark.slow
def test_the_shards_answer_caches_merge_into_one_store(pytester: pytest.Pytester) -> None:
    write_questions(pytester.path / "questions", 30)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "ragev.toml").write_text(CONFIG, encoding="utf-8")
    # Each job caches in its own folder (its own machine); the artifact is that folder.
    for index in (1, 2, 3):
        result = run_ragev(pytester, "--ragev-shard", f"{index}/3", "--ragev-report",
                           f"shard-{index}.json", "-o", f"cache_dir=job-{index}", cache=True)
        assert result.ret == pytest.ExitCode.OK
    sources = [str(pytester.path / f"job-{index}" / "d" / "ragev" / "answers")
               for index in (1, 2, 3)]
    merged = ragev(pytester.path, "cache", "merge", *sources)
    assert merged.returncode == 0, merged.stderr
    store = Path(".pytest_cache") / "d" / "ragev" / "answers"
    assert merged.stdout.startswith(
        f"ragev: merged 3 answer caches into {store}: 60 answers added, 0 already there, "
        "0 damaged left out; "), merged.stdout
    # Merging again adds nothing: a union by key.
    again = ragev(pytester.path, "cache", "merge", *sources)
    assert ": 0 answers added, 60 already there, 0 damaged left out;" in again.stdout

    # The next run, on one machine, is served every answer of every configuration.
    result = run_ragev(pytester, "--ragev-report", "next.json", cache=True)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*answer cache 60 hits / 0 misses*"])
    assert ragev(pytester.path, "report", "merge", "shard-1.json", "shard-2.json",
                 "shard-3.json", "-o", "merged.json").returncode == 0
    assert read_json(pytester.path / "merged.json")["data"]["samples"] == \
        read_json(pytester.path / "next.json")["data"]["samples"]

    bad = ragev(pytester.path, "cache", "merge", "questions")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("ragev: error: questions: no answer cache there")


@pytest.mark.slow
def test_the_knowledge_base_is_built_once_and_restored_by_every_shard(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[run]\ncache = false\n", conftest=None,
                 pipeline='[pipeline]\nname = "builtin"\n')
    kb_folder = pytester.path / ".pytest_cache" / "d" / "ragev" / "kb"
    # The setup job: one question builds (and caches) the knowledge base.
    setup = run_ragev(pytester, "--ragev-limit", "1", "--ragev-no-baseline", cache=True)
    assert setup.ret == pytest.ExitCode.OK
    (entry,) = kb_folder.glob("*/kb.json")
    stamp = entry.stat().st_mtime_ns
    artifact = pytester.path / "artifact"
    shutil.copytree(kb_folder, artifact)
    for index in (1, 2):
        # A fresh machine: no cache but the restored artifact.
        shutil.rmtree(pytester.path / ".pytest_cache")
        shutil.copytree(artifact, kb_folder)
        restored = kb_folder / entry.relative_to(kb_folder)
        stamp = restored.stat().st_mtime_ns
        result = run_ragev(pytester, "--ragev-shard", f"{index}/2", "--ragev-report",
                           f"shard-{index}.json", cache=True)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        assert list(kb_folder.glob("*/kb.json")) == [restored]
        assert restored.stat().st_mtime_ns == stamp  # loaded, not built again
    assert ragev(pytester.path, "report", "merge", "shard-1.json", "shard-2.json",
                 "-o", "merged.json").returncode == 0
