"""docs/sharding.md's GitHub Actions workflow, run: its commands, in its job order.

The workflow is read from the page as a user copies it. Each job runs in a fresh copy of
the project (its own machine); the few actions it uses are played as GitHub plays them
(checkout and setup-python: the copy itself; a cache restore: a miss; upload- and
download-artifact: folders kept between jobs), and every ``run:`` step is run with
bash, the matrix and ``env`` substituted. The knowledge base is built once, the shards
load it, the verdict job's merge equals the unsharded run and gives its verdict, the
answer caches merge into one store.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._data import write_questions
from tests._pytester import read_json

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sharding.md"


def fenced_block(marker: str, language: str) -> str:
    """The fenced block right after ``<!-- marker -->`` in docs/sharding.md."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {re.escape(marker)} -->\n```{language}\n(.*?)\n```", text,
                      re.DOTALL)
    assert found is not None, f"docs/sharding.md has no {language} block after {marker}"
    return found.group(1)


class Runner:
    """Plays a workflow's jobs: each in a fresh copy of ``project``, artifacts between."""

    def __init__(self, project: Path, root: Path) -> None:
        self.project = project
        self.root = root
        self.artifacts = root / "artifacts"
        self.artifacts.mkdir(parents=True)
        self.commands: list[str] = []

    def job(self, name: str, spec: dict[str, Any], env: dict[str, str],
            matrix: dict[str, Any]) -> Path:
        label = name + "".join(f"-{value}" for value in matrix.values())
        machine = self.root / label
        shutil.copytree(self.project, machine)
        summary = self.root / f"{label}.summary.md"
        for step in spec["steps"]:
            condition = step.get("if")
            assert condition in (None, "always()",
                                 "steps.kb.outputs.cache-hit != 'true'"), condition
            if "run" in step:
                command = self.substitute(step["run"], env, matrix)
                self.commands.append(command)
                if command.startswith("pip install"):
                    assert command == "pip install pytest-ragev"
                    continue  # installed in this interpreter's environment already
                self.shell(command, machine, env, summary)
            else:
                self.action(step["uses"], {key: self.substitute(str(value), env, matrix)
                                           for key, value in step.get("with", {}).items()},
                            machine)
        return machine

    @staticmethod
    def substitute(text: str, env: dict[str, str], matrix: dict[str, Any]) -> str:
        def value(found: re.Match[str]) -> str:
            scope, key = found.group(1), found.group(2)
            if scope == "matrix":
                return str(matrix[key])
            if scope == "env":
                return env[key]
            if scope == "github":
                return {"base_ref": "main", "head_ref": "pr", "run_id": "1"}[key]
            return "hash"  # hashFiles(...): the key of a cache, never hit here
        return re.sub(r"\$\{\{\s*(\w+)\.?([\w-]*)[^}]*\}\}", value, text)

    def shell(self, command: str, cwd: Path, env: dict[str, str], summary: Path) -> None:
        bindir = str(Path(sys.executable).parent)
        environ = {**os.environ, **env, "GITHUB_STEP_SUMMARY": str(summary),
                   "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=cwd,
                              env=environ, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr}"

    def action(self, uses: str, given: dict[str, str], machine: Path) -> None:
        name = uses.split("@")[0]
        if name in ("actions/checkout", "actions/setup-python", "actions/cache/save"):
            return  # the copy is the checkout; this interpreter is the Python
        if name in ("actions/cache", "actions/cache/restore"):
            assert given["path"].startswith(".pytest_cache/d/ragev/")
            return  # a miss: the first run of a branch
        if name == "actions/upload-artifact":
            store = self.artifacts / given["name"]
            for line in given["path"].split("\n"):
                if line.strip():
                    source = machine / line.strip()
                    if source.is_dir():
                        shutil.copytree(source, store / line.strip(), dirs_exist_ok=True)
                    elif source.exists():
                        (store / line.strip()).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(source, store / line.strip())
            return
        if name == "actions/download-artifact":
            target = machine / given["path"]
            if "pattern" in given:
                for store in sorted(self.artifacts.glob(given["pattern"])):
                    shutil.copytree(store, target / store.name, dirs_exist_ok=True)
            else:
                # One artifact of one folder lands in the path its upload named.
                store = self.artifacts / given["name"]
                (inner,) = [p for p in store.rglob("*") if p.is_dir() and p.name == "kb"]
                shutil.copytree(inner, target, dirs_exist_ok=True)
            return
        raise AssertionError(f"the workflow uses {uses}, which this test does not play")


