"""Speed of the text metrics on Russian and Japanese answers, against sacrebleu's tokenizers.

Run on demand (not part of the test suite)::

    python benchmarks/bench_languages.py                # full sizes, 5 repeats
    python benchmarks/bench_languages.py --scale 0.2

Each case times our engine and its peer on the same pairs in the same process,
alternating, and prints the medians and their ratio:

* Russian: 5,000 pairs of ~40 words (Cyrillic words drawn from a Zipf vocabulary,
  hypothesis = reference with ~20% of the words substituted, two sentences with
  commas). Ours: the six generation metrics with the default tokenizer, tokenizing
  included (memos cleared before every repeat). Peer: sacrebleu's ``intl`` tokenizer,
  then ``rouge-score`` (rouge1, rouge2, rougeL) given those tokens and NLTK
  ``sentence_bleu`` for BLEU-1/2/4 on them (one call, three weight vectors).
* Japanese: 5,000 pairs of ~40 words (sentences built from real Japanese nouns,
  particles and verb forms). Ours: the six metrics with ``tokenizer="ja"`` (MeCab
  through fugashi, UniDic-lite). Peer: sacrebleu's ``ja-mecab`` tokenizer (MeCab
  through mecab-python3, IPAdic; ``pip install 'sacrebleu[ja]'``, skipped when
  missing), then rouge-score and NLTK on its tokens. A second line times our default
  tokenizer on the same pairs against the same peer.

Both sides tokenize every text once per repeat and score every pair; only the
tokenizers differ (each side's own), so the ratio is that of the whole pass.
"""

from __future__ import annotations

import argparse
import random
import sys
import warnings
from collections.abc import Callable
from typing import Any

from bench_metrics import BLEU_WEIGHTS, _median_pair, _report, _zipf_weights

from pytest_ragev import GENERATION_METRICS, MetricInput, score
from pytest_ragev.metrics import clear_cache, resolve_tokenizer

_CYRILLIC = "абвгдежзийклмнопрстуфхцчшщыьэюя"


def _russian_pairs(rng: random.Random, count: int) -> list[tuple[str, str]]:
    vocabulary = [
        "".join(rng.choice(_CYRILLIC) for _ in range(rng.randint(2, 10))) for _ in range(5000)
    ]
    weights = _zipf_weights(len(vocabulary))
    pairs = []
    for _ in range(count):
        reference = rng.choices(vocabulary, cum_weights=weights, k=40)
        hypothesis = [rng.choice(vocabulary) if rng.random() < 0.2 else w for w in reference]
        pairs.append(tuple(_sentences(words, " ") for words in (hypothesis, reference)))
    return pairs  # type: ignore[return-value]


def _sentences(words: list[str], space: str) -> str:
    middle = len(words) // 2
    first = space.join(words[:middle]).capitalize()
    second = space.join(words[middle:]).capitalize()
    return f"{first}, и ещё. {second}." if space else f"{first}、そして。{second}。"


# Real Japanese words: nouns (a Zipf draw), particles and verb forms, in the order
# noun particle ... verb, so that MeCab sees sentences it knows.
_NOUNS = [
    "システム", "パッケージ", "設定", "ファイル", "管理者", "権限", "更新", "確認", "再起動",
    "ネットワーク", "サーバー", "接続", "情報", "問題", "方法", "時間", "場合", "利用", "必要",
    "変更", "作成", "削除", "追加", "表示", "入力", "出力", "実行", "環境", "機能", "画面", "文書",
    "言語", "日本", "東京", "会社", "学校", "先生", "学生", "友達", "家族", "電話", "写真", "天気",
    "料理", "旅行", "音楽", "映画", "駅",
]  # fmt: skip
_PARTICLES = ["は", "が", "を", "に", "で", "と", "の", "から", "まで", "も"]
_VERBS = [
    "します", "しました", "できます", "ください", "あります", "います", "なります", "使います",
    "見ます", "書きます",
]  # fmt: skip


def _japanese_words(rng: random.Random, count: int) -> list[str]:
    weights = _zipf_weights(len(_NOUNS))
    words: list[str] = []
    while len(words) < count:
        words += [rng.choices(_NOUNS, cum_weights=weights)[0], rng.choice(_PARTICLES)]
        if rng.random() < 0.25:
            words.append(rng.choice(_VERBS))
    return words[:count]


