"""The answer cache never serves stale answers: it knows the project code that answered."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._remote_server import Reply, ScriptedServer, Seen

Project = Callable[..., Path]

#: A conftest pipeline whose answers come from a project module, ``helpers.py``.
CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        from helpers import phrase  # imported when called: the key must still see it

        return Answer(retrieved=list(case.pids), text=phrase(case.answer or ""))
    """
)


def cache_line(result: pytest.RunResult) -> str:
    return next((line for line in result.stdout.lines if "answer cache" in line), "")


def test_editing_a_module_the_conftest_imports_misses_the_cache(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[run]\ncache = true\n", conftest=CONFTEST)
    helpers = pytester.path / "helpers.py"
    helpers.write_text("def phrase(text):\n    return text\n", encoding="utf-8")
    first = pytester.runpytest("--ragev-config", "ragev.toml")
    assert "0 hits / 5 misses" in cache_line(first)
    again = pytester.runpytest("--ragev-config", "ragev.toml")
    assert "5 hits / 0 misses" in cache_line(again)
    # A new answer phrasing: the cached answers of the old code must not be served.
    helpers.write_text("def phrase(text):\n    return 'Antwort: ' + text\n", encoding="utf-8")
    edited = pytester.runpytest("--ragev-config", "ragev.toml", "-p", "no:randomly")
    assert "0 hits / 5 misses" in cache_line(edited)


def test_editing_the_conftest_itself_misses_the_cache(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[run]\ncache = true\n", conftest=CONFTEST)
    (pytester.path / "helpers.py").write_text("def phrase(text):\n    return text\n",
                                              encoding="utf-8")
    pytester.runpytest("--ragev-config", "ragev.toml")
    pytester.makeconftest(CONFTEST + "\n# 重新措辞\n")
    edited = pytester.runpytest("--ragev-config", "ragev.toml")
    assert "0 hits / 5 misses" in cache_line(edited)


@pytest.mark.slow
def test_a_factory_pipelines_module_is_part_of_the_key(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    factory = pytester.path / "my_pipeline.py"
    factory.write_text(textwrap.dedent(
        """
        from pytest_ragev import Answer
        from wording import phrase

        class Pipeline:
            def answer(self, case):
                return Answer(retrieved=list(case.pids), text=phrase(case.answer or ""))

        def build(settings):
            return Pipeline()
        """
    ), encoding="utf-8")
    wording = pytester.path / "wording.py"
    wording.write_text("def phrase(text):\n    return text\n", encoding="utf-8")
    make_project("[run]\ncache = true\n", conftest=None,
                 pipeline='[pipeline]\nname = "my_pipeline:build"\n')
    pytester.runpytest_subprocess("--ragev-config", "ragev.toml")
    again = pytester.runpytest_subprocess("--ragev-config", "ragev.toml")
    assert "5 hits / 0 misses" in cache_line(again)
    wording.write_text("def phrase(text):\n    return text.upper()\n", encoding="utf-8")
    edited = pytester.runpytest_subprocess("--ragev-config", "ragev.toml")
    assert "0 hits / 5 misses" in cache_line(edited)


def chat_reply(seen: Seen) -> Reply:
    return Reply(200, {"choices": [{"message": {"content": "Die Antwort steht im Text."}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


def test_a_remote_chat_model_is_not_cached_unless_asked(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.default = chat_reply
    monkeypatch.setenv("CHAT_KEY", "sk-test")
    chat = textwrap.dedent(f"""\
        [pipeline]
        name = "builtin"

        [pipeline.chat]
        model = "m"
        base_url = "{server.url}/v1"
        api_key_env = "CHAT_KEY"
        """)
    make_project(conftest=None, pipeline=chat)
    first = pytester.runpytest("--ragev-config", "ragev.toml")
    second = pytester.runpytest("--ragev-config", "ragev.toml")
    assert first.ret == second.ret == pytest.ExitCode.OK
    assert cache_line(second) == ""  # nothing cached: the model may change behind its name
    asked = sum(1 for seen in server.seen if seen.path.endswith("/chat/completions"))
    assert asked == 10
    (pytester.path / "ragev.toml").write_text(
        (pytester.path / "ragev.toml").read_text(encoding="utf-8") + "\n[run]\ncache = true\n",
        encoding="utf-8")
    pytester.runpytest("--ragev-config", "ragev.toml")
    cached = pytester.runpytest("--ragev-config", "ragev.toml")
    assert "5 hits / 0 misses" in cache_line(cached)
