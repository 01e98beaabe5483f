"""End to end: the plugin evaluating an ``http`` service and a ``module:callable`` pipeline."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._remote_server import Reply, ScriptedServer, Seen

Project = Callable[..., Path]


def rag_service(seen: Seen) -> Reply:
    qid = seen.body["id"]
    return Reply(200, {"data": {"answer": f"answer to {qid}",
                                "refs": [{"pid": qid, "text": "t"}, {"pid": 6, "text": "u"}]}})


def samples(pytester: pytest.Pytester, name: str) -> list[dict[str, object]]:
    report = json.loads((pytester.path / name).read_text(encoding="utf-8"))
    result: list[dict[str, object]] = report["data"]["samples"]
    return result


def test_http_pipeline_through_the_plugin(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer
) -> None:
    server.default = rag_service
    pipeline = textwrap.dedent(f"""\
        [pipeline]
        name = "http"
        url = "{server.url}/rag"
        body = {{ query = "{{question}}", id = "{{qid}}" }}
        answer_path = "data.answer"
        ids_path = "data.refs[*].pid"
        retry_backoff = 0
        """)
    make_project("\n[run]\ncache = true\n", conftest=None, pipeline=pipeline)
    first = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "a.json")
    assert first.ret == pytest.ExitCode.OK, first.stdout.str()[-2000:]
    rows = samples(pytester, "a.json")
    assert len(rows) == 5 and all(row["error"] is None for row in rows)
    assert {row["generated_text"] for row in rows} == {f"answer to {q}" for q in range(1, 6)}
    assert all(row["retrieval_ids"][1] == 6 for row in rows)  # type: ignore[index]
    # The preflight asks the first question once before the run, then all five run.
    assert len(server.seen) == 6
    assert [seen.body["id"] for seen in server.seen[:1]] == [1]
    second = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "b.json")
    second.stdout.fnmatch_lines(["*answer cache 5 hits / 0 misses*"])
    # Every answer came from the cache; no preflight either: the first answer is cached.
    assert len(server.seen) == 6
    assert samples(pytester, "b.json") == rows


def test_http_service_down_fails_the_items(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer
) -> None:
    server.default = lambda seen: Reply(503, {"error": {"message": "overloaded"}})
    pipeline = (f'[pipeline]\nname = "http"\nurl = "{server.url}/rag"\nmax_retries = 1\n'
                "retry_backoff = 0\n")
    make_project(conftest=None, pipeline=pipeline)
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret != pytest.ExitCode.OK
    assert "failed after 2 attempt(s), last: HTTP 503: overloaded" in result.stdout.str()


def test_unknown_http_key_is_a_usage_error(pytester: pytest.Pytester,
                                           make_project: Project) -> None:
    make_project(conftest=None,
                 pipeline='[pipeline]\nname = "http"\nurl = "http://127.0.0.1:9/x"\nanswerpath = 1\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *unknown key [[]pipeline[]] 'answerpath'*answer_path*"])


def test_module_callable_through_the_plugin(pytester: pytest.Pytester,
                                            make_project: Project) -> None:
    module = f"ragev_e2e_pipes_{pytester.path.name.replace('-', '_')}"
    pytester.makepyfile(**{module: """
        from pytest_ragev import Answer

        class Oracle:
            def __init__(self, settings):
                self.lead = settings.options["lead"]

            def answer(self, case):
                return Answer(retrieved=[self.lead, *case.pids], text=case.answer or "")

        def build(settings):
            return Oracle(settings)
        """})
    make_project(conftest=None, pipeline=f'[pipeline]\nname = "{module}:build"\nlead = 7\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    rows = samples(pytester, "r.json")
    assert len(rows) == 5
    assert all(row["retrieval_ids"][0] == 7 for row in rows)  # type: ignore[index]


def chat_reply(seen: Seen) -> Reply:
    if seen.method == "GET":
        return Reply(200, {"data": [{"id": "local-llm"}]})
    question = seen.body["messages"][-1]["content"]
    # Token counts that depend on the question, so the totals are not one number x 5.
    prompt = len(question)
    return Reply(200, {"choices": [{"message": {"content": "Die Antwort steht im Kontext."}}],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": 7,
                                 "total_tokens": prompt + 7}})


def test_the_chat_models_token_counts_reach_the_summary(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer
) -> None:
    server.default = chat_reply
    pipeline = textwrap.dedent(f"""\
        [pipeline]
        name = "builtin"

        [pipeline.chat]
        model = "local-llm"
        base_url = "{server.url}/v1"
        retry_backoff = 0
        """)
    make_project(conftest=None, pipeline=pipeline)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    posts = [seen for seen in server.seen if seen.method == "POST"]
    assert len(posts) == 5
    prompt = sum(len(seen.body["messages"][-1]["content"]) for seen in posts)
    result.stdout.fnmatch_lines([
        f"  latency p50 * s, p95 * s (5 answers); tokens {prompt} prompt + 35 completion = "
        f"{prompt + 35} (5 answers)"])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert report["usage"]["tokens"] == {"prompt": prompt, "completion": 35,
                                         "total": prompt + 35, "n": 5}


def test_an_http_service_reports_tokens_through_usage_path(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer
) -> None:
    server.default = lambda seen: Reply(200, {
        "answer": f"Antwort {seen.body['id']}",
        "meta": {"usage": {"prompt_tokens": 100 + int(seen.body["id"]),
                           "completion_tokens": 9}}})
    pipeline = textwrap.dedent(f"""\
        [pipeline]
        name = "http"
        url = "{server.url}/rag"
        body = {{ query = "{{question}}", id = "{{qid}}" }}
        usage_path = "meta.usage"
        retry_backoff = 0
        """)
    make_project(conftest=None, pipeline=pipeline)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*; tokens 515 prompt + 45 completion = 560 (5 answers)"])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert report["usage"]["tokens"] == {"prompt": 515, "completion": 45, "total": 560, "n": 5}
    assert report["params"]["pipeline"]["usage_path"] == "meta.usage"

    # A path that gives no object is that question's error, named with the path.
    server.default = lambda seen: Reply(200, {"answer": "a", "meta": {"usage": 12}})
    broken = pytester.runpytest("--ragev-config", "ragev.toml")
    assert broken.ret == pytest.ExitCode.TESTS_FAILED
    broken.stdout.fnmatch_lines(["*usage_path = 'meta.usage' gave int 12, not an object*"])
