"""``clients.chat``: the Chat Completions call the RAG generator and a judge share."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_ragev import PipelineError
from pytest_ragev.clients import ENDPOINT_KEYS, ChatCompletions, EndpointConfig
from pytest_ragev.core.tables import Table
from tests._remote_server import Reply, ScriptedServer

VERDICT = {"score": 4, "reason": "Die Antwort nennt 330 Meter, wie die Referenz."}


#: The retries' waits are recorded, not slept through (``waits`` in tests/unit/conftest.py).
pytestmark = pytest.mark.usefixtures("waits")


def judge(server: ScriptedServer, **keys: Any) -> ChatCompletions:
    table = {"base_url": server.url + "/v1", "model": "judge-7b", **keys}
    opts = Table(table, where="[judge]", source="ragev.toml")
    opts.check_keys(ENDPOINT_KEYS)
    return ChatCompletions(EndpointConfig.from_table(opts))


def test_json_mode_with_seed_and_sampling(server: ScriptedServer) -> None:
    server.script.append(Reply(200, {
        "choices": [{"message": {"role": "assistant", "content": json.dumps(VERDICT)}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 18}}))
    messages = [{"role": "system", "content": "Bewerte die Antwort. 只输出 JSON。"},
                {"role": "user", "content": "Frage: Wie hoch ist der Eiffelturm?"}]
    result = judge(server).complete(messages, response_format={"type": "json_object"}, seed=7,
                                    temperature=0.0, max_tokens=200)
    assert json.loads(result.text) == VERDICT
    assert result.usage == {"prompt_tokens": 120, "completion_tokens": 18}
    assert result.attempts == 1 and result.latency_s > 0
    (seen,) = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.body == {"model": "judge-7b", "messages": messages, "temperature": 0.0,
                         "max_tokens": 200, "seed": 7,
                         "response_format": {"type": "json_object"}}


def test_knobs_left_none_are_not_sent(server: ScriptedServer) -> None:
    server.script.append(Reply(200, {"choices": [{"message": {"content": "ok"}}]}))
    result = judge(server).complete([{"role": "user", "content": "q"}])
    assert result.text == "ok" and result.usage == {}
    assert server.seen[0].body == {"model": "judge-7b",
                                   "messages": [{"role": "user", "content": "q"}]}


@pytest.mark.parametrize("body", [{"choices": []}, {"choices": [{"message": {"content": 3}}]},
                                  [1, 2], {"result": "x"}])
def test_a_reply_without_content_is_one_line_naming_the_table(server: ScriptedServer,
                                                              body: Any) -> None:
    server.default = lambda seen: Reply(200, body)
    with pytest.raises(PipelineError) as caught:
        judge(server).complete([{"role": "user", "content": "q"}])
    text = str(caught.value)
    assert text.startswith("[judge] model 'judge-7b': ") and "\n" not in text
    assert "answered without choices[0].message.content (top-level keys: " in text


def test_an_outage_is_retried_then_one_line(server: ScriptedServer) -> None:
    server.default = lambda seen: Reply(503, {"error": {"message": "überlastet"}})
    with pytest.raises(PipelineError, match=r"^\[judge\] model 'judge-7b': .* failed after 2 "
                                            r"attempt\(s\), last: HTTP 503: überlastet"):
        judge(server, max_retries=1).complete([{"role": "user", "content": "q"}])
    assert len(server.seen) == 2
