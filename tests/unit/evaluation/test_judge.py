"""The judge against a real HTTP server on 127.0.0.1: verdicts, replays, faults."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.evaluation import Judge, JudgeConfig, JudgedTexts, JudgeFailed, VerdictStore
from pytest_ragev.evaluation.judge import parse_reply
from pytest_ragev.evaluation.prompts import PROMPTS
from tests._judge_server import JudgeServer, start_judge


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    judge = start_judge()
    try:
        yield judge
    finally:
        judge.server.close()


def config(judge: JudgeServer, tmp_path: Path, **extra: object) -> JudgeConfig:
    table = {"base_url": judge.url, "model": "judge-1", "max_retries": 1,
             "retry_backoff": 0, "timeout": 5, **extra}
    return JudgeConfig.from_table(table, source="ragev.toml", base_dir=tmp_path)


TOWER = JudgedTexts(
    question="Wie hoch ist der Eiffelturm?",
    answer="Der Eiffelturm ist 330 Meter hoch.",
    reference="Der Eiffelturm ist etwa 330 Meter hoch.",
    passages=("Der Eiffelturm ist 330 Meter hoch.", "长城很长。"),
)


def test_a_verdict_is_asked_for_in_json_mode_at_temperature_0(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge = Judge(config(judge_server, tmp_path))
    verdict = judge.verdict("correctness", TOWER)
    assert verdict.score == 0.75 and verdict.reason == "6 of 7 reference words"
    assert verdict.prompt_tokens > 0 and verdict.completion_tokens == 12
    assert not verdict.replayed and len(verdict.key) == 64
    request = judge_server.server.seen[-1].body
    assert request["temperature"] == 0 and request["seed"] == 20261206
    assert request["response_format"] == {"type": "json_object"}
    assert request["messages"][0]["content"] == PROMPTS["correctness"].system
    assert "Reference answer:\nDer Eiffelturm ist etwa 330 Meter hoch." in (
        request["messages"][1]["content"])
    faithful = judge.verdict("faithfulness", TOWER)
    relevant = judge.verdict("context_relevance", TOWER)
    assert (faithful.score, relevant.score) == (1.0, 0.5)


def test_the_store_replays_a_verdict_without_a_call_and_rejudge_asks_again(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = VerdictStore(tmp_path / "verdicts.jsonl")
    first = Judge(config(judge_server, tmp_path), store=store).verdict("correctness", TOWER)
    assert judge_server.total == 1
    again = Judge(config(judge_server, tmp_path), store=store).verdict("correctness", TOWER)
    assert judge_server.total == 1 and again.replayed
    assert (again.score, again.reason, again.key) == (first.score, first.reason, first.key)
    # The recorded cost of the call travels with the replayed verdict.
    assert again.prompt_tokens == first.prompt_tokens
    fresh = Judge(config(judge_server, tmp_path), store=store, rejudge=True).verdict(
        "correctness", TOWER)
    assert judge_server.total == 2 and not fresh.replayed
    # Another judge model is another key: judged again.
    other = Judge(config(judge_server, tmp_path, model="judge-2"), store=store)
    assert other.key("correctness", TOWER) != first.key
    other.verdict("correctness", TOWER)
    assert judge_server.total == 3


def test_a_reply_that_is_not_json_is_asked_once_more(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge_server.fault = "malformed_once"
    verdict = Judge(config(judge_server, tmp_path)).verdict("correctness", TOWER)
    assert verdict.score == 0.75 and judge_server.total == 2
    repair = judge_server.server.seen[-1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": "I think the answer is mostly right."}
    assert repair[-1]["content"].startswith("Your reply was not the JSON object asked for.")
    judge_server.fault = "malformed"
    failed = Judge(config(judge_server, tmp_path)).verdict("faithfulness", TOWER)
    assert failed.score is None and failed.error is not None
    assert failed.error.startswith("JudgeReplyError: [judge] model 'judge-1': the reply is not")
    assert "'I think the answer is mostly right.'" in failed.error


def test_a_service_that_does_not_answer_is_a_question_error(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge_server.fault = "error"
    verdict = Judge(config(judge_server, tmp_path)).verdict("correctness", TOWER)
    assert verdict.score is None and verdict.error is not None
    assert verdict.error.startswith("JudgeError: [judge] model 'judge-1': ")
    assert "failed after 2 attempt(s), last: HTTP 500: judge overloaded" in verdict.error
    judge_server.fault = None
    judge_server.delay_s = 1.5
    slow = Judge(config(judge_server, tmp_path, timeout=0.5)).verdict("correctness", TOWER)
    assert slow.error is not None and "no response within timeout = 0.5 s" in slow.error


def test_a_refused_key_stops_the_run_in_one_line(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge_server.fault = "unauthorized"
    with pytest.raises(JudgeFailed) as failed:
        Judge(config(judge_server, tmp_path)).verdict("context_relevance", TOWER)
    assert str(failed.value).startswith("judged metric 'context_relevance': [judge] model "
                                        "'judge-1': HTTP 401")
    assert "\n" not in str(failed.value)


def test_a_refused_connection_fails_the_preflight(tmp_path: Path) -> None:
    judge = Judge(JudgeConfig.from_table(
        {"base_url": "http://127.0.0.1:9/v1", "model": "judge-1", "max_retries": 0},
        source="ragev.toml", base_dir=tmp_path))
    reason = judge.preflight()
    assert reason is not None and "[judge] model 'judge-1'" in reason


@pytest.mark.parametrize(("text", "parsed"), [
    ('{"score": 0.5, "reason": "half"}', (0.5, "half")),
    ('```json\n{"score": 1, "reason": "全部正确"}\n```', (1.0, "全部正确")),
    ('Here you go: {"score": 0, "reason": "wrong"} Thanks.', (0.0, "wrong")),
    ('{"score": 0.25}', (0.25, "")),
    ('{"score": 1.5, "reason": "too high"}', None),
    ('{"score": "0.5"}', None),
    ('{"score": true}', None),
    ("[0.5]", None),
    ("no json at all", None),
    ('{"score": NaN}', None),
])
def test_a_reply_parses_only_as_the_object_asked_for(
    text: str, parsed: tuple[float, str] | None
) -> None:
    assert parse_reply(text) == parsed


@pytest.mark.parametrize(("table", "message"), [
    ({"model": "m"}, "[judge] base_url is required"),
    ({"base_url": "http://x/v1", "model": "m", "modle": "n"},
     "unknown key [judge] 'modle'; did you mean 'model'?"),
    ({"base_url": "http://x/v1", "model": "m", "seed": 1.5},
     "[judge] seed = 1.5 is invalid; use a whole number"),
    ({"base_url": "http://x/v1", "model": "m", "store": ""},
     "[judge] store = '' is invalid; write a file path"),
    ({"base_url": "http://x/v1", "model": "m", "max_tokens": 4},
     "[judge] max_tokens = 4 is invalid; use a whole number >= 16"),
])
def test_a_bad_judge_table_is_one_line(table: dict[str, object], message: str,
                                       tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        JudgeConfig.from_table(table, source="ragev.toml", base_dir=tmp_path)
    assert message in str(error.value) and str(error.value).startswith("ragev.toml: ")


def test_the_store_path_is_relative_to_the_config_and_seed_false_sends_none(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    cfg = config(judge_server, tmp_path, store="eval/verdicts.jsonl", seed=False,
                 json_mode=False)
    assert cfg.store == tmp_path / "eval" / "verdicts.jsonl" and cfg.seed is None
    Judge(cfg).verdict("correctness", TOWER)
    request = judge_server.server.seen[-1].body
    assert "seed" not in request and "response_format" not in request


def test_the_prompts_are_documented_word_for_word() -> None:
    from pytest_ragev.evaluation.prompts import REPAIR

    docs = (Path(__file__).resolve().parents[3] / "docs" / "quality.md").read_text(
        encoding="utf-8")
    for prompt in PROMPTS.values():
        assert f"#### `{prompt.version}`" in docs
        assert prompt.system in docs and prompt.user in docs, prompt.version
    assert REPAIR in docs
