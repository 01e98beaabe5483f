"""End to end: reports say which code answered and hold no machine paths or user names;
knobs of the built-in pipeline that its mode never reads are warned about."""

from __future__ import annotations

import getpass
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset
from tests._pytester import read_json

Project = Callable[..., Path]


def test_the_task_id_names_no_user_unless_asked(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGEV_TASK_USER", raising=False)
    config = make_project()
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    task_id = read_json(pytester.path / "r.json")["data"]["task"]["id"]
    assert re.fullmatch(r"evaluation_\d{13}_[0-9a-f]{8}_mini", task_id), task_id

    config.write_text(config.read_text(encoding="utf-8") + "[report]\ntask_user = true\n",
                      encoding="utf-8")
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    user = re.sub(r"[^\w.-]", "-", getpass.getuser())
    task_id = read_json(pytester.path / "r.json")["data"]["task"]["id"]
    assert task_id.startswith(f"evaluation_{user}_")

    monkeypatch.setenv("RAGEV_TASK_USER", "ci-bot")
    pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert re.fullmatch(r"evaluation_ci-bot_\d{13}_[0-9a-f]{8}_mini",
                        read_json(pytester.path / "r.json")["data"]["task"]["id"])


def test_report_paths_are_relative_to_the_rootdir(
    pytester: pytest.Pytester, mini_data: dict[str, Any]
) -> None:
    # The config in a subfolder, pytest run from the project root (the rootdir).
    write_dataset(pytester.path / "eval" / "data", **mini_data)
    (pytester.path / "eval" / "ragev.toml").write_text(
        '[dataset]\npath = "data"\nid = "mini"\n[pipeline]\nname = "oracle"\n'
        '[baseline]\npath = "ragev-baseline.json"\n', encoding="utf-8")
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(textwrap.dedent(
        """
        import pytest
        from pytest_ragev import Answer

        @pytest.hookimpl
        def pytest_ragev_answer(case, kb, settings):
            return Answer(retrieved=list(case.pids), text=case.answer)
        """
    ))
    args = ("--ragev-config", "eval/ragev.toml", "--ragev-report", "r.json",
            "--ragev-markdown", "r.md", "--ragev-html", "r.html", "--junitxml", "j.xml")
    first = pytester.runpytest(*args)
    assert first.ret == pytest.ExitCode.TESTS_FAILED  # the baseline was created
    root = str(pytester.path)
    created = "ragev: baseline not found, created eval/ragev-baseline.json; commit it and rerun"
    assert read_json(pytester.path / "r.json")["data"]["verdict"]["failures"] == [created]
    # The terminal and the verdict's JUnit failure say it as the reports do.
    first.stdout.fnmatch_lines([created])
    junit = (pytester.path / "j.xml").read_text(encoding="utf-8")
    assert "created eval/ragev-baseline.json" in junit
    outputs = {"first run's terminal": ragev_lines(first), "first run's JUnit": junit}
    second = pytester.runpytest(*args)
    assert second.ret == pytest.ExitCode.OK
    data = read_json(pytester.path / "r.json")["data"]
    assert data["baseline"]["path"] == "eval/ragev-baseline.json"
    assert data["params"]["dataset"]["path"] == "data"  # the config folder's, as before
    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "Baseline: `eval/ragev-baseline.json`" in markdown
    for name in ("r.json", "r.md", "r.html", "j.xml"):
        outputs[name] = (pytester.path / name).read_text(encoding="utf-8")
    outputs["terminal"] = ragev_lines(second)

    # A baseline that cannot be used: the "not compared" line names it the same way.
    (pytester.path / "eval" / "ragev-baseline.json").write_text("{", encoding="utf-8")
    broken = pytester.runpytest(*args)
    assert broken.ret == pytest.ExitCode.USAGE_ERROR
    assert "gate not compared: baseline eval/ragev-baseline.json is not valid JSON" in \
        ragev_lines(broken)
    outputs["broken run's terminal"] = ragev_lines(broken)
    outputs["broken run's JUnit"] = (pytester.path / "j.xml").read_text(encoding="utf-8")
    for name, text in outputs.items():
        assert root not in text, f"{name}: {text}"


def ragev_lines(result: pytest.RunResult) -> str:
    """The plugin's own lines of a run's terminal output (pytest prints its rootdir)."""
    return "\n".join(line for line in result.stdout.lines if line.startswith("ragev"))


def test_the_summary_and_reports_name_the_conftest_that_answered(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # No [pipeline] name: "builtin" is configured, but the conftest answers every question.
    make_project(pipeline="[pipeline]\nchunk_size = 128\nmy_knob = 3\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json",
                                "--ragev-markdown", "r.md")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["  pipeline: conftest hooks (conftest.py)"])
    pipeline = read_json(pytester.path / "r.json")["data"]["params"]["pipeline"]
    # The configured name as written; who answered beside it.
    assert pipeline == {"name": "builtin", "chunk_size": 128, "my_knob": 3,
                        "answered_by": "conftest hooks (conftest.py)"}
    assert "pipeline `conftest hooks (conftest.py)`" in (pytester.path / "r.md").read_text(
        encoding="utf-8")
    # The built-in pipeline answered nothing, and the conftest read neither knob.
    assert "has no effect" not in result.stdout.str()
    result.stdout.fnmatch_lines([
        "ragev: warning: ragev.toml: [[]pipeline[]] chunk_size = 128 was never read by "
        "conftest hooks (conftest.py); remove it or read it",
        "ragev: warning: ragev.toml: [[]pipeline[]] my_knob = 3 was never read by "
        "conftest hooks (conftest.py); remove it or read it",
    ])


def test_knobs_the_builtin_pipeline_never_reads_are_warned_about(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        textwrap.dedent(
            """
            [[variants]]
            name = "rerank"
            pipeline.rerank_model = "lexical"

            [[variants]]
            name = "dense"
            pipeline.retrieval = "vector"
            pipeline.embedding_model = "hashing"
            pipeline.bm25_b = 0.5
            """
        ),
        conftest=None,
        pipeline='[pipeline]\nname = "builtin"\nrerank_top_k = 2\nvector_weight = 0.4\n',
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "  pipeline: builtin",
        "ragev: warning: ragev.toml: [[]pipeline[]] rerank_top_k = 2 has no effect: "
        "rerank_model is not set; remove it",
        "ragev: warning: ragev.toml: [[]pipeline[]] vector_weight = 0.4 has no effect: "
        'only retrieval = "hybrid" fuses two rankings; remove it',
        "ragev: warning: ragev.toml: variant 'dense': pipeline.bm25_b = 0.5 has no effect: "
        'retrieval = "vector" ranks no keyword hits; remove it',
    ])
    # Said once: the variants inherit the base's knobs and its line covers them.
    assert result.stdout.str().count("vector_weight = 0.4 has no effect") == 1
    assert len(read_json(pytester.path / "r.json")["data"]["warnings"]) == 3


