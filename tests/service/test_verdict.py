"""A failed verdict is visible (issue #29): status 2 says the evaluation ran to its end,
the verdict says whether the configuration passed, and the pages show both; params
carries the original's flat ChatManage keys."""

from __future__ import annotations

import re

import pytest

from tests.service.conftest import Server, create, finished, logged_in, wait_for

pytestmark = pytest.mark.slow


def test_a_failed_threshold_is_shown_beside_the_status(shared_server: Server) -> None:
    (shared_server.configs / "strict.toml").write_text(
        (shared_server.configs / "slow.toml").read_text(encoding="utf-8").replace(
            "delay = 0.15", "delay = 0.0") + '\n[thresholds]\nmrr = 0.99\n', encoding="utf-8")
    admin = shared_server.client(shared_server.keys.admin)
    failing = create(admin, config="strict", variant="base", limit=6)
    passing = create(admin, config="slow", variant="faster", limit=3)
    data = wait_for(admin, failing["id"], finished)
    assert data["task"]["status"] == 2 and data["task"]["err_msg"] == ""  # it ran to its end
    assert data["verdict"]["passed"] is False
    assert any("mrr" in line for line in data["verdict"]["failures"])
    assert wait_for(admin, passing["id"], finished)["verdict"]["passed"] is True
    listed = {item["task"]["id"]: item for item in admin.get(
        "/api/v1/evaluations", params={"page_size": 100}).json()["data"]["items"]}
    assert listed[failing["id"]]["verdict"]["passed"] is False

    client = logged_in(shared_server, shared_server.keys.viewer)
    runs = client.get("/").text
    row = re.search(rf'<tr data-status="2" data-live="{failing["id"]}">(.*?)</tr>', runs, re.S)
    assert row is not None
    # Not the green badge of a pass: the verdict column says it failed, and why.
    assert '<span class="badge s2x">success</span>' in row.group(1)
    assert 'data-verdict="failed" title="ragev: mrr' in row.group(1)
    good = re.search(rf'<tr data-status="2" data-live="{passing["id"]}">(.*?)</tr>', runs, re.S)
    assert good is not None and 'class="badge s2">' in good.group(1)
    assert 'data-verdict="passed"' in good.group(1)
    assert "<th>status</th><th>verdict</th>" in runs
    page = client.get(f"/runs/{failing['id']}").text
    heading = re.search(r"<h1>(.*?)</h1>", page, re.S)
    assert heading is not None and 'data-verdict="failed"' in heading.group(1)
    assert "<h2>Verdict: failed</h2>" in page


def test_params_carry_the_originals_flat_chat_manage_keys(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    task = create(admin, knowledge_base_id="default", chat_id="extractive-short",
                  rerank_id="lexical2", limit=3)
    params = wait_for(admin, task["id"], finished)["params"]
    pipeline = params["pipeline"]
    assert params["embedding_top_k"] == pipeline["embedding_top_k"] == 10
    assert params["vector_threshold"] == pipeline["vector_threshold"]
    assert params["keyword_threshold"] == pipeline["keyword_threshold"]
    assert params["rerank_model_id"] == "lexical2" and params["rerank_top_k"] == 2
    assert params["rerank_threshold"] == pipeline["rerank_threshold"]
    assert params["chat_model_id"] == "extractive-short"
    assert params["summary_config"] == {"max_tokens": 16}
    assert params["fallback_response"] == pipeline["chat"]["fallback_response"]
    assert params["knowledge_base_ids"] == ["default"]
