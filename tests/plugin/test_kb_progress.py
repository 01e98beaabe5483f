"""The knowledge-base build progress: visible without -s, one line on a TTY, no duplicates."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_ragev.dataset import write_dataset

#: Corpora from this size on show the KB-build progress (docs/pipelines.md).
PROGRESS_MIN_PASSAGES = 20_000
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu"]


def _big_project(root: Path) -> None:
    rng = random.Random(7)
    corpus = {i: f"Passage {i} about {' '.join(rng.choices(WORDS, k=5))}."
              for i in range(1, PROGRESS_MIN_PASSAGES + 1)}
    write_dataset(root / "data", queries={1: "alpha beta?", 2: "gamma delta?"}, corpus=corpus,
                  answers={11: "a", 12: "b"}, qrels=[(1, 1), (2, 2)], qas=[(1, 11), (2, 12)])
    (root / "ragev.toml").write_text('[dataset]\npath = "data"\n\n[pipeline]\nname = "builtin"\n',
                                     encoding="utf-8")


PROGRESS_LINES = [
    f"ragev: building knowledge base of {PROGRESS_MIN_PASSAGES} passages ...",
    f"ragev: building knowledge base of {PROGRESS_MIN_PASSAGES} passages: 25%",
    f"ragev: building knowledge base of {PROGRESS_MIN_PASSAGES} passages: 50%",
    f"ragev: building knowledge base of {PROGRESS_MIN_PASSAGES} passages: 75%",
    f"ragev: knowledge base built from {PROGRESS_MIN_PASSAGES} passages in *s",
]


@pytest.mark.slow
@pytest.mark.parametrize("flags", [(), ("-s",)])
def test_progress_shows_through_output_capture_once(
    pytester: pytest.Pytester, flags: tuple[str, ...]
) -> None:
    _big_project(pytester.path)
    # A subprocess: only there does fd-level capture swallow what the reporter writes.
    result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "-p",
                                           "no:cacheprovider", *flags)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(PROGRESS_LINES, consecutive=True)
    output = result.stdout.str()
    assert output.count("knowledge base built from") == 1
    assert output.count("passages: 75%") == 1
    # Written before the items finish, not in a captured-output section.
    assert "Captured stdout" not in output
    assert output.index("knowledge base built") < output.index("3 passed")


def test_a_kb_loaded_from_the_cache_shows_no_progress(pytester: pytest.Pytester) -> None:
    _big_project(pytester.path)
    config = pytester.path / "ragev.toml"
    # Answers uncached, so the second run needs the KB: it loads it from .pytest_cache.
    config.write_text(config.read_text() + "\n[run]\ncache = false\n", encoding="utf-8")
    first = pytester.runpytest("--ragev-config", "ragev.toml")
    first.stdout.fnmatch_lines(["ragev: knowledge base built from *"])
    loaded = pytester.runpytest("--ragev-config", "ragev.toml")
    assert loaded.ret == pytest.ExitCode.OK
    assert "knowledge base" not in loaded.stdout.str()


def test_the_running_report_names_each_phase(pytester: pytest.Pytester) -> None:
    """A poller of the JSON report sees what the run does: the knowledge base's build
    with its count, then answering; the end of the run names its phases too."""
    import json
    import threading
    import time

    _big_project(pytester.path)
    config = pytester.path / "ragev.toml"
    config.write_text(config.read_text() + "\n[run]\nprogress_interval = 0.05\n",
                      encoding="utf-8")
    # At the report hook the final report is not written yet: the file on disk is the
    # running report, naming the last end-of-run phase.
    pytester.makeconftest('''
import json, pathlib

def pytest_ragev_report(report):
    on_disk = json.loads(pathlib.Path("report.json").read_text(encoding="utf-8"))
    pathlib.Path("phase-at-report.json").write_text(json.dumps(on_disk["data"]["phase"]))
''')
    report = pytester.path / "report.json"
    seen: list[dict] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                phase = json.loads(report.read_text(encoding="utf-8"))["data"].get("phase")
            except (OSError, ValueError, KeyError):
                phase = None
            if phase is not None and (not seen or seen[-1] != phase):
                seen.append(phase)
            time.sleep(0.005)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml",
                                               "--ragev-report", "report.json",
                                               "-p", "no:cacheprovider")
    finally:
        done.set()
        poller.join()
    assert result.ret == pytest.ExitCode.OK
    names = [phase["name"] for phase in seen]
    assert names[0] == "loading", seen
    building = [phase for phase in seen if phase["name"] == "building_kb"]
    assert building and all(phase["total"] == building[0]["total"] for phase in building)
    assert any(0 < phase["done"] < phase["total"] for phase in building), seen
    assert "answering" in names[names.index("building_kb"):]  # once the KB is there
    assert json.loads((pytester.path / "phase-at-report.json").read_text()) == {
        "name": "writing_reports"}
    assert "phase" not in json.loads(report.read_text(encoding="utf-8"))["data"]  # final
