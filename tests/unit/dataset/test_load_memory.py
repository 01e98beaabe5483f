"""What loading a dataset leaves resident: the texts once, not the decoder's leftovers."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from pytest_ragev.dataset import load_dataset, write_dataset

_MEASURE = """
import json, sys
import pyarrow
from pytest_ragev.dataset import load_dataset

def resident_mb():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

load_dataset(sys.argv[2])  # imports, thread pool, allocator set up: not the load's cost
before = resident_mb()
dataset = load_dataset(sys.argv[1])
print(json.dumps({"grown_mb": resident_mb() - before, "passages": len(dataset.corpus)}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_load_keeps_no_decoder_leftovers(tmp_path: Path) -> None:
    # 20,000 passages of ~1 KB (German, Chinese and English words): 20 MB of text. Arrow's
    # allocator kept the pages that decoding the file freed, ~1.7x the texts on top of
    # them, unless the loader hands them back.
    rng = random.Random(7)
    words = ["Prüfung", "über", "Straße", "检索", "增强", "生成", "retrieval", "answer", "query"]
    passages = {pid: " ".join(rng.choice(words) for _ in range(130)) for pid in range(20_000)}
    text_mb = sum(len(text.encode()) for text in passages.values()) / 2**20
    folder = write_dataset(tmp_path / "ds", queries={1: "Was ist 检索?"}, corpus=passages,
                           answers={1: "eine Antwort"}, qrels=[(1, 3)], qas=[(1, 1)])
    tiny = write_dataset(tmp_path / "tiny", queries={1: "Wie?"}, corpus={1: "Так."})
    measured = subprocess.run([sys.executable, "-c", _MEASURE, str(folder), str(tiny)], check=True,
                              capture_output=True, text=True)
    result = json.loads(measured.stdout)
    assert result["passages"] == 20_000
    # The texts (Arrow, once) plus slack for the ids and the allocator's own pages (the
    # load grew by 4x the texts while the allocator kept them).
    assert result["grown_mb"] < 2 * text_mb + 8, (result, text_mb)


def test_iterating_the_corpus_keeps_no_python_strings(tmp_path: Path) -> None:
    # The built-in KB build reads every passage once; a Python string per passage kept
    # after that (100 MB at 300,000 passages) is what the columnar corpus exists to avoid.
    passages = {pid: f"Absatz {pid}: 段落 {pid} — Абзац {pid}. " * 8 for pid in range(5_000, 0, -1)}
    dataset = load_dataset(write_dataset(tmp_path / "ds", queries={1: "Wo?"}, corpus=passages))
    corpus = dataset.corpus
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        seen = sum(len(text) for _, text in corpus.items())
        seen += sum(len(text) for text in corpus.values())
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert seen == 2 * sum(len(text) for text in passages.values())
    assert list(corpus.items())[:2] == [(1, passages[1]), (2, passages[2])]
    assert kept < 100_000, kept  # as Python strings the texts take 3 MB
