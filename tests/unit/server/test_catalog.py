"""What a request may name, and the task config a plan writes."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from pytest_ragev.dataset import write_dataset
from pytest_ragev.server.catalog import Catalog, FieldError
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES


@pytest.fixture
def configs(tmp_path: Path) -> Path:
    data = {"queries": QUERIES, "corpus": CORPUS, "answers": ANSWERS, "qrels": QRELS, "qas": QAS}
    write_dataset(tmp_path / "data" / "mini", **data)
    write_dataset(tmp_path / "data" / "faq", **data)
    (tmp_path / "team").mkdir()
    (tmp_path / "base.toml").write_text(
        '[dataset]\npath = "data/mini"\nid = "mini"\n[pipeline]\nname = "builtin"\n'
        'chunk_size = 128\n[thresholds]\nrecall = 0.5\n[baseline]\npath = "b.json"\n'
        '[report]\njson = "r.json"\n[[variants]]\nname = "k256"\npipeline.chunk_size = 256\n',
        encoding="utf-8")
    (tmp_path / "team" / "other.toml").write_text(
        '[dataset]\npath = "../data/mini"\n[pipeline]\nname = "builtin"\nchunk_size = 64\n'
        '[run]\nprogress_interval = 5\n', encoding="utf-8")
    (tmp_path / ".hidden.toml").write_text("[dataset]\n", encoding="utf-8")
    (tmp_path / "ragev-server.toml").write_text(
        '[datasets.faq]\npath = "data/faq"\n[chat.qwen]\nbase_url = "http://127.0.0.1:1/v1"\n'
        'model = "qwen"\napi_key = "sk-literal-secret"\n', encoding="utf-8")
    return tmp_path


def test_configs_and_datasets(configs: Path) -> None:
    catalog = Catalog(configs)
    names = [entry.name for entry in catalog.configs_list()]
    assert names == ["base", "team/other"]
    datasets = catalog.datasets()
    assert datasets["faq"].source == "ragev-server.toml"
    assert datasets["mini"].source == "config base"
    assert sorted(catalog.models("chat")) == ["extractive", "qwen"]


def test_plan_runs_the_config_as_written_with_its_own_dataset(configs: Path) -> None:
    plan = Catalog(configs).plan(dataset_id=None, knowledge_base_id=None, chat_id=None,
                                 rerank_id=None, config="base", variants=["k256"])
    doc = plan.document
    assert doc["dataset"] == {"path": str((configs / "data" / "mini").resolve()), "id": "mini"}
    assert doc["baseline"]["path"] == str((configs / "b.json").resolve())
    assert "report" not in doc and doc["run"]["progress_interval"] == 1.0
    assert doc["variants"][0]["name"] == "k256"
    assert plan.folder == configs.resolve()
    assert tomllib.loads(tomli_w.dumps(doc)) == doc


def test_plan_copies_the_knowledge_base_pipeline_and_applies_models(configs: Path) -> None:
    plan = Catalog(configs).plan(dataset_id="faq", knowledge_base_id="team/other",
                                 chat_id="qwen", rerank_id="lexical", config="base")
    doc = plan.document
    assert doc["pipeline"]["chunk_size"] == 64 and doc["pipeline"]["chat"]["model"] == "qwen"
    assert doc["pipeline"]["rerank_model"] == "lexical"
    assert "baseline" not in doc  # another dataset: the baseline's numbers do not apply
    assert "variants" not in doc  # the knowledge base's config has none
    assert plan.folder == (configs / "team").resolve()
    assert doc["thresholds"] == {"recall": 0.5}
    assert "sk-literal-secret" not in repr(plan.redacted_document)


@pytest.mark.parametrize(
    ("kwargs", "field", "hint"),
    [({"dataset_id": "fqa"}, "dataset_id", "did you mean 'faq'?"),
     ({"knowledge_base_id": "bsae"}, "knowledge_base_id", "did you mean 'base'?"),
     ({"config": None}, "knowledge_base_id", "no config named 'default'; valid configs"),
     ({"config": "nothing"}, "config", "valid configs: base, team/other"),
     ({"chat_id": "qwne"}, "chat_id", "did you mean 'qwen'?"),
     ({"rerank_id": "x"}, "rerank_id", "valid rerank models: lexical"),
     ({"config": "base", "variants": ["k265"]}, "variant", "did you mean 'k256'?")],
)
def test_unknown_names(configs: Path, kwargs: dict, field: str, hint: str) -> None:
    arguments = {"dataset_id": None, "knowledge_base_id": None, "chat_id": None,
                 "rerank_id": None, "config": "base", **kwargs}
    with pytest.raises(FieldError) as info:
        Catalog(configs).plan(**arguments)
    assert info.value.field == field and hint in info.value.message


def test_a_broken_config_plans_with_its_error(configs: Path) -> None:
    (configs / "bad.toml").write_text("[dataset\n", encoding="utf-8")
    plan = Catalog(configs).plan(dataset_id=None, knowledge_base_id=None, chat_id=None,
                                 rerank_id=None, config="bad")
    assert plan.error is not None and "not valid TOML" in plan.error
    assert str(configs) not in plan.error


@pytest.mark.parametrize(("folder", "proposed"), [("my data (v2)", "my-data-v2"),
                                                  ("数据集", "dataset"),
                                                  ("_Fragen", "Fragen")])
def test_a_folder_name_that_is_no_valid_id_is_refused(configs: Path, folder: str,
                                                      proposed: str) -> None:
    data = {"queries": QUERIES, "corpus": CORPUS, "answers": ANSWERS, "qrels": QRELS, "qas": QAS}
    write_dataset(configs / "data" / folder, **data)
    (configs / "odd.toml").write_text(
        f'[dataset]\npath = "data/{folder}"\n[pipeline]\nname = "builtin"\n', encoding="utf-8")
    catalog = Catalog(configs)
    entry = next(e for e in catalog.configs_list() if e.name == "odd")
    assert entry.dataset_id is None and entry.error == (
        f"odd.toml: [dataset] id is not set and the dataset folder's name {folder!r} is not a "
        f"valid dataset id; set [dataset] id = \"{proposed}\" (letters, digits, '-', '_' or '.')")
    assert folder not in catalog.datasets()  # never a task id or a task folder's name
    plan = catalog.plan(dataset_id="mini", knowledge_base_id=None, chat_id=None,
                        rerank_id=None, config="odd")
    assert plan.error == entry.error  # the task fails with that line


def test_a_folder_name_that_is_a_valid_id_is_the_dataset_id(configs: Path) -> None:
    entry = next(e for e in Catalog(configs).configs_list() if e.name == "team/other")
    assert entry.error is None and entry.dataset_id == "mini"  # no [dataset] id: the folder


def test_embedding_and_rerank_models_behind_an_api_are_named(configs: Path) -> None:
    (configs / "ragev-server.toml").write_text(
        '[embedding.bge-m3]\nbase_url = "http://127.0.0.1:8080/v1"\nmodel = "bge-m3"\n'
        'api_key_env = "EMBED_KEY"\n'
        '[rerank.bge]\nrerank = { base_url = "http://127.0.0.1:8081/v1", model = "bge-rr" }\n'
        'rerank_top_k = 5\n', encoding="utf-8")
    (configs / "vec.toml").write_text(
        '[dataset]\npath = "data/mini"\nid = "mini"\n[pipeline]\nname = "builtin"\n'
        'retrieval = "hybrid"\nembedding_model = "hashing"\nrerank_model = "lexical"\n',
        encoding="utf-8")
    catalog = Catalog(configs)
    assert sorted(catalog.models("embedding")) == ["bge-m3"]
    assert sorted(catalog.models("rerank")) == ["bge", "lexical"]
    plan = catalog.plan(dataset_id=None, knowledge_base_id=None, chat_id=None,
                        rerank_id="bge", config="vec", embedding_id="bge-m3")
    pipeline = plan.document["pipeline"]
    assert pipeline["embedding"] == {"base_url": "http://127.0.0.1:8080/v1", "model": "bge-m3",
                                     "api_key_env": "EMBED_KEY"}
    assert pipeline["rerank"] == {"base_url": "http://127.0.0.1:8081/v1", "model": "bge-rr"}
    assert "embedding_model" not in pipeline and "rerank_model" not in pipeline
    assert pipeline["rerank_top_k"] == 5 and plan.embedding_id == "bge-m3"
    assert tomllib.loads(tomli_w.dumps(plan.document)) == plan.document
    # The built-in reranker replaces a [pipeline.rerank] table the same way.
    back = catalog.plan(dataset_id=None, knowledge_base_id=None, chat_id=None,
                        rerank_id="lexical", config="vec")
    assert back.document["pipeline"]["rerank_model"] == "lexical"
    with pytest.raises(FieldError) as info:
        catalog.plan(dataset_id=None, knowledge_base_id=None, chat_id=None, rerank_id=None,
                     config="vec", embedding_id="bge-m4")
    assert info.value.field == "embedding_id" and "did you mean 'bge-m3'?" in info.value.message