def test_a_variant_s_inherited_knob_is_not_its_to_remove_and_a_copy_is_named(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        textwrap.dedent(
            """
            [[variants]]
            name = "dense"
            pipeline.retrieval = "vector"
            pipeline.embedding_model = "hashing"

            [[variants]]
            name = "again"
            pipeline.bm25_b = 0.5
            """
        ),
        conftest=None,
        pipeline='[pipeline]\nname = "builtin"\nbm25_b = 0.5\n',
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        "ragev: warning: ragev.toml: variant 'dense': [[]pipeline[]] bm25_b = 0.5, which it "
        "inherits, has no effect in it: * (nothing to remove: the base configuration reads it)",
        "ragev: warning: ragev.toml: variant 'again' is the same as the base configuration "
        "(its pipeline keys change nothing); give it a value that differs, or remove it",
    ])
    assert "bm25_b = 0.5 has no effect" not in result.stdout.str()


#: Reads "quality" for every question, "depth" only in the build of the knowledge base.
READING_CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return {"depth": settings.options.get("depth", 1)}

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        if settings.options["quality"] == "bad":
            return Answer(retrieved=[7], text="Keine Ahnung.")
        return Answer(retrieved=list(case.pids), text=case.answer or "")
    """
)


def unread_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if "was never read by" in line]


def test_knobs_the_conftest_never_reads_are_warned_about_once(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        textwrap.dedent(
            """
            [[variants]]
            name = "schlecht"
            pipeline.quality = "bad"
            pipeline.temperatur = 0.7

            [run]
            cache = true
            """
        ),
        conftest=READING_CONFTEST,
        pipeline='[pipeline]\nname = "team-rag"\nquality = "good"\ndepth = 2\n'
                 'api_key = "sk-never-print-3f9a"\nmy_knob = 3\n',
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    # quality and depth are read; the rest are named once, the variant's own key apart.
    assert unread_lines(result) == [
        "ragev: warning: ragev.toml: [pipeline] api_key = '***' was never read by "
        "conftest hooks (conftest.py); remove it or read it",
        "ragev: warning: ragev.toml: [pipeline] my_knob = 3 was never read by "
        "conftest hooks (conftest.py); remove it or read it",
        "ragev: warning: ragev.toml: variant 'schlecht': pipeline.temperatur = 0.7 was never "
        "read by conftest hooks (conftest.py); remove it or read it",
    ]
    assert [w for w in read_json(pytester.path / "r.json")["data"]["warnings"]
            if "was never read by" in w] == [line.removeprefix("ragev: warning: ")
                                           for line in unread_lines(result)]
    assert "sk-never-print" not in result.stdout.str()
    # Every answer from the cache: no code ran, nothing to say about what it reads.
    cached = pytester.runpytest("--ragev-config", "ragev.toml")
    cached.stdout.fnmatch_lines(["*answer cache 10 hits / 0 misses*"])
    assert unread_lines(cached) == []


def test_knobs_a_factory_never_reads_are_warned_about(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    module = f"ragev_knobs_{pytester.path.name.replace('-', '_')}"
    pytester.makepyfile(**{module: """
        from pytest_ragev import Answer

        class Lead:
            def __init__(self, settings):
                self.lead = settings.options["lead"]
                self.settings = settings

            def answer(self, case):
                # Read per question, after the factory returned: it counts too.
                extra = self.settings.options.get("extra", [])
                return Answer(retrieved=[self.lead, *extra, *case.pids], text=case.answer or "")

        def build(settings):
            return Lead(settings)
        """})
    make_project(conftest=None, pipeline=f'[pipeline]\nname = "{module}:build"\nlead = 7\n'
                                         'extra = [6]\nmy_knob = 3\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    assert unread_lines(result) == [
        f"ragev: warning: ragev.toml: [pipeline] my_knob = 3 was never read by "
        f"{module}:build; remove it or read it"]


@pytest.mark.slow
def test_knobs_read_on_xdist_workers_count(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=READING_CONFTEST,
                 pipeline='[pipeline]\nname = "team-rag"\nquality = "good"\nmy_knob = 3\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml", "-n", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    # The controller answered nothing itself: what it knows of the reads came from the
    # workers (quality is not named).
    assert unread_lines(result) == [
        "ragev: warning: ragev.toml: [pipeline] my_knob = 3 was never read by "
        "conftest hooks (conftest.py); remove it or read it"]
