"""What the KB and answer-cache keys depend on: the code, the corpus alone, the knobs."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import pytest_ragev.pipelines.builtin.pipeline as builtin_pipeline
import pytest_ragev.pipelines.builtin.store as store
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.dataset import Corpus, corpus_fingerprint, load_dataset, write_dataset
from pytest_ragev.pipelines import build_pipeline
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES

PACKAGE = Path(store.__file__).resolve().parents[2]
Project = Callable[..., Path]


def pipeline(**options: Any) -> Any:
    return build_pipeline(PipelineSettings(name="builtin", options=options), source="ragev.toml")


def test_code_digest_covers_every_module_that_decides_kb_and_answers(tmp_path: Path) -> None:
    copy = tmp_path / "pytest_ragev"
    for pattern in store.CODE_MODULES:
        for path in PACKAGE.glob(pattern):
            target = copy / path.relative_to(PACKAGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    assert store.source_digest(copy) == store.code_digest()
    watched = [copy / "pipelines" / "builtin" / name
               for name in ("chunking.py", "pipeline.py", "bm25.py", "tokens.py", "__init__.py")]
    watched += [copy / "plugin" / "defaults.py", copy / "core" / "segment.py",
                copy / "pipelines" / "identity.py", copy / "core" / "digest.py"]
    seen = {store.source_digest(copy)}
    for path in watched:
        path.write_text(path.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
        seen.add(store.source_digest(copy))
    assert len(seen) == len(watched) + 1  # every edit changed the digest


def test_kb_and_answer_keys_include_the_code_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    before = pipeline()
    kb_key, answer_key = before.kb_key(), before.answer_key()
    monkeypatch.setattr(builtin_pipeline, "code_digest", lambda: "edited chunker")
    after = pipeline()
    assert after.kb_key() != kb_key and after.answer_key() != answer_key


def test_the_kb_cache_is_keyed_on_the_corpus_fingerprint(tmp_path: Path) -> None:
    pipe = pipeline()
    first = pipe.build_knowledge_base(CORPUS, fingerprint="a" * 64, cache_dir=tmp_path)
    same = pipe.build_knowledge_base(CORPUS, fingerprint="a" * 64, cache_dir=tmp_path)
    other = pipe.build_knowledge_base(CORPUS, fingerprint="b" * 64, cache_dir=tmp_path)
    assert not first.loaded_from_cache and same.loaded_from_cache
    assert not other.loaded_from_cache and other.key != first.key


def _corpus(ids: list[int], texts: list[str], split: int | None = None) -> Corpus:
    array = pa.array(texts, type=pa.string())
    chunks = [array] if split is None else [array.slice(0, split), array.slice(split)]
    return Corpus(np.asarray(ids, dtype=np.int64), pa.chunked_array(chunks, type=pa.string()))


def test_corpus_fingerprint_is_the_same_for_columns_and_mappings() -> None:
    ids, texts = sorted(CORPUS), [CORPUS[i] for i in sorted(CORPUS)]
    columns = corpus_fingerprint(_corpus(ids, texts))
    assert corpus_fingerprint(dict(reversed(list(CORPUS.items())))) == columns
    # Sliced chunks (non-zero offsets) and large strings hash the same bytes.
    assert corpus_fingerprint(_corpus(ids, texts, split=3)) == columns
    large = Corpus(np.asarray(ids, dtype=np.int64),
                   pa.chunked_array([pa.array(texts, type=pa.large_string())]))
    assert corpus_fingerprint(large) == columns
    # Any text or id change, and moving text between neighbours, changes it.
    assert corpus_fingerprint({**CORPUS, 3: CORPUS[3] + "!"}) != columns
    assert corpus_fingerprint({(8 if k == 7 else k): v for k, v in CORPUS.items()}) \
        != columns
    moved = {**CORPUS, 1: CORPUS[1] + CORPUS[2][:3], 2: CORPUS[2][3:]}
    assert corpus_fingerprint(moved) != columns


def test_a_loaded_corpus_fingerprint_ignores_questions(tmp_path: Path) -> None:
    common: dict[str, Any] = {"corpus": CORPUS, "answers": ANSWERS, "qrels": QRELS, "qas": QAS}
    write_dataset(tmp_path / "a", queries=QUERIES, **common)
    write_dataset(tmp_path / "b", queries={**QUERIES, 1: "When did they finish it?"}, **common)
    a, b = load_dataset(tmp_path / "a"), load_dataset(tmp_path / "b")
    assert a.fingerprint != b.fingerprint
    assert corpus_fingerprint(a.corpus) == corpus_fingerprint(b.corpus)
    assert corpus_fingerprint(a.corpus) == corpus_fingerprint(dict(CORPUS))
