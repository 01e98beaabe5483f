"""Speed of the metric engine against the field's tools, measured side by side.

Run on demand (not part of the test suite)::

    python benchmarks/bench_metrics.py            # full sizes, 3 repeats
    python benchmarks/bench_metrics.py --scale 0.1 --repeats 5

Each case times our engine and its peer on the same data in the same process,
alternating, and prints the median of the repeats and the ratio of medians:

* English generation: 10,000 pairs of ~40 words (hypothesis = reference with ~20% of
  words substituted). Ours: the six generation metrics, tokenization included (the
  memo is cleared before every repeat). Peer: ``rouge-score`` (rouge1, rouge2,
  rougeL) with a tokenizer object returning our tokens, plus NLTK ``sentence_bleu``
  for BLEU-1/2/4 (one call with the three weight vectors, so NLTK counts once).
  Target: ours >= 5x faster.
* Retrieval: 100,000 queries x 10 retrieved integer ids. Ours: the six retrieval
  metrics from ``MetricInput`` lists, timed twice: ``score`` (one dict per query) and
  ``score_columns`` (one numpy array per metric). Peer: ``pytrec_eval.
  RelevanceEvaluator(...)`` + ``evaluate`` (building its string-keyed dicts is
  reported apart, not charged to it). Target: ours >= 5x faster. Two more lines
  start both tools from the same MetricInput lists (pytrec_eval then pays for its
  dicts, as a user holding Python lists does), and a last line times the CPython
  floor of the rows answer (reading the ids and building the dicts, no metric at
  all) against the same pytrec_eval run.
* Default call (#15): ``score(inputs)`` with every default (all twelve metrics) on
  the retrieval inputs above, whose texts are empty, against pytrec_eval from the
  same lists and with its dicts not charged. Target: ours >= 5x faster. Then 100,000
  pairs whose answer equals its reference (2,000 distinct English texts): the time
  beyond scoring those 2,000 pairs once, per pair, against the empty-text call's
  time per pair. Target: <= 1.3x. Both cases first check that the values are
  exactly those of scoring every pair on its own.
* Chinese generation: pairs of ~40 jieba words. Ours: the whole metric pass. Peer:
  jieba's bare ``lcut`` of the same texts (same jieba instance, dictionary loaded).
  Target: ours <= 1.3x jieba.
* Peak memory: a fresh process scores 100,000 samples (all twelve metrics);
  ``ru_maxrss`` at the end. Target: < 1 GB.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import random
import statistics
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_ragev import GENERATION_METRICS, RETRIEVAL_METRICS, MetricInput, score
from pytest_ragev.metrics import clear_cache, jieba_tokenizer, words

BLEU_WEIGHTS = [(1.0, 0.0, 0.0, 0.0), (0.5, 0.5, 0.0, 0.0), (0.25, 0.25, 0.25, 0.25)]


def _median_pair(
    ours: Callable[[], object], peer: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Median seconds of ``ours`` and ``peer``, run alternately ``repeats`` times."""
    ours_times: list[float] = []
    peer_times: list[float] = []
    for _ in range(repeats):
        for function, bucket in ((ours, ours_times), (peer, peer_times)):
            start = time.perf_counter()
            function()
            bucket.append(time.perf_counter() - start)
    return statistics.median(ours_times), statistics.median(peer_times)


@functools.cache
def _zipf_weights(size: int) -> list[float]:
    return list(itertools.accumulate(1 / rank for rank in range(1, size + 1)))


def _english_vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(size)]


def _substituted_pair(rng: random.Random, vocabulary: list[str], length: int) -> tuple[str, str]:
    # Zipf draws (weight 1/rank): frequent words repeat as in real text, where the
    # commonest word is ~5-10% of the tokens.
    reference = rng.choices(vocabulary, cum_weights=_zipf_weights(len(vocabulary)), k=length)
    hypothesis = [rng.choice(vocabulary) if rng.random() < 0.2 else w for w in reference]

    def as_text(tokens: list[str]) -> str:
        middle = len(tokens) // 2
        first = " ".join(tokens[:middle]).capitalize()
        second = " ".join(tokens[middle:]).capitalize()
        return f"{first}, and more. {second}."

    return as_text(hypothesis), as_text(reference)


