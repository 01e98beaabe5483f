"""Keyword retrieval: pytest-ragev's BM25 index against bm25s, on the same tokens.

A synthetic corpus (:mod:`synthetic`: Zipf vocabulary, passages of 20-80 words) and
known-item queries (4 distinct words of a target passage plus 2 frequent words). In one
process, interleaved, repeated (the machine is noisy: read the ratios):

- index time: ``BM25Index.build`` against ``bm25s.BM25(backend="numpy").index`` of the
  same token lists (tokenizing is left out of both);
- queries/s: ``search(q, 10)`` one query at a time against bm25s's ``retrieve`` of the
  whole batch (numpy backend, one thread), and whether both give the same top 10 (the
  same scores, rank by rank; equal scores may order documents differently);
- with ``--tantivy``: tantivy's index time, queries/s and top-10 overlap on the same
  tokens (its scores cannot equal bm25s's: it quantises document lengths to a byte);
- with ``--rss``: the peak resident memory of a child process that builds the whole KB
  the way a run does (chunk, tokenize, index, write the cache entry, map it back) and
  of one that loads it from the cache, against a child that tokenizes alike and indexes
  with bm25s; and the wall time of our whole KB build against bm25s's index alone.

Run on demand::

    .venv/bin/python benchmarks/bench_kb.py [--docs 1000000] [--queries 500] [--repeats 5] [--rss]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bm25s
import numpy as np
import synthetic

from pytest_ragev.pipelines.builtin.bm25 import BM25Index


def ndcg10(ranked: list[int], target: int) -> float:
    # One relevant document: DCG = 1 / log2(rank + 1), IDCG = 1.
    for rank, doc in enumerate(ranked[:10], start=1):
        if doc == target:
            return 1.0 / math.log2(rank + 1)
    return 0.0


_CHILD = r"""
import gc, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import synthetic
mode, docs, folder = sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
corpus = synthetic.corpus(docs)
passages = {i: corpus.text(i) for i in range(docs)}
del corpus
gc.collect()

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return 0.0

# Linux: reset the peak (VmHWM) to now, so generating the passages does not count.
open("/proc/self/clear_refs", "w").write("5")
base = status("VmRSS:")
started = time.perf_counter()
if mode == "bm25s":
    import bm25s
    from pytest_ragev.pipelines.builtin.chunking import chunk_corpus
    from pytest_ragev.pipelines.builtin.tokens import bm25_tokens
    tokens = [bm25_tokens(c.text) for c in chunk_corpus(passages)]
    tokenized = time.perf_counter()
    bm25s.BM25(backend="numpy").index(tokens, show_progress=False)
    out = {"tokenize_s": tokenized - started, "index_s": time.perf_counter() - tokenized}
else:
    from pytest_ragev.core.types import PipelineSettings
    from pytest_ragev.pipelines import build_pipeline
    pipe = build_pipeline(PipelineSettings(name="builtin", options={}), source="bench")
    kb = pipe.build_knowledge_base(passages, fingerprint="b" * 64, cache_dir=folder)
    kb.index.search(["bababa", "dadada"], 10)
    out = {"chunks": kb.chunk_count, "cached": kb.loaded_from_cache}
