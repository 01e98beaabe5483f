"""End to end: a remote pipeline is checked before its first question (environment,
one preflight request), stops after consecutive transport failures, and runs calls
concurrently by default."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._remote_server import Reply, ScriptedServer, Seen, closed_url

Project = Callable[..., Path]
CANARY = "sk-e2e-preflight-0c9d-never-print"


def http_pipeline(url: str, extra: str = "") -> str:
    return textwrap.dedent(f"""\
        [pipeline]
        name = "http"
        url = "{url}"
        body = {{ query = "{{question}}", id = "{{qid}}" }}
        answer_path = "answer"
        retry_backoff = 0
        """) + extra


def chat_pipeline(base_url: str, extra: str = "") -> str:
    return textwrap.dedent(f"""\
        [pipeline]
        name = "builtin"

        [pipeline.chat]
        model = "local-llm"
        base_url = "{base_url}"
        retry_backoff = 0
        """) + extra


def answers(seen: Seen) -> Reply:
    return Reply(200, {"answer": f"réponse {seen.body['id']}"})


def test_an_unset_api_key_stops_the_run_before_any_request(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAGEV_E2E_NO_KEY", raising=False)
    make_project(conftest=None, pipeline=chat_pipeline(
        server.url + "/v1", 'api_key_env = "RAGEV_E2E_NO_KEY"\n'))
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: *ragev.toml: [[]pipeline.chat[]] api_key_env = 'RAGEV_E2E_NO_KEY': the "
        "environment variable RAGEV_E2E_NO_KEY is not set; export RAGEV_E2E_NO_KEY=*"])
    assert server.seen == []


def test_every_unset_header_variable_is_named_in_one_line(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("RAGEV_E2E_TOKEN", "RAGEV_E2E_TENANT"):
        monkeypatch.delenv(var, raising=False)
    extra = ('headers = { Authorization = "Bearer ${RAGEV_E2E_TOKEN}", '
             'X-Tenant = "${RAGEV_E2E_TENANT}" }\n')
    make_project(conftest=None, pipeline=http_pipeline(server.url + "/rag", extra))
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1
    assert "${RAGEV_E2E_TOKEN}" in errors[0] and "${RAGEV_E2E_TENANT}" in errors[0]
    assert server.seen == []


def test_a_service_nobody_listens_on_stops_the_run_at_once(
    pytester: pytest.Pytester, make_project: Project,
) -> None:
    # Four attempts x five questions before; now one look (and one retry).
    make_project(conftest=None, pipeline=http_pipeline(closed_url() + "/rag", "max_retries = 3\n"))
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: *ragev.toml: [[]pipeline[]] http preflight (qid 1): *failed after 2 attempt(s), "
        "last: cannot connect*; no question was asked (set [[]run[]] preflight = false*"])
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


def test_a_refused_key_stops_the_run_and_stays_secret(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGEV_E2E_KEY", CANARY)
    server.default = lambda seen: Reply(
        401, {"error": {"message": f"Incorrect API key provided: {seen.headers['Authorization']}"}})
    make_project(conftest=None, pipeline=chat_pipeline(
        server.url + "/v1", 'api_key_env = "RAGEV_E2E_KEY"\n'))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *preflight: HTTP 401 from */v1/models: Incorrect API "
                                 "key provided: Bearer ***; check the key in $RAGEV_E2E_KEY*"])
    assert CANARY not in result.stdout.str() + result.stderr.str()
    assert [(seen.method, seen.path) for seen in server.seen] == [("GET", "/v1/models")]
    report = pytester.path / "r.json"
    assert not report.exists() or CANARY not in report.read_text(encoding="utf-8")


def test_a_chat_server_without_a_model_list_runs(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
) -> None:
    def reply(seen: Seen) -> Reply:
        if seen.method == "GET":
            return Reply(404, {"detail": "Not Found"})
        return Reply(200, {"choices": [{"message": {"content": "Gustave Eiffel"}}]})

    server.default = reply
    make_project(conftest=None, pipeline=chat_pipeline(server.url + "/v1"))
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    result.assert_outcomes(passed=6)
    assert (server.seen[0].method, server.seen[0].path) == ("GET", "/v1/models")
    assert sum(seen.method == "POST" for seen in server.seen) == 5


@pytest.mark.parametrize("kind", ["chat", "http"])
def test_a_redirect_to_another_origin_stops_the_run_at_the_preflight(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch, kind: str,
) -> None:
    """The chat preflight took the redirect for "the server is there", so each question
    then failed on its own; the http preflight stopped the run. Both stop it now."""
    other = ScriptedServer()
    try:
        other.default = lambda seen: Reply(200, {"answer": "umgeleitet"})
        server.default = lambda seen: Reply(302, {}, {"Location": f"{other.url}/neu"})
        monkeypatch.setenv("RAGEV_E2E_KEY", CANARY)
        pipeline = (chat_pipeline(server.url + "/v1", 'api_key_env = "RAGEV_E2E_KEY"\n')
                    if kind == "chat" else http_pipeline(
                        server.url + "/rag",
                        'headers = { Authorization = "Bearer ${RAGEV_E2E_KEY}" }\n'))
        make_project(conftest=None, pipeline=pipeline)
        result = pytester.runpytest("--ragev-config", "ragev.toml")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
        result.stderr.fnmatch_lines([
            f"ERROR: *preflight*: {server.url}/* answered HTTP 302, a redirect to "
            f"{other.url}/neu, another origin; not followed*; no question was asked*"])
        assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()
        assert len(server.seen) == 1 and other.seen == []  # one look, and no key went there
        assert CANARY not in result.stdout.str() + result.stderr.str()
    finally:
        other.close()


def test_preflight_false_lets_the_questions_fail_on_their_own(
    pytester: pytest.Pytester, make_project: Project,
) -> None:
    make_project("[run]\npreflight = false\n", conftest=None,
                 pipeline=http_pipeline(closed_url() + "/rag", "max_retries = 0\n"))
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=6)


def test_a_cached_rerun_needs_no_preflight(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
) -> None:
    server.default = answers
    make_project("[run]\ncache = true\n", conftest=None, pipeline=http_pipeline(server.url))
    pytester.runpytest("--ragev-config", "ragev.toml").assert_outcomes(passed=6)
    assert len(server.seen) == 6  # the preflight, then five questions
    server.close()  # the service is gone: every answer is in the cache
    again = pytester.runpytest("--ragev-config", "ragev.toml")
    again.assert_outcomes(passed=6)
    again.stdout.fnmatch_lines(["*answer cache 5 hits / 0 misses*"])


def test_consecutive_failures_stop_the_run_with_the_reason(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
) -> None:
    server.default = lambda seen: Reply(503, {"error": {"message": "überlastet"}})
    make_project(conftest=None, pipeline=http_pipeline(
        server.url + "/rag", "max_retries = 0\nmax_consecutive_failures = 2\n"))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-concurrency", "1",
                                "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=6)
    # A busy service passes the preflight (one request); two questions reach it; the
    # other three fail at once, saying why.
    assert len(server.seen) == 3
    result.stdout.fnmatch_lines([
        "*q3*not sent: */rag failed for 2 questions in a row (last: HTTP 503: überlastet)*"
        "max_consecutive_failures*"])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    errors = [sample["error"] or "" for sample in report["data"]["samples"]]
    assert [("not sent" in error) for error in errors] == [False, False, True, True, True]


class InFlight:
    """Wraps a reply function: each call takes 0.3 s, and ``most`` counts how many were
    in flight at once."""

    def __init__(self, reply: Callable[[Seen], Reply]) -> None:
        self._reply = reply
        self._lock = threading.Lock()
        self._now = 0
        self.most = 0

    def __call__(self, seen: Seen) -> Reply:
        with self._lock:
            self._now += 1
            self.most = max(self.most, self._now)
        time.sleep(0.3)
        with self._lock:
            self._now -= 1
        return self._reply(seen)


def test_io_bound_pipelines_run_eight_calls_at_once_by_default(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # a 2-core runner: one thread for CPU work
    slow = server.default = InFlight(answers)
    make_project("[run]\npreflight = false\n", conftest=None,
                 pipeline=http_pipeline(server.url))
    pytester.runpytest("--ragev-config", "ragev.toml").assert_outcomes(passed=6)
    assert slow.most == 5  # all five questions at once (the default is 8)
    slow.most = 0
    pytester.runpytest("--ragev-config", "ragev.toml",
                       "--ragev-concurrency", "2").assert_outcomes(passed=6)
    assert slow.most == 2  # the option still decides


#: A factory pipeline that asks the scripted server for each answer.
REMOTE_FACTORY = """
    import json
    import urllib.request

    from pytest_ragev import Answer

    class Remote:
        def __init__(self, settings):
            self.url = settings.options["url"]

        def answer(self, case):
            body = json.dumps({"id": case.qid}).encode()
            request = urllib.request.Request(self.url, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as reply:
                return Answer(retrieved=list(case.pids), text=json.load(reply)["answer"])

    def build(settings):
        return Remote(settings)
    """


@pytest.mark.parametrize("kind", ["chat", "factory"])
def test_chat_and_factory_pipelines_run_eight_calls_at_once_by_default(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch, kind: str,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # a 2-core runner: one thread for CPU work
    answer = InFlight(lambda seen: Reply(
        200, {"answer": "Antwort", "choices": [{"message": {"content": "Antwort"}}]}))

    def reply(seen: Seen) -> Reply:
        if seen.method == "GET":  # the chat model's preflight
            return Reply(200, {"data": []})
        return answer(seen)

    server.default = reply
    if kind == "chat":
        pipeline = chat_pipeline(server.url + "/v1")
    else:
        module = f"ragev_e2e_slow_{pytester.path.name.replace('-', '_')}"
        pytester.makepyfile(**{module: REMOTE_FACTORY})
        pipeline = f'[pipeline]\nname = "{module}:build"\nurl = "{server.url}/rag"\n'
    make_project(conftest=None, pipeline=pipeline)
    pytester.runpytest("--ragev-config", "ragev.toml").assert_outcomes(passed=6)
    assert answer.most == 5  # all five questions at once (the default is 8, not CPUs - 1)