def _japanese_pairs(rng: random.Random, count: int) -> list[tuple[str, str]]:
    pairs = []
    for _ in range(count):
        reference = _japanese_words(rng, 40)
        hypothesis = [
            (rng.choice(_NOUNS) if index % 2 == 0 else rng.choice(_PARTICLES))
            if rng.random() < 0.2 else word
            for index, word in enumerate(reference)
        ]  # fmt: skip
        pairs.append(tuple(_sentences(words, "") for words in (hypothesis, reference)))
    return pairs  # type: ignore[return-value]


def _peer(pairs: list[tuple[str, str]], tokenize: Callable[[str], str]) -> Callable[[], None]:
    """sacrebleu's tokenizer on every text, then rouge-score and NLTK on those tokens."""
    from nltk.translate.bleu_score import sentence_bleu
    from rouge_score import rouge_scorer

    tokens: dict[str, list[str]] = {}

    class SameTokens:
        def tokenize(self, text: str) -> list[str]:
            return tokens[text]

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=SameTokens())

    def run() -> None:
        tokens.clear()
        for pair in pairs:
            for text in pair:
                if text not in tokens:
                    tokens[text] = tokenize(text).split()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for hypothesis, reference in pairs:
                scorer.score(reference, hypothesis)
                ref = [token.lower() for token in tokens[reference]]
                hyp = [token.lower() for token in tokens[hypothesis]]
                sentence_bleu([ref], hyp, weights=BLEU_WEIGHTS)

    return run


def _ours(pairs: list[tuple[str, str]], tokenizer: Any, profile: str) -> Callable[[], None]:
    inputs = [MetricInput([], [], hypothesis, reference) for hypothesis, reference in pairs]

    def run() -> None:
        clear_cache()  # tokenizing is part of our time
        score(inputs, profile=profile, metrics=GENERATION_METRICS, tokenizer=tokenizer)

    return run


def bench_russian(count: int, repeats: int) -> None:
    from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International

    pairs = _russian_pairs(random.Random(5), count)
    peer = _peer(pairs, TokenizerV14International())
    for profile in ("weknora", "standard"):
        ours_s, peer_s = _median_pair(_ours(pairs, None, profile), peer, repeats)
        _report(f"russian generation x{count} [{profile}], default tokenizer", ours_s, peer_s,
                "sacrebleu intl + rouge-score + NLTK", faster=True, target=1.0)  # fmt: skip


def bench_japanese(count: int, repeats: int) -> None:
    pairs = _japanese_pairs(random.Random(6), count)
    try:
        from sacrebleu.tokenizers.tokenizer_ja_mecab import TokenizerJaMecab

        mecab = TokenizerJaMecab()
    except (ImportError, RuntimeError) as error:
        print(f"japanese: sacrebleu ja-mecab unavailable ({error}); "
              "pip install 'sacrebleu[ja]' to run this case")  # fmt: skip
        return
    peer = _peer(pairs, mecab)
    ja = resolve_tokenizer("ja", source="bench_languages.py").tokenizer
    for profile in ("weknora", "standard"):
        ours_s, peer_s = _median_pair(_ours(pairs, ja, profile), peer, repeats)
        _report(f"japanese generation x{count} [{profile}], tokenizer ja", ours_s, peer_s,
                f"sacrebleu {mecab.signature()} + rouge-score + NLTK", faster=True,
                target=1.0)  # fmt: skip
    ours_s, peer_s = _median_pair(_ours(pairs, None, "weknora"), peer, repeats)
    _report(f"japanese generation x{count} [weknora], default tokenizer", ours_s, peer_s,
            f"sacrebleu {mecab.signature()} + rouge-score + NLTK", faster=True,
            target=1.0)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full sizes")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per case (median)")
    parser.add_argument("--only", choices=["russian", "japanese"], action="append")
    options: Any = parser.parse_args(argv)
    chosen = options.only or ["russian", "japanese"]
    count = max(1, int(5_000 * options.scale))
    print(f"python {sys.version.split()[0]}, {options.repeats} repeats, medians")
    if "russian" in chosen:
        bench_russian(count, options.repeats)
    if "japanese" in chosen:
        bench_japanese(count, options.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