def bench_english(pair_count: int, repeats: int) -> None:
    from nltk.translate.bleu_score import sentence_bleu
    from rouge_score import rouge_scorer

    rng = random.Random(1)
    vocabulary = _english_vocabulary(rng)
    pairs = [_substituted_pair(rng, vocabulary, 40) for _ in range(pair_count)]
    inputs = [MetricInput([], [], hypothesis, reference) for hypothesis, reference in pairs]

    tokens = {text: words(text) for pair in pairs for text in pair}
    lowered = {text: [t.lower() for t in value] for text, value in tokens.items()}

    class SameTokens:
        def tokenize(self, text: str) -> list[str]:
            return tokens[text]

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=SameTokens())

    def peer() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for hypothesis, reference in pairs:
                scorer.score(reference, hypothesis)
                sentence_bleu([lowered[reference]], lowered[hypothesis], weights=BLEU_WEIGHTS)

    for profile in ("weknora", "standard"):

        def ours(profile: str = profile) -> None:
            clear_cache()  # tokenization is part of our time
            score(inputs, profile=profile, metrics=GENERATION_METRICS)

        ours_s, peer_s = _median_pair(ours, peer, repeats)
        _report(f"english generation x{pair_count} [{profile}]", ours_s, peer_s,
                "rouge-score+NLTK", faster=True, target=5.0)  # fmt: skip


TREC_MEASURES = {"set_P", "set_recall", "ndcg_cut_3", "ndcg_cut_10", "recip_rank", "map"}


def _retrieval_inputs(rng: random.Random, count: int) -> list[MetricInput]:
    """``count`` queries: 1-5 relevant passages of 100,000, 10 retrieved, empty texts."""
    inputs = []
    for _ in range(count):
        relevant = rng.sample(range(100_000), rng.randint(1, 5))
        pool = relevant + [rng.randrange(100_000) for _ in range(15)]
        inputs.append(MetricInput([relevant], rng.sample(pool, 10), "", ""))
    return inputs


def _trec_dicts(
    inputs: list[MetricInput],
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """pytrec_eval's qrels and run dicts of ``inputs`` (string keys, rank-ordered scores)."""
    qrels = {str(i): {str(p): 1 for p in s.retrieval_gt[0]} for i, s in enumerate(inputs)}
    run = {
        str(i): {str(p): float(10 - rank) for rank, p in enumerate(s.retrieval_ids)}
        for i, s in enumerate(inputs)
    }
    return qrels, run


def bench_retrieval(query_count: int, repeats: int) -> None:
    import pytrec_eval

    from pytest_ragev.metrics import score_columns
    from pytest_ragev.metrics._validate import plain_flat_ids
    from pytest_ragev.metrics.engine import _row_builder

    rng = random.Random(2)
    inputs = _retrieval_inputs(rng, query_count)
    start = time.perf_counter()
    qrels, run = _trec_dicts(inputs)
    build_s = time.perf_counter() - start

    def peer() -> None:
        pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)

    for profile in ("weknora", "standard"):

        def ours(profile: str = profile) -> None:
            score(inputs, profile=profile, metrics=RETRIEVAL_METRICS)

        def columns(profile: str = profile) -> None:
            score_columns(inputs, profile=profile, metrics=RETRIEVAL_METRICS)

        ours_s, peer_s = _median_pair(ours, peer, repeats)
        _report(f"retrieval x{query_count} [{profile}], score() rows", ours_s, peer_s,
                "pytrec_eval", faster=True, target=5.0)  # fmt: skip
        columns_s, peer_s = _median_pair(columns, peer, repeats)
        _report(f"retrieval x{query_count} [{profile}], score_columns()", columns_s, peer_s,
                "pytrec_eval", faster=True, target=5.0)  # fmt: skip
    print(f"    charged to ours: everything from the MetricInput list to the result; to "
          f"pytrec_eval: evaluator + evaluate (its string dicts, built once in "
          f"{build_s:.3f} s, are not charged to it)")  # fmt: skip

    # The same comparison from the same starting point: a user holding the results
    # as Python lists pays for pytrec_eval's string-keyed dicts too.
    def peer_from_lists() -> None:
        qrels, run = _trec_dicts(inputs)
        pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)

    def rows_weknora() -> None:
        score(inputs, metrics=RETRIEVAL_METRICS)

    def columns_weknora() -> None:
        score_columns(inputs, metrics=RETRIEVAL_METRICS)

    for label, function in (("score() rows", rows_weknora), ("score_columns()", columns_weknora)):
        ours_s, peer_s = _median_pair(function, peer_from_lists, repeats)
        _report(f"retrieval x{query_count} [weknora], {label}, both from the same lists",
                ours_s, peer_s, "pytrec_eval incl. its dicts", faster=True, target=5.0)  # fmt: skip

    # The CPython floor of the rows result: work any list-of-dicts answer must do
    # whatever its arithmetic costs: read 1.3 million ids out of Python lists (with
    # the engine's reader, one array.fromlist pass per list: the fastest pure-Python
    # way measured, 1.6x np.array of a flattened list) and build 100,000 dicts.
    ready = [[rng.random() for _ in range(query_count)] for _ in RETRIEVAL_METRICS]
    build_rows = _row_builder(RETRIEVAL_METRICS)
    parts: tuple[list[float], list[float]] = ([], [])

    def floor() -> None:
        start = time.perf_counter()
        plain_flat_ids([sample.retrieval_ids for sample in inputs])
        plain_flat_ids([sample.retrieval_gt[0] for sample in inputs])
        middle = time.perf_counter()
        build_rows(*ready)
        parts[0].append(middle - start)
        parts[1].append(time.perf_counter() - middle)

    floor_s, peer_s = _median_pair(floor, peer, repeats)
    read_s, rows_s = (statistics.median(part) for part in parts)
    print(f"    floor of score() rows, no metric computed: reading the ids {read_s:.3f} s + "
          f"building the dicts {rows_s:.3f} s = {floor_s:.3f} s = 1/{peer_s / floor_s:.1f} "
          f"of pytrec_eval's {peer_s:.3f} s: rows can be at most {peer_s / floor_s:.1f}x "
          f"faster")  # fmt: skip


