"""End to end: a canary secret never reaches any output, with and without ``pytest -l``.

Three ways a secret gets near a run: written literally into ``[pipeline]`` (a user's
conftest pipeline), read from the environment variable ``api_key_env`` names (the chat
client of the built-in pipeline), and expanded from ``${VAR}`` into an HTTP header (the
``http`` pipeline). Each run has failing items, and every output is searched: terminal
(stdout and stderr), JSON, JUnit, Markdown, HTML and the baseline file.
"""

from __future__ import annotations

import base64
import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._remote_server import Reply, ScriptedServer, Seen

Project = Callable[..., Path]

CANARY = "sk-canary-SECRET42"
OUTPUTS = ("r.json", "j.xml", "m.md", "h.html", "b.json")


def run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--ragev-config", "ragev.toml", "--ragev-report", "r.json", "--junitxml", "j.xml",
        "--ragev-markdown", "m.md", "--ragev-html", "h.html", "--ragev-baseline", "b.json",
        "--ragev-update-baseline", "--ragev-concurrency", "1", *extra,
    )


def assert_no_canary(pytester: pytest.Pytester, result: pytest.RunResult, *canaries: str) -> str:
    """Search every output for every canary (and its tail); return the terminal output."""
    terminal = result.stdout.str() + result.stderr.str()
    texts = {"terminal": terminal}
    for name in OUTPUTS:
        path = pytester.path / name
        assert path.is_file(), f"{name} was not written:\n{terminal[-2000:]}"
        texts[name] = path.read_text(encoding="utf-8")
    for where, text in texts.items():
        for canary in canaries:
            # The tail too: pytest -l abbreviates long reprs as "...ry-SECRET42'".
            assert canary not in text and canary[-8:] not in text, f"{canary!r} in {where}"
    return terminal


def params(pytester: pytest.Pytester) -> dict[str, object]:
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    found: dict[str, object] = report["data"]["params"]["pipeline"]
    return found


USER_PIPELINE = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        if case.qid % 2:
            raise RuntimeError(f"user pipeline broke on question {case.qid}")
        return Answer(retrieved=list(case.pids), text=case.answer or "")
    """
)


@pytest.mark.parametrize("showlocals", [False, True], ids=["plain", "showlocals"])
def test_literal_secret_in_the_pipeline_table(
    pytester: pytest.Pytester, make_project: Project, showlocals: bool
) -> None:
    make_project(
        conftest=USER_PIPELINE,
        pipeline=textwrap.dedent(f"""\
            [pipeline]
            name = "mine"
            api_key = "{CANARY}"
            max_tokens = 321
            nested = {{ private_key = "{CANARY}-2", passphrase = "{CANARY}-3" }}
            """),
    )
    result = run(pytester, *(["-l"] if showlocals else []))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, failed=4)
    terminal = assert_no_canary(pytester, result, CANARY)
    # A user's exception keeps its traceback (and, with -l, the locals: redacted settings).
    assert 'raise RuntimeError(f"user pipeline broke on question {case.qid}")' in terminal
    if showlocals:
        assert "settings   = PipelineSettings(name='mine', options={'api_key': '***'" in terminal
    assert params(pytester)["max_tokens"] == 321
    assert params(pytester)["nested"] == {"private_key": "***", "passphrase": "***"}


def test_api_key_env_secret_of_the_chat_client(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGEV_CANARY_KEY", CANARY)

    def chat(seen: Seen) -> Reply:
        key = seen.headers.get("Authorization", "")
        if "1889" in json.dumps(seen.body):  # one question works, the others are refused
            return Reply(200, {"choices": [{"message": {"content": "In 1889."}}]})
        # A server that echoes the key back, as OpenAI's 401 does.
        return Reply(401, {"error": {"message": f"Incorrect API key provided: {key}"}})

    server.default = chat
    # The per-question path: the preflight would stop the run before any question.
    make_project(
        "[run]\npreflight = false\n",
        conftest=None,
        pipeline=textwrap.dedent(f"""\
            [pipeline]
            name = "builtin"
            chunk_size = 200
            chunk_overlap = 0

            [pipeline.chat]
            model = "local-llm"
            base_url = "{server.url}/v1"
            api_key_env = "RAGEV_CANARY_KEY"
            max_tokens = 64
            max_retries = 0
            """),
    )
    for extra in ([], ["-l"]):
        result = run(pytester, *extra)
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
        terminal = assert_no_canary(pytester, result, CANARY)
        assert server.seen and server.seen[-1].headers["Authorization"] == f"Bearer {CANARY}"
        # Our own errors are one line: no traceback, so no frame locals under -l.
        result.stdout.fnmatch_lines(["*q*: pipeline raised PipelineError: *HTTP 401*"])
        assert "_retry.py" not in terminal and "Traceback" not in terminal
        chat_params = params(pytester)["chat"]
        assert isinstance(chat_params, dict)
        assert chat_params["api_key_env"] == "RAGEV_CANARY_KEY"
        assert chat_params["max_tokens"] == 64


def test_header_secret_expanded_from_the_environment(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_TOKEN", CANARY)

    def service(seen: Seen) -> Reply:
        qid = seen.body["id"]
        if qid == 2:
            return Reply(200, {"answer": "330 metres", "ids": [2]})
        # Echo the header back in the error, as a misconfigured proxy might.
        return Reply(403, {"error": {"message": f"bad credentials {seen.headers['Authorization']}"}})

    server.default = service
    # The per-question path: the preflight would stop the run before any question.
    make_project(
        "[run]\npreflight = false\n",
        conftest=None,
        pipeline=textwrap.dedent(f"""\
            [pipeline]
            name = "http"
            url = "{server.url}/rag"
            headers = {{ Authorization = "Bearer ${{RAG_TOKEN}}", X-Api-Key = "${{RAG_TOKEN}}" }}
            body = {{ query = "{{question}}", id = "{{qid}}" }}
            answer_path = "answer"
            ids_path = "ids"
            max_retries = 0
            """),
    )
    for extra in ([], ["-l"]):
        result = run(pytester, *extra)
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
        result.assert_outcomes(passed=1, failed=5)
        terminal = assert_no_canary(pytester, result, CANARY)
        assert "Traceback" not in terminal and "_retry.py" not in terminal
        # The templates hold no secret: recorded as written (docs/remote.md).
        assert params(pytester)["headers"] == {
            "Authorization": "Bearer ${RAG_TOKEN}", "X-Api-Key": "${RAG_TOKEN}"
        }


WRAPPING_CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer
    from pytest_ragev.pipelines.remote import ChatClient, ChatConfig

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return ChatClient(ChatConfig.from_table(settings.options["chat"], source="conftest"))

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        try:
            result = kb.complete(case.question, list(case.passages))
        except Exception as error:
            raise RuntimeError("my wrapper failed") from error
        return Answer(retrieved=list(case.pids), text=result.text)
    """
)


