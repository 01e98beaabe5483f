"""End to end: the ``conftest.py`` beside a ragev config in a subfolder counts from the start.

``pytest --ragev-config eval/ragev.toml`` from the project root: pytest itself loads only
the root's conftests before session start, and the xdist controller never collects
``eval/``. The plugin loads ``eval/conftest.py`` early, so its pipeline, its custom
metrics and thresholds on them work, serial and under ``-n 2``.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset
from tests._pytester import read_json

EVAL_CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer, CustomMetric

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return {"size": len(corpus)}

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return Answer(retrieved=list(case.pids), text=settings.options["prefix"] + (case.answer or ""))

    @pytest.hookimpl
    def pytest_ragev_metrics():
        return [CustomMetric("has_prefix", lambda m: float(m.generated_text.startswith(">> ")))]
    """
)

CONFIG = textwrap.dedent(
    """\
    [dataset]
    path = "data"
    id = "mini"

    [pipeline]
    name = "my-team-pipeline"
    prefix = ">> "

    [thresholds]
    has_prefix = 0.9
    recall = 0.5
    """
)


def make_eval_folder(pytester: pytest.Pytester, mini_data: dict[str, Any],
                     *, conftest: str = EVAL_CONFTEST, config: str = CONFIG) -> None:
    eval_dir = pytester.mkdir("eval")
    write_dataset(eval_dir / "data", **mini_data)
    (eval_dir / "ragev.toml").write_text(config, encoding="utf-8")
    (eval_dir / "conftest.py").write_text(conftest, encoding="utf-8")
    pytester.makeini("[pytest]\n")  # the rootdir is the project root, not eval/


def test_subfolder_conftest_serves_pipeline_and_metrics(
    pytester: pytest.Pytester, mini_data: dict[str, Any]
) -> None:
    make_eval_folder(pytester, mini_data)
    result = pytester.runpytest("--ragev-config", "eval/ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:] + result.stderr.str()
    result.assert_outcomes(passed=6)
    data = read_json(pytester.path / "r.json")["data"]
    assert data["params"]["pipeline"]["name"] == "my-team-pipeline"
    assert {s["generated_text"][:3] for s in data["samples"]} == {">> "}
    assert all(s["metrics"]["has_prefix"] == 1.0 for s in data["samples"])
    assert data["verdict"]["passed"] is True


def test_subfolder_conftest_threshold_on_a_custom_metric_can_fail(
    pytester: pytest.Pytester, mini_data: dict[str, Any]
) -> None:
    make_eval_folder(pytester, mini_data, config=CONFIG.replace('prefix = ">> "', 'prefix = ""'))
    result = pytester.runpytest("--ragev-config", "eval/ragev.toml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*ragev: has_prefix 0.000 < threshold 0.900 (n=5)*"])


@pytest.mark.slow
def test_subfolder_conftest_under_xdist(
    pytester: pytest.Pytester, mini_data: dict[str, Any]
) -> None:
    make_eval_folder(pytester, mini_data)
    serial = pytester.runpytest_subprocess(
        "--ragev-config", "eval/ragev.toml", "--ragev-report", "serial.json", "-p", "no:xdist"
    )
    assert serial.ret == pytest.ExitCode.OK, serial.stdout.str()[-3000:] + serial.stderr.str()
    parallel = pytester.runpytest_subprocess(
        "--ragev-config", "eval/ragev.toml", "--ragev-report", "xdist.json", "-n", "2"
    )
    assert parallel.ret == pytest.ExitCode.OK, (
        parallel.stdout.str()[-3000:] + parallel.stderr.str()
    )
    parallel.assert_outcomes(passed=6)
    xdist = read_json(pytester.path / "xdist.json")["data"]
    serial = read_json(pytester.path / "serial.json")["data"]
    assert xdist["samples"] == serial["samples"]
    assert xdist["metric"] == serial["metric"]


def test_ini_twin_config_in_a_subfolder_loads_its_conftest(
    pytester: pytest.Pytester, mini_data: dict[str, Any]
) -> None:
    make_eval_folder(pytester, mini_data)
    pytester.makeini("[pytest]\nragev_config = eval/ragev.toml\n")
    # No paths: pytest collects the root, reaching eval/ (and its conftest) only after
    # session start, where the thresholds are checked.
    result = pytester.runpytest("--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:] + result.stderr.str()
    result.assert_outcomes(passed=6)
    assert read_json(pytester.path / "r.json")["data"]["verdict"]["passed"] is True


def test_noconftest_is_respected(pytester: pytest.Pytester, mini_data: dict[str, Any]) -> None:
    make_eval_folder(pytester, mini_data)
    result = pytester.runpytest("--ragev-config", "eval/ragev.toml", "--noconftest")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *[[]thresholds[]] 'has_prefix' is not a metric*"])


def test_missing_ini_twin_config_names_the_ini_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nragev_config = eval/absent.toml\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: *tox.ini: ragev_config = 'eval/absent.toml': ragev config file not found*"
        "fix the ragev_config key in tox.ini"
    ])
    assert "--ragev-config" not in result.stderr.str()
