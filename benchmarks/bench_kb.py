"""Keyword retrieval: pytest-ragev's BM25 index against bm25s, on the same tokens.

A synthetic corpus (Zipf vocabulary, passages of 20-80 tokens) and known-item queries:
each query takes 4 distinct words of one target passage plus 2 frequent words, and the
target is its one relevant passage. Index time and queries/s are medians of interleaved
repeats (the machine is noisy: run it idle); NDCG@10 is computed for both on the same
queries. Run on demand::

    .venv/bin/python benchmarks/bench_kb.py [--docs 100000] [--queries 500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

import bm25s

from pytest_ragev.pipelines.builtin.bm25 import BM25Index


def corpus(n_docs: int, vocab: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    weights = [1.0 / (i + 1) for i in range(vocab)]
    return [rng.choices(words, weights, k=rng.randint(20, 80)) for _ in range(n_docs)]


def queries(docs: list[list[str]], count: int, seed: int) -> list[tuple[int, list[str]]]:
    rng = random.Random(seed)
    frequent = [f"w{i}" for i in range(20)]
    out = []
    for _ in range(count):
        target = rng.randrange(len(docs))
        out.append((target, rng.sample(sorted(set(docs[target])), 4) + rng.choices(frequent, k=2)))
    return out


def ndcg10(ranked: list[int], target: int) -> float:
    # One relevant document: DCG = 1 / log2(rank + 1), IDCG = 1.
    for rank, doc in enumerate(ranked[:10], start=1):
        if doc == target:
            return 1.0 / math.log2(rank + 1)
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    docs = corpus(args.docs, args.vocab, seed=0)
    qs = queries(docs, args.queries, seed=1)
    tokens = [q for _, q in qs]

    index_ours, index_theirs = [], []
    ours = BM25Index.build(docs[:100])
    theirs = bm25s.BM25()
    for _ in range(max(2, args.repeats // 2)):
        started = time.perf_counter()
        ours = BM25Index.build(docs)
        index_ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        theirs = bm25s.BM25()
        theirs.index(docs, show_progress=False)
        index_theirs.append(time.perf_counter() - started)

    qps_ours, qps_theirs = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        ranked_ours = [[doc for doc, _ in ours.search(q, 10)] for q in tokens]
        qps_ours.append(len(tokens) / (time.perf_counter() - started))
        started = time.perf_counter()
        ids, _ = theirs.retrieve(tokens, k=10, show_progress=False)
        qps_theirs.append(len(tokens) / (time.perf_counter() - started))

    ndcg_ours = statistics.fmean(ndcg10(r, t) for r, (t, _) in zip(ranked_ours, qs, strict=True))
    ndcg_theirs = statistics.fmean(
        ndcg10([int(d) for d in row], t) for row, (t, _) in zip(ids, qs, strict=True)
    )
    io, it = statistics.median(index_ours), statistics.median(index_theirs)
    qo, qt = statistics.median(qps_ours), statistics.median(qps_theirs)
    print(f"corpus {args.docs} passages, vocabulary {args.vocab}, {len(tokens)} queries")
    print(f"index time   ours {io:.2f} s   bm25s {it:.2f} s   ratio ours/bm25s {io / it:.2f}")
    print(f"queries/s    ours {qo:.0f}   bm25s {qt:.0f}   ratio ours/bm25s {qo / qt:.2f}")
    print(f"NDCG@10      ours {ndcg_ours:.4f}   bm25s {ndcg_theirs:.4f}   "
          f"delta {ndcg_ours - ndcg_theirs:+.4f}")


if __name__ == "__main__":
    main()