def test_user_exception_wrapping_a_chat_error_hides_our_frames(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGEV_CANARY_KEY", CANARY)
    server.default = lambda seen: Reply(
        401, {"error": {"message": f"Incorrect API key provided: {seen.headers['Authorization']}"}}
    )
    make_project(
        conftest=WRAPPING_CONFTEST,
        pipeline=textwrap.dedent(f"""\
            [pipeline]
            name = "wrapped"
            chat = {{ model = "m", base_url = "{server.url}/v1", api_key_env = "RAGEV_CANARY_KEY", max_retries = 0 }}
            """),
    )
    result = run(pytester, "-l")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=6)
    terminal = assert_no_canary(pytester, result, CANARY)
    # The user's part keeps its traceback; our chained error is its one line.
    assert 'raise RuntimeError("my wrapper failed") from error' in terminal
    result.stdout.fnmatch_lines(["*PipelineError: *HTTP 401*Incorrect API key provided: ****"])
    assert "_retry.py" not in terminal and "chat.py" not in terminal


def test_max_tokens_is_a_knob_not_a_secret(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        conftest=None,
        pipeline=textwrap.dedent("""\
            [pipeline]
            name = "builtin"
            chat = { model = "extractive", max_tokens = 96 }

            [[variants]]
            name = "short"
            pipeline.chat.max_tokens = 8
            """),
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    # The variants table named no change while max_tokens was hidden as "***".
    result.stdout.fnmatch_lines(["*short changes: pipeline.chat.max_tokens*"])
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["data"]
    assert data["params"]["pipeline"]["chat"]["max_tokens"] == 96
    assert data["variants"]["short"]["params"]["pipeline"]["chat"]["max_tokens"] == 8


def test_keys_echoed_in_200_replies_and_a_url_password(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A service that answers 200 but quotes the key: in a key list, a wrong-typed answer,
    a malformed id, the answer text; and a password written into the URL."""
    monkeypatch.setenv("RAG_TOKEN", CANARY)
    password = "pw-canary-URLPASS77"

    def service(seen: Seen) -> Reply:
        token = seen.headers["X-Token"]
        replies = {
            1: {"answer": "Der Eiffelturm wurde 1889 fertiggestellt.", "ids": [1]},
            2: {"result": "no answer", token: "echo"},  # answer_path misses: key list
            3: {"answer": {"debug": f"token={token}"}, "ids": [3]},  # not a string
            4: {"answer": "Guido van Rossum", "ids": [f"doc-{token}"]},  # malformed id
            5: {"answer": f"Die Mauer ist lang. ({token})", "ids": [5]},  # in the answer
        }
        return Reply(200, replies[seen.body["id"]])

    server.default = service
    url = server.url.replace("http://", f"http://ragev:{password}@")
    make_project(
        conftest=None,
        pipeline=textwrap.dedent(f"""\
            [pipeline]
            name = "http"
            url = "{url}/rag"
            headers = {{ X-Token = "${{RAG_TOKEN}}" }}
            body = {{ query = "{{question}}", id = "{{qid}}" }}
            answer_path = "answer"
            ids_path = "ids"
            max_retries = 0
            """),
    )
    basic = base64.b64encode(f"ragev:{password}".encode()).decode()
    for extra in ([], ["-l"]):
        result = run(pytester, *extra)
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
        result.assert_outcomes(passed=2, failed=4)
        terminal = assert_no_canary(pytester, result, CANARY, password, basic)
        result.stdout.fnmatch_lines([
            "*q2*top-level keys: ***, result*",
            "*q3*gave dict {\"debug\": \"token=***\"}, not a string*",
            "*q4*gave 'doc-***', not a passage id*",
        ])
        assert "Traceback" not in terminal
        assert params(pytester)["url"] == server.url.replace("http://", "http://ragev:***@") + "/rag"
        samples = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
        texts = {row["qid"]: row["generated_text"] for row in samples["data"]["samples"]}
        assert texts[5] == "Die Mauer ist lang. (***)"
    assert {seen.headers["Authorization"] for seen in server.seen} == {f"Basic {basic}"}