@pytest.mark.slow
def test_the_documented_workflow_runs_and_gives_one_verdict(
    pytester: pytest.Pytester
) -> None:
    workflow = yaml.safe_load(fenced_block("workflow: ragev-sharded.yml", "yaml"))
    project = pytester.path / "project"
    write_questions(project / "dataset", 40)
    (project / "ragev.toml").write_text(
        '[dataset]\npath = "dataset"\nid = "ci"\n\n[pipeline]\nname = "builtin"\n\n'
        '[baseline]\npath = "ragev-baseline.json"\n', encoding="utf-8")
    # The unsharded run, whose baseline the project has committed.
    unsharded = subprocess.run(
        [sys.executable, "-m", "pytest", "--ragev-config", "ragev.toml", "-p",
         "no:cacheprovider", "--ragev-update-baseline", "--ragev-report", "unsharded.json"],
        cwd=project, capture_output=True, text=True, check=False)
    assert unsharded.returncode == 0, unsharded.stdout[-2000:]

    env = {key: str(value) for key, value in workflow["env"].items()}
    jobs = workflow["jobs"]
    assert list(jobs) == ["kb", "shard", "verdict"]
    assert jobs["shard"]["needs"] == "kb" and jobs["verdict"]["needs"] == "shard"
    runner = Runner(project, pytester.path / "ci")
    built = runner.job("kb", jobs["kb"], env, {})
    (entry,) = (built / ".pytest_cache" / "d" / "ragev" / "kb").glob("*/kb.json")
    shards = jobs["shard"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(env["SHARDS"]) + 1))
    for shard in shards:
        machine = runner.job("shard", jobs["shard"], env, {"shard": shard})
        loaded = machine / ".pytest_cache" / "d" / "ragev" / "kb" / entry.parent.name
        # The KB came from the artifact, not built again on this machine.
        assert list(loaded.parent.glob("*/kb.json")) == [loaded / "kb.json"]
        assert (loaded / "kb.json").stat().st_mtime_ns == entry.stat().st_mtime_ns
    verdict = runner.job("verdict", jobs["verdict"], env, {})

    assert runner.commands == [
        "pip install pytest-ragev",
        "pytest --ragev-config ragev.toml --ragev-limit 1 --ragev-no-baseline",
        *[command for shard in shards for command in (
            "pip install pytest-ragev",
            f"pytest --ragev-config ragev.toml --ragev-shard {shard}/4 "
            f"--ragev-report shard-{shard}.json")],
        "pip install pytest-ragev",
        "ragev report merge shards/*/shard-*.json -o ragev-report.json --gate --markdown "
        '"$GITHUB_STEP_SUMMARY"',
        "ragev cache merge shards/*/.pytest_cache/d/ragev/answers",
    ]
    merged = read_json(verdict / "ragev-report.json")["data"]
    whole = read_json(project / "unsharded.json")["data"]
    assert merged["samples"] == whole["samples"] and merged["metric"] == whole["metric"]
    assert merged["verdict"]["passed"] and merged["baseline"]["comparisons"]  # gated
    assert (pytester.path / "ci" / "verdict.summary.md").read_text(
        encoding="utf-8").startswith("## pytest-ragev: ✅ passed")
    store = verdict / ".pytest_cache" / "d" / "ragev" / "answers" / "answers.sqlite"
    assert store.is_file()