out["wall_s"] = time.perf_counter() - started
out["peak_rss_mb"] = status("VmHWM:")
out["added_rss_mb"] = status("VmHWM:") - base
print(json.dumps(out))
"""


def _child(mode: str, docs: int, folder: Path) -> dict[str, float]:
    here = str(Path(__file__).resolve().parent)
    proc = subprocess.run([sys.executable, "-c", _CHILD, here, mode, str(docs), str(folder)],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"child {mode} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def bench_rss(docs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build = _child("ours", docs, folder)
        load = _child("ours", docs, folder)
        peer = _child("bm25s", docs, folder)
    print(f"KB of {docs} passages ({build['chunks']:.0f} chunks), child processes, "
          "peak RSS (in brackets: above the passages held in memory, as a run holds them):")
    print(f"  ours, build + save + map: {build['peak_rss_mb']:.0f} MB "
          f"(+{build['added_rss_mb']:.0f}), {build['wall_s']:.1f} s for chunk + tokenize + "
          "index + write")
    print(f"  ours, load from cache:    {load['peak_rss_mb']:.0f} MB "
          f"(+{load['added_rss_mb']:.0f}), {load['wall_s']:.2f} s")
    print(f"  bm25s, same tokens:       {peer['peak_rss_mb']:.0f} MB "
          f"(+{peer['added_rss_mb']:.0f}), tokenize {peer['tokenize_s']:.1f} s, index "
          f"{peer['index_s']:.1f} s")
    print(f"  whole KB build / bm25s index alone: {build['wall_s'] / peer['index_s']:.2f}")


def bench_tantivy(docs: list[list[str]], tokens: list[list[str]], ours: list[list[int]],
                  repeats: int) -> None:
    """tantivy (Rust, Python bindings) on the same tokens, joined by spaces."""
    import tantivy

    with tempfile.TemporaryDirectory() as tmp:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("body", tokenizer_name="whitespace", index_option="freq")
        builder.add_integer_field("id", stored=True, indexed=False)
        schema = builder.build()
        started = time.perf_counter()
        index = tantivy.Index(schema, path=tmp)
        writer = index.writer(heap_size=1 << 30)
        for number, doc in enumerate(docs):
            writer.add_document(tantivy.Document(body=" ".join(doc), id=number))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        built = time.perf_counter() - started
        searcher = index.searcher()
        queries = [index.parse_query(" ".join(q), ["body"]) for q in tokens]
        rates = []
        for _ in range(repeats):
            started = time.perf_counter()
            results = [searcher.search(query, 10).hits for query in queries]
            rates.append(len(queries) / (time.perf_counter() - started))
        overlap = statistics.fmean(
            len({searcher.doc(address)["id"][0] for _, address in hits} & set(mine)) / 10
            for hits, mine in zip(results, ours, strict=True) if mine)
    print(f"tantivy      index {built:.2f} s (its own threads), {statistics.median(rates):.0f} "
          f"queries/s, top-10 overlap with ours {overlap:.3f} (its BM25 quantises lengths and "
          "fixes k1 = 1.2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rss", action="store_true", help="also measure whole-KB builds")
    parser.add_argument("--tantivy", action="store_true",
                        help="also measure tantivy (pip install tantivy) on the same tokens")
    args = parser.parse_args()

    corpus = synthetic.corpus(args.docs, vocab=args.vocab, seed=0)
    docs = corpus.token_lists()
    qs = synthetic.queries(corpus, args.queries, seed=1)
    tokens = [q for _, q in qs]

    index_ours, index_theirs = [], []
    ours = BM25Index.build(docs[:100])
    theirs = bm25s.BM25(backend="numpy")
    for _ in range(max(2, args.repeats // 2)):
        del ours, theirs
        started = time.perf_counter()
        ours = BM25Index.build(docs)
        index_ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        theirs = bm25s.BM25(backend="numpy")
        theirs.index(docs, show_progress=False)
        index_theirs.append(time.perf_counter() - started)

    ours.search(tokens[0], 10)  # the per-thread accumulator, allocated once
    qps_ours, qps_theirs = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        hits_ours = [ours.search(q, 10) for q in tokens]
        qps_ours.append(len(tokens) / (time.perf_counter() - started))
        started = time.perf_counter()
        ids, scores = theirs.retrieve(tokens, k=10, show_progress=False, n_threads=1,
                                      backend_selection="numpy")
        qps_theirs.append(len(tokens) / (time.perf_counter() - started))

    same = 0
    for got, their_scores in zip(hits_ours, scores, strict=True):
        positive = [float(s) for s in their_scores if s > 0]
        same += len(got) == len(positive) and bool(np.allclose(
            [s for _, s in got], positive, rtol=1e-5, atol=1e-6))
    ranked_ours = [[doc for doc, _ in hits] for hits in hits_ours]
    ndcg_ours = statistics.fmean(ndcg10(r, t) for r, (t, _) in zip(ranked_ours, qs, strict=True))
    ndcg_theirs = statistics.fmean(
        ndcg10([int(d) for d in row], t) for row, (t, _) in zip(ids, qs, strict=True)
    )
    io, it = statistics.median(index_ours), statistics.median(index_theirs)
    qo, qt = statistics.median(qps_ours), statistics.median(qps_theirs)
    print(f"corpus {args.docs} passages, vocabulary {args.vocab}, {len(tokens)} queries, "
          f"{ours.postings} postings; medians of interleaved repeats")
    print(f"index time   ours {io:.2f} s   bm25s {it:.2f} s   ratio ours/bm25s {io / it:.2f} "
          "(target <= 1)")
    print(f"queries/s    ours {qo:.0f}   bm25s {qt:.0f}   ratio ours/bm25s {qo / qt:.2f} "
          "(target >= 3)")
    print(f"same top 10  {same} of {len(tokens)} queries (scores rank by rank)")
    print(f"NDCG@10      ours {ndcg_ours:.4f}   bm25s {ndcg_theirs:.4f}   "
          f"delta {ndcg_ours - ndcg_theirs:+.4f}")
    if args.tantivy:
        bench_tantivy(docs, tokens, ranked_ours, args.repeats)
    if args.rss:
        del ours, theirs, docs
        bench_rss(args.docs)


if __name__ == "__main__":
    main()