def bench_default_call(query_count: int, repeats: int) -> None:
    """#15: ``score(inputs)`` with every default (all twelve metrics) on inputs whose
    texts are empty, and on inputs whose answer equals its reference."""
    import pytrec_eval

    from pytest_ragev.metrics import generation
    from pytest_ragev.metrics.text import tokenize_tuples

    rng = random.Random(2)
    inputs = _retrieval_inputs(rng, query_count)
    qrels, run = _trec_dicts(inputs)

    def peer() -> None:
        pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)

    def peer_from_lists() -> None:
        qrels, run = _trec_dicts(inputs)
        pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)

    def ours() -> None:
        score(inputs)

    rows = score(inputs)
    assert all(row[name] == 0.0 for row in rows for name in GENERATION_METRICS)
    assert rows == [
        {**row, **dict.fromkeys(GENERATION_METRICS, 0.0)}
        for row in score(inputs, metrics=RETRIEVAL_METRICS)
    ]
    ours_s, peer_s = _median_pair(ours, peer_from_lists, repeats)
    _report(f"score() default call x{query_count}, empty texts, both from the same lists",
            ours_s, peer_s, "pytrec_eval incl. its dicts", faster=True, target=5.0)  # fmt: skip
    ours_s, peer_s = _median_pair(ours, peer, repeats)
    _report(f"score() default call x{query_count}, empty texts", ours_s, peer_s,
            "pytrec_eval (dicts not charged)", faster=True, target=5.0)  # fmt: skip

    # Identical pairs: each answer equals its reference (2,000 distinct English texts).
    vocabulary = _english_vocabulary(rng)
    answers = [" ".join(rng.choices(vocabulary, k=40)) + "." for _ in range(2000)]
    same = [
        MetricInput(sample.retrieval_gt, sample.retrieval_ids, text, text)
        for sample, text in zip(inputs, itertools.cycle(answers), strict=False)
    ]
    distinct = [MetricInput([], [], text, text) for text in answers]
    for profile in ("weknora", "standard"):
        # Exact: the same values as scoring every pair from its own reading.
        read = generation.weknora_text if profile == "weknora" else generation.standard_text
        pair = generation.weknora_pair if profile == "weknora" else generation.standard_pair
        checked = score(same[:3000], profile=profile)
        for sample, row in zip(same[:3000], checked, strict=True):
            expected = pair(read(tokenize_tuples(sample.generated_text)),
                            read(tokenize_tuples(sample.generated_gt)))  # fmt: skip
            assert tuple(row[name] for name in GENERATION_METRICS) == expected

        def identical(profile: str = profile) -> None:
            clear_cache()  # tokenizing the 2,000 texts is charged
            score(same, profile=profile)

        def once(profile: str = profile) -> None:
            clear_cache()
            score(distinct, profile=profile, metrics=GENERATION_METRICS)

        def empty(profile: str = profile) -> None:
            score(inputs, profile=profile)

        times: dict[str, list[float]] = {"identical": [], "once": [], "empty": []}
        for _ in range(repeats):
            for name, function in (("identical", identical), ("once", once), ("empty", empty)):
                start = time.perf_counter()
                function()
                times[name].append(time.perf_counter() - start)
        same_s, once_s, empty_s = (statistics.median(times[n]) for n in times)
        per_pair = (same_s - once_s) / query_count * 1e6
        per_empty = empty_s / query_count * 1e6
        ratio = per_pair / per_empty
        verdict = "ok" if ratio <= 1.3 else "OVER TARGET"
        print(f"score() default call x{query_count}, identical pairs (2,000 distinct texts) "
              f"[{profile}]: {same_s:.3f} s = the 2,000 texts scored once {once_s:.3f} s + "
              f"{per_pair:.2f} us a pair, vs {per_empty:.2f} us a pair for empty texts -> "
              f"{ratio:.2f}x (target <= 1.3x: a row of twelve values, not of six and "
              f"six constant zeros) {verdict}")  # fmt: skip


