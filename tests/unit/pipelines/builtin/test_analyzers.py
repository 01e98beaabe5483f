"""The BM25 analyzers: plain tokens, Snowball stems and stop words, the language per text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import Stemmer

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.types import PipelineSettings, QAPair
from pytest_ragev.pipelines import build_pipeline
from pytest_ragev.pipelines.builtin.analyzers import (
    MIN_STOP_HITS,
    Analyzer,
    corpus_language,
    detect_language,
    resolve_language,
)
from pytest_ragev.pipelines.builtin.config import unread_knobs
from pytest_ragev.pipelines.builtin.stopwords import STOPWORDS
from pytest_ragev.pipelines.builtin.tokens import bm25_tokens


def pipeline(**options: Any) -> Any:
    return build_pipeline(PipelineSettings(name="builtin", options=options, base_dir=Path.cwd()),
                          source="ragev.toml")


def case(question: str) -> QAPair:
    return QAPair(qid=1, question=question, pids=(), passages=(), aid=None, answer=None)


def test_plain_is_the_retrieval_tokens() -> None:
    text = "The packages were installed; 软件包已经安装。"
    assert Analyzer("plain").tokens(text) == bm25_tokens(text)


@pytest.mark.parametrize(
    ("language", "text", "terms"),
    [
        ("en", "How are the packages installed?", ["packag", "instal"]),
        ("de", "Die Pakete wurden über das Netz installiert.", ["pak", "wurd", "netz", "installiert"]),
        ("ru", "Как установить пакеты из сети?", ["установ", "пакет", "сет"]),
        # Han words pass unchanged; the Latin word is stemmed in the language set.
        ("en", "如何安装 packages 软件", ["如何", "安装", "packag", "软件"]),
    ],
)
def test_snowball_drops_stop_words_and_stems(language: str, text: str, terms: list[str]) -> None:
    assert Analyzer("snowball", language).tokens(text) == terms


def test_snowball_agrees_with_pystemmer_and_the_snowball_stop_list() -> None:
    text = "Which mirrors are the fastest for downloading the installation images?"
    stemmer = Stemmer.Stemmer("english")
    expected = stemmer.stemWords([t for t in bm25_tokens(text) if t not in STOPWORDS["english"]])
    assert Analyzer("snowball", "english").tokens(text) == expected


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("What is the best way to install the packages?", "english"),
        ("Wie kann ich die Pakete auf dem Rechner installieren?", "german"),
        ("Как мне установить эти пакеты на компьютер?", "russian"),
        ("Comment est-ce que je peux installer les paquets sur le serveur ?", "french"),
        ("如何在服务器上安装软件包？", None),
        ("サーバーにパッケージをインストールする方法は？", None),
        ("서버에 패키지를 설치하는 방법은 무엇입니까?", None),
        ("Maintainers", None),  # a heading: no stop word at all
    ],
)
def test_the_language_is_told_by_stop_words(text: str, language: str | None) -> None:
    assert detect_language(bm25_tokens(text)) == language


def test_one_stop_word_is_not_enough() -> None:
    assert MIN_STOP_HITS == 2
    # A Chinese passage quoting one Italian-looking token is not Italian.
    assert detect_language(bm25_tokens("运行 di 文件")) is None
    assert detect_language(bm25_tokens("运行 di questo 文件")) == "italian"


def test_auto_analyses_each_text_in_its_own_language() -> None:
    auto = Analyzer("auto")
    assert auto.tokens("Wie werden die Pakete installiert?") == \
        Analyzer("snowball", "de").tokens("Wie werden die Pakete installiert?")
    assert auto.tokens("How are the packages installed?") == ["packag", "instal"]
    # No language shown: the corpus's, else the tokens as they are.
    assert auto.tokens("Maintainers") == ["maintainers"]
    assert auto.tokens("Maintainers", "english") == ["maintain"]
    # A language set is the fallback, and wins over the corpus's.
    assert auto.tokens("connections", "english") == ["connect"]
    assert Analyzer("auto", "de").tokens("connections", "english") == ["connection"]
    assert Analyzer("auto").reads_corpus_language and not Analyzer("auto", "de").reads_corpus_language


def test_the_corpus_language_is_the_one_most_chunks_show() -> None:
    chunks = ["Das ist ein Paket für den Server.", "The package is on the server.",
              "Die Pakete sind auf dem Server.", "软件包"]
    assert corpus_language(len(chunks), chunks.__getitem__) == "german"
    assert corpus_language(1, ["软件包在服务器上"].__getitem__) is None
    assert corpus_language(0, [].__getitem__) is None


def test_resolve_language() -> None:
    assert resolve_language("de") == "german" and resolve_language("German") == "german"
    assert resolve_language("zh") is None and resolve_language("klingon") is None


def test_the_analyzer_decides_what_a_question_matches() -> None:
    corpus = {1: "Packages are installed with apt.", 2: "The mirror list is updated daily.",
              3: "Kernel modules load at boot."}
    question = case("How do I install a package?")
    plain = pipeline(analyzer="plain")
    auto = pipeline()
    assert [c.passage_id for c in plain.answer(question, plain.build_knowledge_base(
        corpus, fingerprint="p" * 64)).retrieved] == []  # "install" is not "installed"
    kb = auto.build_knowledge_base(corpus, fingerprint="p" * 64)
    assert kb.language == "english"
    assert [c.passage_id for c in auto.answer(question, kb).retrieved] == [1]


def test_the_analyzer_is_part_of_the_kb_identity_and_the_settings() -> None:
    keys = {pipeline(analyzer=a, **({"language": "en"} if a == "snowball" else {})).kb_key()
            for a in ("plain", "snowball", "auto")}
    keys.add(pipeline(analyzer="auto", language="de").kb_key())
    assert len(keys) == 4
    snapshot = pipeline(analyzer="snowball", language="de").snapshot()
    assert snapshot["analyzer"] == "snowball" and snapshot["language"] == "de"
    assert pipeline().snapshot()["analyzer"] == "auto"
    knobs = pipeline(analyzer="snowball", language="de").config.kb_knobs()
    assert knobs["language"] == "german" and knobs["stemmer"].startswith("PyStemmer==")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"analyzer": "snowbal"}, "analyzer = 'snowbal' is invalid; not a BM25 analyzer; did you mean 'snowball'?"),
        ({"analyzer": "snowball"}, "it stems in one language: set language"),
        ({"language": "zh"}, "language = 'zh' is invalid; use the ISO 639-1 code of a language with a Snowball stemmer: "),
        ({"analyzer": "auto", "language": 3}, "language = 3 is invalid"),
    ],
)
def test_bad_analyzer_settings(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=None) as caught:
        pipeline(**options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_knobs_the_analyzer_does_not_read() -> None:
    plain = pipeline(analyzer="plain", language="de")
    assert ("language", 'analyzer = "plain" neither stems nor drops stop words') in \
        unread_knobs(plain.config, {"analyzer": "plain", "language": "de"})
    vector = pipeline(retrieval="vector", embedding_model="hashing", analyzer="auto")
    assert [key for key, _ in unread_knobs(vector.config, {"analyzer": "auto"})] == ["analyzer"]
    lexical = pipeline(retrieval="vector", embedding_model="hashing", analyzer="auto",
                       rerank_model="lexical")
    assert unread_knobs(lexical.config, {"analyzer": "auto"}) == []
