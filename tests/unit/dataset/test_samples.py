"""The built-in sample dataset (dataset/samples) is loadable, clean and built from its source."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_ragev.dataset import DATASET_FILES, Dataset, load_dataset

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "dataset" / "samples"
CHINESE = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def samples() -> Dataset:
    return load_dataset(SAMPLES)


def _build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_samples", ROOT / "dataset" / "build_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_samples_are_clean(samples: Dataset) -> None:
    assert samples.warnings == ()
    assert samples.dataset_id == "samples"
    assert len(samples.pairs) >= 60
    assert all(pair.has_qrels and pair.has_answer for pair in samples.pairs)
    chinese = [pair for pair in samples.pairs if CHINESE.search(pair.question)]
    assert 30 <= len(chinese) <= len(samples.pairs) - 30  # both languages well represented
    assert sum(1 for pair in samples.pairs if len(pair.pids) >= 2) >= 8


def test_samples_have_realistic_passages_and_distractors(samples: Dataset) -> None:
    texts = samples.corpus.texts
    assert all(200 <= len(text) <= 900 for text in texts)
    assert sum(1 for text in texts if len(text) > 512) >= 5  # chunking matters
    chinese = [text for text in texts if CHINESE.search(text)]
    assert chinese and all(text.endswith("。") for text in chinese)
    share = samples.stats.unreferenced_passages / samples.stats.passages
    assert 0.25 <= share <= 0.40
    answers = [pair.answer for pair in samples.pairs if pair.answer is not None]
    assert all(answer and len(answer) <= 260 for answer in answers)


def test_sample_files_store_int64_ids() -> None:
    for name in DATASET_FILES:
        schema = pq.read_schema(SAMPLES / name)
        for field in schema:
            if field.name in {"id", "qid", "pid", "aid"}:
                assert field.type == pa.int64(), (name, field)


def test_committed_samples_match_their_source(samples: Dataset, tmp_path: Path) -> None:
    build = _build_script()
    build.build(tmp_path / "samples")
    assert load_dataset(tmp_path / "samples").fingerprint == samples.fingerprint


def test_source_rules_are_enforced(tmp_path: Path) -> None:
    build = _build_script()
    source = tmp_path / "bad.toml"
    source.write_text(
        '[[passage]]\nkey = "a"\ntext = "too short"\n'
        '[[question]]\ntext = "q?"\nanswer = "a"\npassages = ["a"]\n'
    )
    with pytest.raises(build.SourceError, match="has 9 characters"):
        build.collect((source,))
    source.write_text(
        f'[[passage]]\nkey = "a"\ntext = "{"x" * 250}"\n'
        '[[question]]\ntext = "q?"\nanswer = "a"\npassages = ["b"]\n'
    )
    with pytest.raises(build.SourceError, match="unknown passages"):
        build.collect((source,))
