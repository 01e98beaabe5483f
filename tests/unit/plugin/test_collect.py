"""NodeIds: every node id the plugin builds parses back to its question, and nothing else does."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragev.plugin.collect import NodeIds

QIDS = frozenset({0, 3, 17, 170})
# Dataset ids default to the dataset's folder name, which may hold anything a folder can.
ODD_DATASET_IDS = ("mini", "数据集 v2", "q3", "set [a-q17]", "a::b", "verdict", "Вопросы-ß.2")


def node_ids(dataset_id: str = "mini", prefix: str = "ragev.toml") -> NodeIds:
    return NodeIds(prefix=prefix, dataset_id=dataset_id, qids=QIDS)


@pytest.mark.parametrize("dataset_id", ODD_DATASET_IDS)
@pytest.mark.parametrize("variant", [None, "chunk256", "top_k.5", "v-q3"])
@pytest.mark.parametrize("qid", [0, 170])
def test_generated_ids_parse_back_to_their_question(
    dataset_id: str, variant: str | None, qid: int
) -> None:
    ids = node_ids(dataset_id)
    nodeid = ids.generated_id(qid, variant)
    assert ids.generated(nodeid) == (variant, qid)
    assert ids.question(nodeid) == (variant, qid)


def test_generated_ids_have_the_shape_pytest_gives_the_collectors() -> None:
    # RagevFile (the config file) > RagevDataset > [RagevVariant >] RagevItem (q<qid>).
    ids = node_ids("mini", prefix="configs/ragev zh.toml")
    assert ids.generated_id(17) == "configs/ragev zh.toml::mini::q17"
    assert ids.generated_id(17, "chunk256") == "configs/ragev zh.toml::mini::chunk256::q17"
    assert ids.verdict() == "configs/ragev zh.toml::mini::verdict"


@pytest.mark.parametrize("dataset_id", ODD_DATASET_IDS)
def test_the_verdict_is_no_question(dataset_id: str) -> None:
    ids = node_ids(dataset_id)
    assert ids.verdict().startswith(f"ragev.toml::{dataset_id}::")
    assert ids.generated(ids.verdict()) is None
    assert ids.question(ids.verdict()) is None


@pytest.mark.parametrize("nodeid", [
    "ragev.toml::mini::q99",             # a qid the dataset does not have
    "ragev.toml::mini::q017",            # not a name NodeIds builds
    "ragev.toml::mini::q",
    "ragev.toml::mini::x17",
    "ragev.toml::mini::a::b::q17",       # variant names hold no "::"
    "ragev.toml::mini::::q17",
    "ragev.toml::mini",
    "ragev.toml::other::q17",            # another dataset's collector
    "other.toml::mini::q17",             # another config file
    "ragev.toml.bak::mini::q17",
    "tests/test_rag.py::test_answer",
])
def test_ids_that_are_no_generated_question(nodeid: str) -> None:
    assert node_ids().generated(nodeid) is None
    assert node_ids().question(nodeid) is None


@pytest.mark.parametrize(("before", "after"), [
    ((), ()),                            # test_answer[q17]
    ((), ("x",)),                        # ragev_case first, another parameter after it
    (("de",), ()),
    (("zh", "中文"), ("ja",)),
])
@pytest.mark.parametrize("qid", sorted(QIDS))
def test_tests_parametrized_by_ragev_case_parse_to_the_base_question(
    before: tuple[str, ...], after: tuple[str, ...], qid: int
) -> None:
    # pytest joins the ids of several parameters with "-"; ragev_case's is item_name.
    param_id = "[" + "-".join((*before, NodeIds.item_name(qid), *after)) + "]"
    for test in ("tests/test_rag.py::test_answer", "tests/test_rag.py::TestRag::test_answer"):
        assert node_ids().question(test + param_id) == (None, qid)
        assert node_ids().generated(test + param_id) is None


@pytest.mark.parametrize("param_id", ["[q99]", "[aq17]", "[q17a]", "[17]", "[q17]x", ""])
def test_other_parametrize_ids_are_no_question(param_id: str) -> None:
    assert node_ids().question("tests/test_rag.py::test_answer" + param_id) is None


@pytest.mark.parametrize(("arg", "path"), [
    ("ragev.toml", "ragev.toml"),
    ("ragev.toml::mini::q3", "ragev.toml"),
    ("configs/ragev zh.toml::数据集::chunk256::q3", "configs/ragev zh.toml"),
    ("tests/test_rag.py::test_answer[q17-a::b]", "tests/test_rag.py"),
    ("tests/", "tests/"),
])
def test_argument_path_is_the_file_part_of_a_command_line_argument(arg: str, path: str) -> None:
    assert NodeIds.argument_path(arg) == path


def test_of_names_the_config_file_relative_to_the_rootdir(tmp_path: Path) -> None:
    inside = NodeIds.of(tmp_path / "configs" / "ragev.toml", tmp_path, "mini", QIDS)
    assert inside.generated_id(3) == "configs/ragev.toml::mini::q3"
    outside = NodeIds.of(tmp_path / "ragev.toml", tmp_path / "elsewhere", "mini", QIDS)
    assert outside.prefix == (tmp_path / "ragev.toml").as_posix()
    assert outside.generated(outside.generated_id(3, "v1")) == ("v1", 3)
