"""End to end: the built-in pipeline with the team's own models behind HTTP
(``[pipeline.embedding]``, ``[pipeline.rerank]``) against a real model server on
127.0.0.1: a hybrid run, a rerun that sends no embedding request, a variant that swaps
the embedding model and embeds only for itself, an outage as one line, and a key that
never reaches a report or the baseline."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._remote_server import ModelServer, Reply, ScriptedServer, closed_url

#: Each test runs the plugin against the model server several times (seconds each).
pytestmark = pytest.mark.slow

Project = Callable[..., Path]
CANARY = "sk-e2e-models-61fa-never-print"


def models(base_url: str, *, model: str = "emb-a", extra: str = "") -> str:
    return textwrap.dedent(f"""\
        [pipeline]
        name = "builtin"
        retrieval = "hybrid"
        rerank_top_k = 5

        [pipeline.embedding]
        base_url = "{base_url}/v1"
        model = "{model}"
        api_key_env = "RAGEV_E2E_MODEL_KEY"
        batch_size = 2
        retry_backoff = 0

        [pipeline.rerank]
        base_url = "{base_url}/v1"
        model = "rr-1"
        api_key_env = "RAGEV_E2E_MODEL_KEY"
        retry_backoff = 0
        """) + extra


def embedded_by(server: ScriptedServer, model: str, since: int = 0) -> int:
    return sum(1 for seen in server.seen[since:] if seen.path.endswith("/embeddings")
               and isinstance(seen.body, dict) and seen.body.get("model") == model)


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGEV_E2E_MODEL_KEY", CANARY)


def test_a_hybrid_run_then_a_rerun_without_embedding_requests(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
) -> None:
    model = ModelServer(server)
    make_project("[baseline]\npath = \"ragev-baseline.json\"\n", conftest=None,
                 pipeline=models(server.url))
    first = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                               "--ragev-update-baseline")
    assert first.ret == 0, first.stdout.str()[-3000:]
    first.assert_outcomes(passed=6)
    corpus_requests = model.count("embeddings")
    assert corpus_requests > 0 and model.count("rerank") > 0
    assert all(seen.headers.get("Authorization") == f"Bearer {CANARY}"
               for seen in server.seen if seen.method == "POST")
    report = (pytester.path / "r.json").read_text(encoding="utf-8")
    baseline = (pytester.path / "ragev-baseline.json").read_text(encoding="utf-8")
    output = first.stdout.str() + first.stderr.str()
    for text in (report, baseline, output):
        assert CANARY not in text
    params = json.loads(report)["data"]["params"]["pipeline"]
    assert params["embedding"]["model"] == "emb-a"
    assert params["embedding"]["api_key_env"] == "RAGEV_E2E_MODEL_KEY"
    assert params["rerank"]["model"] == "rr-1" and params["analyzer"] == "auto"

    before = len(server.seen)
    again = pytester.runpytest("--ragev-config", "ragev.toml")
    assert again.ret == 0, again.stdout.str()[-3000:]
    again.assert_outcomes(passed=6)
    assert embedded_by(server, "emb-a", before) == 0  # the KB and the answers are cached


def test_a_variant_that_swaps_the_embedding_model_embeds_only_for_itself(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
) -> None:
    ModelServer(server)
    make_project(conftest=None, pipeline=models(server.url))
    assert pytester.runpytest("--ragev-config", "ragev.toml").ret == 0
    assert embedded_by(server, "emb-a") > 0 and embedded_by(server, "emb-b") == 0
    before = len(server.seen)
    make_project('\n[[variants]]\nname = "emb-b"\npipeline.embedding.model = "emb-b"\n',
                 conftest=None, pipeline=models(server.url))
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.assert_outcomes(passed=11)  # 5 questions per configuration, and the session
    assert embedded_by(server, "emb-a", before) == 0  # the base's vectors come from the cache
    assert embedded_by(server, "emb-b", before) > 0


def test_an_embedding_service_that_is_down_is_one_line(
    pytester: pytest.Pytester, make_project: Project,
) -> None:
    make_project(conftest=None, pipeline=models(closed_url()))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: *ragev.toml: [[]pipeline.embedding[]] model 'emb-a': preflight: "
        "http://127.0.0.1:*/v1/models failed after 2 attempt(s), last: cannot connect*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_an_outage_after_the_preflight_fails_the_run_with_the_reason(
    pytester: pytest.Pytester, make_project: Project, server: ScriptedServer,
) -> None:
    def reply(seen: object) -> Reply:
        if getattr(seen, "method", "") == "GET":
            return Reply(200, {"data": []})
        return Reply(500, {"error": {"message": f"GPU lost, key {CANARY}"}})

    server.default = reply
    make_project(conftest=None, pipeline=models(server.url, extra="max_retries = 1\n"))
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret != 0
    output = result.stdout.str() + result.stderr.str()
    assert "[pipeline.embedding] model 'emb-a'" in output and "HTTP 500: GPU lost, key ***" in output
    assert CANARY not in output
    report = pytester.path / "r.json"
    assert not report.exists() or CANARY not in report.read_text(encoding="utf-8")
