"""Benchmark: ``load_dataset`` against bare ``pyarrow.parquet.read_table`` of the same files.

Generates (once, cached in ``benchmarks/.data/``) a dataset of 1M passages, 100k queries,
300k qrels (graded ``score`` column) and 100k answers, then times, alternating, several
repeats of

* ``read_table`` of the five files (the floor: decoding Parquet into Arrow), and
* ``load_dataset`` (read, validate, fingerprint, build 100k ``QAPair`` objects),

and prints the medians, their ratio (target <= 2x) and the peak RSS of each, measured in a
fresh subprocess so one does not inherit the other's memory.

Run: ``.venv/bin/python benchmarks/bench_dataset.py [--repeats 5] [--passages 1000000] [--warm]``
(``--warm`` adds the same comparison alternated inside one process: see ``_warm``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
FILES = ("queries", "corpus", "answers", "qrels", "qas")


def generate(
    folder: Path, *, passages: int, queries: int, qrels: int, shuffled: bool, seed: int = 7
) -> None:
    """Write a synthetic dataset with realistic text lengths (~330 chars per passage)."""
    import numpy as np
    import pyarrow as pa

    from pytest_ragev.dataset._write import write_table

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = [
        "".join(rng.choice(letters, size=int(length)))
        for length in rng.integers(2, 10, size=20_000)
    ]
    words = np.array(vocabulary, dtype=object)

    def texts(count: int, words_per_text: int) -> pa.Array:
        picks = words[rng.integers(0, len(words), size=(count, words_per_text))]
        return pa.array([" ".join(row) + "." for row in picks], pa.string())

    folder.mkdir(parents=True, exist_ok=True)
    passage_ids = np.arange(1, passages + 1, dtype=np.int64)
    # "shuffled": rows in random id order, the loader's worst case (it must reorder 1M texts);
    # "sorted": ids ascending, as the seed's own tools and most exports write them.
    order = rng.permutation(passages) if shuffled else np.arange(passages)
    write_table(
        folder / "corpus.parquet",
        pa.table({"id": passage_ids[order], "text": texts(passages, 55)}),
    )
    query_ids = np.arange(1, queries + 1, dtype=np.int64)
    write_table(folder / "queries.parquet", pa.table({"id": query_ids, "text": texts(queries, 8)}))
    write_table(folder / "answers.parquet", pa.table({"id": query_ids, "text": texts(queries, 20)}))
    write_table(folder / "qas.parquet", pa.table({"qid": query_ids, "aid": query_ids}))
    # qrels: 3 per query on average, unique (qid, pid) pairs, graded 0..3.
    qrel_qids = rng.integers(1, queries + 1, size=qrels).astype(np.int64)
    qrel_pids = rng.integers(1, passages + 1, size=qrels).astype(np.int64)
    keys = np.unique(qrel_qids * (passages + 1) + qrel_pids)
    qrel_qids, qrel_pids = keys // (passages + 1), keys % (passages + 1)
    shuffle = rng.permutation(len(keys))
    write_table(
        folder / "qrels.parquet",
        pa.table(
            {
                "qid": qrel_qids[shuffle],
                "pid": qrel_pids[shuffle],
                "score": rng.integers(0, 4, size=len(keys)).astype(np.int64),
            }
        ),
    )


def _child(kind: str, folder: str) -> None:
    """Time one operation in this fresh process; print JSON with seconds and peak RSS."""
    import resource

    import pyarrow.parquet as pq

    from pytest_ragev.dataset import load_dataset

    start = time.perf_counter()
    cpu_start = time.process_time()
    if kind == "read_table":
        tables = [pq.read_table(Path(folder) / f"{name}.parquet") for name in FILES]
        rows = sum(table.num_rows for table in tables)
    else:
        dataset = load_dataset(folder)
        rows = len(dataset.pairs) + len(dataset.corpus)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds,
                      "peak_mib": peak_kib / 1024, "rows": rows}))


def _warm(folder: Path, repeats: int) -> None:
    """Both operations alternated in this one process, after a discarded first round.

    Fresh processes measure first-touch memory too: on a VM whose host faults guest
    pages in lazily (this machine), that alone moves one ``load_dataset`` from 0.9 s to
    4.5 s between runs. In one process Arrow's allocator reuses its pages, so this
    measures the work itself: the steady state of a long-lived process (a pytest run
    under xdist loads the dataset in warm workers too).
    """
    import gc

    import pyarrow.parquet as pq

    from pytest_ragev.dataset import load_dataset

    def bare() -> object:
        return [pq.read_table(folder / f"{name}.parquet") for name in FILES]

    def ours() -> object:
        return load_dataset(folder)

    times: dict[str, list[float]] = {"read_table": [], "load_dataset": []}
    cpu: dict[str, list[float]] = {"read_table": [], "load_dataset": []}
    for round_index in range(repeats + 1):
        for kind, function in (("read_table", bare), ("load_dataset", ours)):
            gc.collect()
            start, cpu_start = time.perf_counter(), time.process_time()
            result = function()
            elapsed, cpu_elapsed = time.perf_counter() - start, time.process_time() - cpu_start
            del result
            if round_index:  # the first round warms the allocator and the page cache
                times[kind].append(elapsed)
                cpu[kind].append(cpu_elapsed)
    for kind in times:
        listed = ", ".join(f"{t:.3f}" for t in times[kind])
        print(f"warm {kind:<12}: median {statistics.median(times[kind]):.3f} s wall "
              f"(runs: {listed}); {statistics.median(cpu[kind]):.3f} s CPU")
    wall = statistics.median(times["load_dataset"]) / statistics.median(times["read_table"])
    cpu_ratio = statistics.median(cpu["load_dataset"]) / statistics.median(cpu["read_table"])
    print(f"warm ratio load_dataset / read_table: {wall:.2f}x wall (target <= 2.00x), "
          f"{cpu_ratio:.2f}x CPU time")


def _run(kind: str, folder: Path) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(folder)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(output)
    return result


def main() -> None:
    """Generate the data if needed, run the alternating repeats, print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--qrels", type=int, default=300_000)
    parser.add_argument(
        "--layout",
        choices=("shuffled", "sorted"),
        default="shuffled",
        help="corpus row order on disk (default shuffled, the loader's worst case)",
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="also time both operations alternated in this one process (no first-touch "
        "memory cost; see _warm)",
    )
    parser.add_argument("--child", nargs=2, metavar=("KIND", "FOLDER"), help=argparse.SUPPRESS)
    parser.add_argument("--generate-into", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    if args.generate_into:
        generate(
            Path(args.generate_into),
            passages=args.passages,
            queries=args.queries,
            qrels=args.qrels,
            shuffled=args.layout == "shuffled",
        )
        return

    folder = DATA / f"ds_{args.passages}_{args.queries}_{args.qrels}_{args.layout}"
    if not (folder / "qrels.parquet").exists():
        print(f"generating {folder} ...", flush=True)
        started = time.perf_counter()
        # In a child process: Linux carries a parent's peak RSS over into the children it
        # forks, so generating in this process would inflate every measurement below.
        subprocess.run(
            [sys.executable, __file__, "--generate-into", str(folder), "--layout", args.layout,
             "--passages", str(args.passages), "--queries", str(args.queries),
             "--qrels", str(args.qrels)],
            check=True,
        )
        print(f"  generated in {time.perf_counter() - started:.1f} s")
    size_mib = sum((folder / f"{name}.parquet").stat().st_size for name in FILES) / 2**20
    print(f"dataset: {folder.name} ({size_mib:.0f} MiB on disk)")

    bare: list[dict[str, float]] = []
    ours: list[dict[str, float]] = []
    for _ in range(args.repeats):
        # Alternate so that machine noise hits both sides alike.
        bare.append(_run("read_table", folder))
        ours.append(_run("load_dataset", folder))
    bare_median = statistics.median(r["seconds"] for r in bare)
    ours_median = statistics.median(r["seconds"] for r in ours)
    for label, runs, median in (
        ("read_table x5 files", bare, bare_median),
        ("load_dataset       ", ours, ours_median),
    ):
        listed = ", ".join(f"{run['seconds']:.3f}" for run in runs)
        cpu = statistics.median(run["cpu_seconds"] for run in runs)
        peak = statistics.median(run["peak_mib"] for run in runs)
        print(f"{label}: median {median:.3f} s wall (runs: {listed}); "
              f"{cpu:.3f} s CPU; peak RSS {peak:.0f} MiB")
    cpu_ratio = statistics.median(r["cpu_seconds"] for r in ours) / statistics.median(
        r["cpu_seconds"] for r in bare
    )
    print(f"ratio load_dataset / read_table: {ours_median / bare_median:.2f}x wall "
          f"(target <= 2.00x), {cpu_ratio:.2f}x CPU time")
    if args.warm:
        _warm(folder, args.repeats)


if __name__ == "__main__":
    main()
