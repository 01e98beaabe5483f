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