def _jieba_words() -> list[str]:
    import jieba

    dictionary = Path(jieba.__file__).with_name("dict.txt")
    entries = []
    with dictionary.open(encoding="utf-8") as handle:
        for line in handle:
            word, frequency, *_ = line.split()
            if int(frequency) >= 2000 and len(word) <= 4:
                entries.append(word)
    return entries


def bench_chinese(pair_count: int, repeats: int) -> None:
    segmenter = jieba_tokenizer()  # load the dictionary before timing anything
    rng = random.Random(3)
    vocabulary = _jieba_words()
    pairs = []
    for _ in range(pair_count):
        reference = [rng.choice(vocabulary) for _ in range(40)]
        hypothesis = [rng.choice(vocabulary) if rng.random() < 0.2 else w for w in reference]
        pairs.append(tuple("".join(t[:20]) + "，" + "".join(t[20:]) + "。"
                           for t in (hypothesis, reference)))  # fmt: skip
    inputs = [MetricInput([], [], hypothesis, reference) for hypothesis, reference in pairs]
    texts = [text for pair in pairs for text in pair]

    def peer() -> None:
        for text in texts:
            segmenter.lcut(text)

    for profile in ("weknora", "standard"):

        def ours(profile: str = profile) -> None:
            clear_cache()
            score(inputs, profile=profile, metrics=GENERATION_METRICS)

        ours_s, peer_s = _median_pair(ours, peer, repeats)
        _report(f"chinese generation x{pair_count} [{profile}]", ours_s, peer_s,
                "bare jieba", faster=False, target=1.3)  # fmt: skip


def bench_memory(sample_count: int) -> None:
    code = textwrap.dedent(
        f"""
        import random, resource
        from pytest_ragev import MetricInput, score
        rng = random.Random(4)
        vocabulary = ["w" + str(i) for i in range(5000)]
        inputs = []
        for _ in range({sample_count}):
            reference = [rng.choice(vocabulary) for _ in range(40)]
            hypothesis = [rng.choice(vocabulary) if rng.random() < 0.2 else w for w in reference]
            relevant = rng.sample(range(100000), 3)
            inputs.append(MetricInput([relevant], relevant[:1] + rng.sample(range(100000), 9),
                                      " ".join(hypothesis) + ".", " ".join(reference) + "."))
        rows = score(inputs)
        assert len(rows) == {sample_count}
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    peak_mb = int(done.stdout.strip()) / 1024
    verdict = "ok" if peak_mb < 1024 else "OVER TARGET"
    print(f"peak memory, {sample_count} samples x 12 metrics (inputs included): "
          f"{peak_mb:.0f} MB (target < 1024 MB) {verdict}")  # fmt: skip


def _report(
    label: str, ours_s: float, peer_s: float, peer: str, *, faster: bool, target: float
) -> None:
    if faster:
        ratio = peer_s / ours_s
        verdict = "ok" if ratio >= target else "BELOW TARGET"
        print(f"{label}: ours {ours_s:.3f} s, {peer} {peer_s:.3f} s -> "
              f"{ratio:.1f}x faster (target >= {target}x) {verdict}")  # fmt: skip
    else:
        ratio = ours_s / peer_s
        verdict = "ok" if ratio <= target else "OVER TARGET"
        print(f"{label}: ours {ours_s:.3f} s, {peer} {peer_s:.3f} s -> "
              f"{ratio:.2f}x its time (target <= {target}x) {verdict}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full sizes")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per case (median)")
    parser.add_argument(
        "--only",
        choices=["english", "retrieval", "default", "chinese", "memory"],
        action="append",
    )
    options: Any = parser.parse_args(argv)
    chosen = options.only or ["english", "retrieval", "default", "chinese", "memory"]
    size = options.scale
    print(f"python {sys.version.split()[0]}, {options.repeats} repeats, medians")
    if "english" in chosen:
        bench_english(max(1, int(10_000 * size)), options.repeats)
    if "retrieval" in chosen:
        bench_retrieval(max(1, int(100_000 * size)), options.repeats)
    if "default" in chosen:
        bench_default_call(max(1, int(100_000 * size)), options.repeats)
    if "chinese" in chosen:
        bench_chinese(max(1, int(5_000 * size)), options.repeats)
    if "memory" in chosen:
        bench_memory(max(1, int(100_000 * size)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
