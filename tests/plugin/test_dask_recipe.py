"""docs/sharding.md's Dask recipe, run as a user copies it, on a local Dask cluster.

The recipe answers every question in two worker processes of a ``LocalCluster`` and
writes the answers file; the plugin replays it and gates it against the baseline that
the same pipeline, answered in-process by a conftest hook, wrote: nothing changed, every
per-question value equal.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests._data import write_questions
from tests._pytester import read_json, run_ragev

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sharding.md"

#: The user's pipeline, a function of the question's text: a keyword retriever over
#: the corpus and an extractive answer (its first hit), in any of the six languages.
MY_RAG = textwrap.dedent(
    """
    import multiprocessing
    import os
    import re

    from pytest_ragev import Answer
    from pytest_ragev.dataset import load_dataset

    CORPUS = load_dataset(os.path.join(os.path.dirname(__file__), "questions")).corpus

    def answer(question):
        number = re.search(r"\\d+", question).group()
        hits = [pid for pid, text in sorted(CORPUS.items())
                if re.search(rf"(?<!\\d){number}(?!\\d)", text)][:3]
        text = CORPUS[hits[0]] if hits and int(number) % 5 else "不知道。"
        return Answer(retrieved=[CORPUS[pid] for pid in hits], text=text,
                      meta={"process": multiprocessing.current_process().name})
    """
)

CONFTEST = textwrap.dedent(
    """
    import pytest
    from my_rag import answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return answer(case.question)
    """
)


def recipe() -> str:
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- recipe: answers_with_dask.py -->\n```python\n(.*?)\n```", text,
                      re.DOTALL)
    assert found is not None, "docs/sharding.md has no recipe block"
    return found.group(1)


@pytest.mark.slow
def test_answers_made_on_a_dask_cluster_are_scored_and_gated(
    pytester: pytest.Pytester
) -> None:
    # The [distributed] extra (in the dev extra). Looked up, not imported: importing
    # distributed in this process changes how later in-process pytest runs load plugins.
    if importlib.util.find_spec("distributed") is None:
        pytest.skip("needs pytest-ragev[distributed]")
    write_questions(pytester.path / "questions", 60)
    (pytester.path / "my_rag.py").write_text(MY_RAG, encoding="utf-8")
    (pytester.path / "answers_with_dask.py").write_text(recipe(), encoding="utf-8")
    pytester.makeconftest(CONFTEST)
    (pytester.path / "ragev.toml").write_text(
        '[dataset]\npath = "questions"\nid = "engine"\n\n[pipeline]\nname = "hooks"\n\n'
        '[baseline]\npath = "ragev-baseline.json"\n', encoding="utf-8")
    in_process = run_ragev(pytester, "--ragev-update-baseline", "--ragev-report",
                           "in-process.json")
    assert in_process.ret == pytest.ExitCode.OK, in_process.stdout.str()

    made = subprocess.run([sys.executable, "answers_with_dask.py", "questions",
                           "answers.parquet"], cwd=pytester.path, capture_output=True,
                          text=True, check=False, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    assert made.stdout.splitlines()[-1] == "wrote 60 answers to answers.parquet"
    rows = pq.read_table(pytester.path / "answers.parquet").to_pylist()
    processes = {row["meta"] for row in rows}
    assert len(rows) == 60
    # Answered in the cluster's worker processes, not in the script's.
    assert all("Dask Worker process" in process for process in processes), processes

    # Scored by the replay pipeline, without the hook; gated against the baseline.
    pytester.makeconftest("")
    (pytester.path / "ragev.toml").write_text(
        '[dataset]\npath = "questions"\nid = "engine"\n\n[pipeline]\nname = "replay"\n'
        'answers = "answers.parquet"\n\n[baseline]\npath = "ragev-baseline.json"\n',
        encoding="utf-8")
    replayed = run_ragev(pytester, "--ragev-report", "replayed.json")
    assert replayed.ret == pytest.ExitCode.OK, replayed.stdout.str()
    replayed.stdout.fnmatch_lines(["ragev: base configuration against the baseline, "
                                   "60 shared questions*", "ragev: verdict passed"])
    engine = read_json(pytester.path / "replayed.json")["data"]
    local = read_json(pytester.path / "in-process.json")["data"]
    values = [(s["qid"], s["metrics"], s["retrieval_ids"]) for s in engine["samples"]]
    assert values == [(s["qid"], s["metrics"], s["retrieval_ids"]) for s in local["samples"]]
    assert engine["metric"] == local["metric"]
