"""Scale: the plugin end to end on synthetic datasets, against the floor of its parts (#15).

For each size ``QUESTIONSxPASSAGES`` (e.g. ``30000x300000``) it writes a dataset to
``benchmarks/.data/`` (once; git-ignored) from :mod:`synthetic` (Zipf vocabulary,
known-item questions, the target passage's first sentence as the reference answer) and
runs, each in a fresh ``pytest`` process:

- ``bare``: as many bare parametrized items (the floor of any pytest run), without
  pytest's cache provider; ``bare+cp`` the same with it (pytest's default, and where the
  plugin keeps its caches: its bookkeeping of 10,000 node ids is part of any such run);
- ``constant``: the plugin with a conftest pipeline that answers at once;
- ``cold``: the built-in pipeline from nothing (KB build, every answer computed and
  cached, a baseline written);
- ``rerun``: the same again (KB and answers from the caches, gated against the baseline);
- ``serial`` / ``xdist``: answers not cached, KB from the cache, ``-n 0`` against ``-n 2``;
  ``bare-n2``: the bare items on two xdist workers (what xdist costs by itself), and
  ``threads``: the serial run with ``--ragev-concurrency 2`` (two cores without xdist);
- ``heavy`` / ``heavy-n2``, only when named in ``--runs``: a conftest pipeline that
  spends ``--heavy-ms`` of pure-Python CPU on each question (default 10), ``-n 0``
  against ``-n 2``: how far xdist scales when a question costs more than the built-in
  pipeline's 1-2 ms;

and in this process the bm25s floor: indexing the chunks' tokens and retrieving the
questions' tokens with bm25s (numpy backend), tokens made by our tokenizer beforehand.
Each run reports its wall time, CPU time (all its processes), peak resident memory (the
largest process; with xdist also the workers' sum) and phases, taken by a small timing
plugin: start-up and collection, the first item (which builds or loads the KB), the
other items, and the end of the run (from the last item to the exit: scoring, gate,
report and baseline writes). Byte code is cached as on a user's machine (a warm-up
collection fills a private cache first, even under ``PYTHONDONTWRITEBYTECODE``). Then the
ratios the targets of #15 are stated in, of wall times (and of CPU times, which a busy
machine disturbs less). Run on demand::

    .venv/bin/python benchmarks/bench_scale.py [--sizes 3000x30000 30000x300000] [--repeats 1]

``--runs NAME ...`` runs only those kinds (e.g. ``--runs bare constant rerun``; the ratios
and sizes shown are those the chosen runs give). ``--project DIR`` keeps the project (its
configs, byte-code cache and ``.pytest_cache``) in ``DIR`` instead of a temporary folder,
so one ``cold`` run fills the caches that later invocations' ``rerun`` runs read::

    bench_scale.py --sizes 10000x100000 --no-xdist --project /tmp/p --runs cold
    bench_scale.py --sizes 10000x100000 --no-xdist --project /tmp/p --runs bare constant rerun
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import synthetic

DATA = Path(__file__).resolve().parent / ".data"

#: Loaded into every timed pytest run with ``-p``: phase timestamps and peak RSS to a file.
TIMING_PLUGIN = textwrap.dedent(
    """
    import json, os, time
    import pytest

    _t = {"start": time.time()}
    _first_done = []

    def _peak_mb():
        try:
            with open("/proc/self/status") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(session):
        _t["collected"] = time.time()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(report):
        if report.when == "call" or report.outcome != "passed":
            now = time.time()
            _t.setdefault("first_item_done", now)
            _t["last_item_done"] = now

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(config):
        _t["end"] = time.time()
        worker = getattr(config, "workerinput", {}).get("workerid", "main")
        _t["peak_rss_mb"] = _peak_mb()
        import resource
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _t["cpu_s"] = usage.ru_utime + usage.ru_stime
        folder = os.environ["RAGEV_BENCH_TIMING"]
        with open(os.path.join(folder, f"{worker}-{os.getpid()}.json"), "w") as handle:
            json.dump(_t, handle)
    """
)

#: The heavy pipeline's work: pure-Python CPU, ``iterations`` turns of a loop.
WORK = textwrap.dedent(
    """
    def work(iterations):
        total = 0
        for i in range(iterations):
            total += i * i % 7
        return total
    """
)


def answering_conftest(iterations: int = 0) -> str:
    """A conftest pipeline that answers each question with its reference passages and
    answer at once (the ``constant`` runs); with ``iterations``, after that many turns of
    :data:`WORK` (the ``heavy`` runs: how far ``-n 2`` scales when a question costs more
    than the built-in pipeline's 1-2 ms)."""
    spend = f"    work({iterations})\n" if iterations else ""
    return (
        "import pytest\nfrom pytest_ragev import Answer\n"
        + (WORK if iterations else "")
        + "\n@pytest.hookimpl\ndef pytest_ragev_build_knowledge_base(corpus, settings):\n"
        "    return object()\n\n"
        "@pytest.hookimpl\ndef pytest_ragev_answer(case, kb, settings):\n"
        + spend
        + '    return Answer(retrieved=list(case.pids), text=case.answer or "")\n'
    )


def heavy_iterations(milliseconds: float) -> int:
    """How many turns of :data:`WORK`'s loop cost ``milliseconds`` of CPU here (the
    median of five timings of 200,000)."""
    namespace: dict[str, Any] = {}
    exec(WORK, namespace)
    timings = []
    for _ in range(5):
        started = time.process_time()
        namespace["work"](200_000)
        timings.append(time.process_time() - started)
    return max(1, round(200_000 * milliseconds / 1000 / statistics.median(timings)))


def make_dataset(questions: int, passages: int) -> Path:
    """The dataset folder of this size, written on first use."""
    from pytest_ragev.dataset import write_dataset

    folder = DATA / f"scale-{questions}x{passages}"
    if (folder / "qas.parquet").exists():
        return folder
    started = time.perf_counter()
    corpus = synthetic.corpus(passages, seed=0)
    asked = synthetic.queries(corpus, questions, seed=1)
    texts = {pid + 1: corpus.text(pid) for pid in range(passages)}
    write_dataset(
        folder,
        queries={qid: " ".join(tokens).capitalize() + "?"
                 for qid, (_, tokens) in enumerate(asked, start=1)},
        corpus=texts,
        answers={qid: corpus.first_sentence(target)
                 for qid, (target, _) in enumerate(asked, start=1)},
        qrels=[(qid, target + 1) for qid, (target, _) in enumerate(asked, start=1)],
        qas=[(qid, qid) for qid in range(1, questions + 1)],
    )
    print(f"  wrote {folder.name} in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def _write_project(root: Path, dataset: Path, questions: int) -> None:
    # Its own ini file: pytest's rootdir (and .pytest_cache) stay in the project.
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "timing_plugin.py").write_text(TIMING_PLUGIN, encoding="utf-8")
    for name, pipeline, cache in (("builtin", 'name = "builtin"', "true"),
                                  ("nocache", 'name = "builtin"', "false"),
                                  ("constant", 'name = "constant"', "false")):
        (root / f"{name}.toml").write_text(
            f'[dataset]\npath = "{dataset}"\nid = "scale"\n\n[pipeline]\n{pipeline}\n\n'
            f'[run]\ncache = {cache}\n\n[baseline]\npath = "baseline-{name}.json"\n',
            encoding="utf-8")
    constant = root / "constant"
    constant.mkdir()
    (constant / "conftest.py").write_text(answering_conftest(), encoding="utf-8")
    bare = root / "bare"
    bare.mkdir()
    (bare / "test_bare.py").write_text(
        "import pytest\n\n"
        f"@pytest.mark.parametrize('qid', range({questions}))\n"
        "def test_q(qid):\n    assert qid >= 0\n", encoding="utf-8")


def _write_heavy(root: Path, dataset: Path, iterations: int) -> None:
    """The heavy pipeline's config and conftest (written again by every invocation that
    runs it: the iterations follow ``--heavy-ms`` and this machine's speed)."""
    (root / "heavy.toml").write_text(
        f'[dataset]\npath = "{dataset}"\nid = "scale"\n\n[pipeline]\nname = "heavy"\n\n'
        '[run]\ncache = false\n\n[baseline]\npath = "baseline-heavy.json"\n',
        encoding="utf-8")
    heavy = root / "heavy"
    heavy.mkdir(exist_ok=True)
    (heavy / "conftest.py").write_text(answering_conftest(iterations), encoding="utf-8")


def _environment(root: Path) -> dict[str, str]:
    """The environment of the timed runs: the timing plugin importable, and byte code
    cached as on a user's machine, in a folder of the run's own.

    With ``PYTHONDONTWRITEBYTECODE`` set (as in some CI and container images) every run
    would compile pytest-ragev's modules again, with pytest's assertion rewriting (the
    package is a ``pytest11`` plugin): some 0.7 s of CPU at start that a user's second
    run never pays. :func:`warm_up` fills the cache before the timed runs.
    """
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    env["PYTHONPATH"] = f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    return env


def warm_up(root: Path) -> None:
    """One untimed collection of the built-in project: every module the timed runs
    import is compiled (and assertion-rewritten) into the byte-code cache."""
    subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:hypothesispytest",
                    "-W", "ignore", "--ragev-config", "builtin.toml"], cwd=root,
                   env=_environment(root), capture_output=True, text=True, check=False)


def run(root: Path, name: str, args: list[str], cwd: Path | None = None) -> dict[str, Any]:
    """One timed pytest process: wall, peak RSS (largest and sum), phases."""
    timing = Path(tempfile.mkdtemp(prefix="timing-", dir=root))
    env = {**_environment(root), "RAGEV_BENCH_TIMING": str(timing)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "timing_plugin",
               "-p", "no:hypothesispytest", "-W", "ignore", *args]
    started = time.time()
    proc = subprocess.run(command, cwd=cwd or root, env=env, capture_output=True, text=True,
                          check=False)
    wall = time.time() - started
    if proc.returncode not in (0, 1):
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise SystemExit(f"{name}: pytest exited {proc.returncode}:\n{tail}")
    records = [json.loads(p.read_text()) for p in timing.glob("*.json")]
    main = next(r for r in records if "first_item_done" in r or len(records) == 1)
    items = [r for r in records if "first_item_done" in r] or [main]
    first = min(r["first_item_done"] for r in items)
    last = max(r["last_item_done"] for r in items)
    out = {
        "wall": wall,
        "peak_mb": max(r["peak_rss_mb"] for r in records),
        "peak_sum_mb": sum(r["peak_rss_mb"] for r in records),
        "cpu": sum(r["cpu_s"] for r in records),
        "startup": min(r.get("collected", r["start"]) for r in records) - started,
        "first_item": first - min(r.get("collected", r["start"]) for r in records),
        "items": last - first,
        "end": time.time() - last - (time.time() - started - wall),
        "stdout": proc.stdout,
    }
    shutil.rmtree(timing, ignore_errors=True)
    return out


def bm25s_floor(dataset: Path) -> dict[str, float]:
    """bm25s index + retrieve of the same tokens our pipeline makes (tokenizing apart)."""
    import bm25s

    from pytest_ragev.dataset import load_dataset
    from pytest_ragev.pipelines.builtin.chunking import chunk_corpus
    from pytest_ragev.pipelines.builtin.tokens import bm25_tokens

    data = load_dataset(dataset)
    started = time.perf_counter()
    chunks = chunk_corpus(data.corpus)
    docs = [bm25_tokens(c.text) for c in chunks]
    queries = [bm25_tokens(q.question) for q in data.pairs]
    tokenize = time.perf_counter() - started
    del chunks
    started = time.perf_counter()
    model = bm25s.BM25(backend="numpy")
    model.index(docs, show_progress=False)
    index = time.perf_counter() - started
    started = time.perf_counter()
    model.retrieve(queries, k=10, show_progress=False, n_threads=1, backend_selection="numpy")
    retrieve = time.perf_counter() - started
    return {"tokenize": tokenize, "index": index, "retrieve": retrieve}


def _cache_sizes(root: Path) -> dict[str, float]:
    ragev = root / ".pytest_cache" / "d" / "ragev"

    def size(folder: Path) -> float:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6

    out = {"answers_mb": size(ragev / "answers"), "kb_mb": size(ragev / "kb")}
    for name in ("baseline-builtin.json", "report.json", "report.html"):
        path = root / name
        out[name] = path.stat().st_size / 1e6 if path.exists() else 0.0
    return out


#: Every kind of run, in the order a repeat runs them.
RUN_KINDS = ("bare", "bare+cp", "constant", "cold", "rerun", "serial", "xdist", "bare-n2",
             "threads", "heavy", "heavy-n2")
#: What runs unless ``--runs`` says otherwise: the heavy pipeline's runs cost
#: questions x ``--heavy-ms`` each, and are asked for by name.
DEFAULT_RUNS = RUN_KINDS[:-2]


@contextlib.contextmanager
def _project_folder(project: Path | None) -> Iterator[Path]:
    """``project`` (made if missing, kept afterwards), else a temporary folder."""
    if project is None:
        with tempfile.TemporaryDirectory(prefix="ragev-scale-") as tmp:
            yield Path(tmp)
        return
    project.mkdir(parents=True, exist_ok=True)
    yield project.resolve()


def bench(questions: int, passages: int, repeats: int, xdist: bool,
          kinds: tuple[str, ...] = DEFAULT_RUNS, project: Path | None = None,
          heavy_ms: float = 10.0) -> None:
    dataset = make_dataset(questions, passages)
    print(f"\n== {questions} questions / {passages} passages", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {}
    floors: list[dict[str, float]] = []
    reports = ["--ragev-report", "report.json", "--ragev-html", "report.html"]
    iterations = heavy_iterations(heavy_ms) if {"heavy", "heavy-n2"} & set(kinds) else 0
    for _ in range(repeats):
        with _project_folder(project) as root:
            if not (root / "pytest.ini").exists():
                _write_project(root, dataset, questions)
                warm_up(root)
            if iterations:
                _write_heavy(root, dataset, iterations)
            # Interleaved: each repeat runs every kind once, in the same order.
            plan: list[tuple[str, list[str], Path | None]] = [
                ("bare", ["-p", "no:cacheprovider", "-p", "no:ragev", "bare"], None),
                # pytest's default: with its cache provider (which the plugin's caches
                # live in), in a cache folder of its own.
                ("bare+cp", ["-o", "cache_dir=.bare_cache", "-p", "no:ragev", "bare"], None),
                ("constant", ["-p", "no:cacheprovider", "--ragev-config", "../constant.toml"],
                 root / "constant"),
                ("cold", ["--ragev-config", "builtin.toml", *reports], None),
                ("rerun", ["--ragev-config", "builtin.toml", *reports], None),
            ]
            if xdist:
                plan += [("serial", ["--ragev-config", "nocache.toml", "-n", "0"], None),
                         ("xdist", ["--ragev-config", "nocache.toml", "-n", "2"], None),
                         # The floor of xdist itself: the bare items on two workers.
                         ("bare-n2", ["-p", "no:cacheprovider", "-p", "no:ragev", "-n", "2",
                                      "bare"], None),
                         # Two cores without xdist: pipeline calls in two threads.
                         ("threads", ["--ragev-config", "nocache.toml", "-n", "0",
                                      "--ragev-concurrency", "2"], None)]
            # A CPU-bound pipeline heavier than the built-in one, without and with xdist.
            heavy = ["-p", "no:cacheprovider", "--ragev-config", "../heavy.toml"]
            plan += [("heavy", [*heavy, "-n", "0"], root / "heavy")]
            if xdist:
                plan += [("heavy-n2", [*heavy, "-n", "2"], root / "heavy")]
            for name, args, cwd in plan:
                if name not in kinds:
                    continue
                runs.setdefault(name, []).append(run(root, name, args, cwd))
                print(f"  {name:8} {runs[name][-1]['wall']:7.1f} s", flush=True)
                if name == "rerun":
                    sizes = _cache_sizes(root)
            if all(name in kinds for name in ("bare", "cold")):
                floors.append(bm25s_floor(dataset))

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    print(f"{'run':9}{'wall s':>8}{'cpu s':>7}{'peak MB':>9}{'sum MB':>8}{'start s':>8}"
          f"{'1st item':>9}{'items s':>8}{'end s':>7}")
    for name in runs:
        print(f"{name:9}{med(name, 'wall'):8.1f}{med(name, 'cpu'):7.1f}{med(name, 'peak_mb'):9.0f}"
              f"{med(name, 'peak_sum_mb'):8.0f}{med(name, 'startup'):8.1f}"
              f"{med(name, 'first_item'):9.1f}{med(name, 'items'):8.1f}{med(name, 'end'):7.1f}")

    def xdist_lines() -> None:
        bare_cpu = med("bare", "cpu")
        serial, parallel = med("serial", "items"), med("xdist", "items")
        print(f"speed-up of the items, -n 2 / serial       {serial / parallel:5.2f}  "
              f"(target >= 1.7; walls {med('serial', 'wall'):.1f} / {med('xdist', 'wall'):.1f} s)")
        # What xdist costs by itself: its per-item CPU (controller and workers, over
        # the serial run's) on items that do nothing, and the speed-up that leaves.
        per_item_ms = (med("bare-n2", "cpu") - bare_cpu) / questions * 1000
        bare_speedup = med("bare", "items") / med("bare-n2", "items")
        print(f"  xdist's own cost: bare items -n 2 / serial {bare_speedup:5.2f}"
              f"  ({per_item_ms:.2f} ms CPU an item over the serial bare run)")
        # The most -n 2 can give on this machine: the serial run's CPU plus what xdist
        # costs by itself, spread over the cores with none ever idle (at most three
        # busy: two workers and the controller), and never above 2 (two workers). The
        # second figure spreads the -n 2 run's own CPU (xdist's and the plugin's share).
        cores = min(os.cpu_count() or 1, 3)
        serial_wall, serial_cpu = med("serial", "wall"), med("serial", "cpu")
        least_cpu = serial_cpu + med("bare-n2", "cpu") - bare_cpu

        def bound(cpu: float) -> float:
            return min(2.0, serial_wall / (cpu / cores))

        print(f"  ceiling on {cores} cores: serial wall / ((serial + xdist's own CPU) / {cores}) "
              f"{bound(least_cpu):5.2f}; with the -n 2 run's own CPU "
              f"{bound(med('xdist', 'cpu')):5.2f}; measured walls "
              f"{serial_wall / med('xdist', 'wall'):5.2f}")
        print(f"speed-up of the items, --ragev-concurrency 2 / serial "
              f"{serial / med('threads', 'items'):5.2f}  (two threads, no xdist)")

    def heavy_lines() -> None:
        if "heavy" not in runs or "heavy-n2" not in runs:
            return
        serial, parallel = med("heavy", "items"), med("heavy-n2", "items")
        per_question = med("heavy", "items") / questions * 1000
        print(f"speed-up of the items, -n 2 / serial, a CPU-bound pipeline of {heavy_ms:g} ms "
              f"({per_question:.1f} ms a serial item) {serial / parallel:5.2f}  (walls "
              f"{med('heavy', 'wall'):.1f} / {med('heavy-n2', 'wall'):.1f} s)")

    if any(name not in runs for name in ("bare", "bare+cp", "constant", "cold", "rerun")):
        # Only some runs: the ratios among those.
        if "bare" in runs:
            for name in ("constant", "rerun"):
                if name in runs:
                    print(f"ratio {name} / bare {med(name, 'wall') / med('bare', 'wall'):5.2f}"
                          f"  (cpu {med(name, 'cpu') / med('bare', 'cpu'):.2f})")
        if "constant" in runs and "rerun" in runs:
            print(f"ratio rerun / constant {med('rerun', 'wall') / med('constant', 'wall'):5.2f}")
        if all(name in runs for name in ("bare", "serial", "xdist", "bare-n2", "threads")):
            xdist_lines()
        heavy_lines()
        return
    floor = {key: statistics.median(f[key] for f in floors) for key in floors[0]}
    print(f"bm25s floor: tokenize {floor['tokenize']:.1f} s (not in the floor), index "
          f"{floor['index']:.1f} s, retrieve {floor['retrieve']:.1f} s")
    print(f"sizes: answer cache {sizes['answers_mb']:.1f} MB, KB cache {sizes['kb_mb']:.1f} MB, "
          f"baseline {sizes['baseline-builtin.json']:.1f} MB, report {sizes['report.json']:.1f} "
          f"MB, html {sizes['report.html']:.1f} MB")
    bare = med("bare", "wall")
    builtin_floor = bare + floor["index"] + floor["retrieve"]
    bare_cpu = med("bare", "cpu")
    print(f"ratio constant / bare                      {med('constant', 'wall') / bare:5.2f}"
          f"  (target <= 1.5; cpu {med('constant', 'cpu') / bare_cpu:.2f})")
    print(f"ratio cold builtin / (bare + bm25s)        {med('cold', 'wall') / builtin_floor:5.2f}"
          "  (target <= 1.5)")
    print(f"ratio rerun (all cached) / bare            {med('rerun', 'wall') / bare:5.2f}"
          f"  (target <= 1.2; cpu {med('rerun', 'cpu') / bare_cpu:.2f}; against bare+cp "
          f"{med('rerun', 'wall') / med('bare+cp', 'wall'):.2f}, cpu "
          f"{med('rerun', 'cpu') / med('bare+cp', 'cpu'):.2f})")
    # A cached rerun does all a constant-answer run does (records, gate) and reads its
    # answers and text metrics from the caches, and writes its JSON and HTML reports:
    # what those add is this ratio; the rest is the plugin's own overhead, which
    # "constant / bare" shows.
    cache_share = med("rerun", "wall") / med("constant", "wall")
    print(f"  caches and reports: rerun / constant     {cache_share:5.2f}")
    if xdist:
        xdist_lines()
    heavy_lines()
    print(f"peak RSS cold (largest process)            {med('cold', 'peak_mb'):5.0f} MB"
          f"  (target <= {1000 if passages <= 300_000 else 2000} MB)")


# ------------------------------------------------------------------ end of a run


def _answers(dataset: Any, changed: float, seed: int) -> list[Any]:
    """One :class:`Answer` per question as the built-in pipeline would return it: ten
    passage ids (the target at a rank that varies by question, or missed) and the
    reference's first words; ``changed`` of the questions answered differently."""
    import random

    from pytest_ragev import Answer

    rng = random.Random(seed)
    answers = []
    passages = max(dataset.corpus) if dataset.corpus else 1
    for pair in dataset.pairs:
        local = random.Random(pair.qid)
        rank = local.randrange(14)  # 10..13: the target is missed
        if rng.random() < changed:
            rank = local.randrange(14)
        ids = [local.randrange(1, passages + 1) for _ in range(10)]
        if rank < 10 and pair.pids:
            ids[rank] = pair.pids[0]
        words = (pair.answer or "").split()
        keep = len(words) - (rank % 4)
        answers.append(Answer(retrieved=ids, text=" ".join(words[:max(keep, 1)])))
    return answers


def end_of_run(questions: int, passages: int, repeats: int) -> list[dict[str, float]]:
    """The end of a run of ``questions`` answers, in this process, phase by phase.

    What pytest hands the plugin at the end of the test loop is the list of records;
    this builds the same records (``make_record`` on synthetic answers, as the items
    do) and times what the plugin does from there: ``evaluate`` (scoring, gate,
    baseline write) and the report writes (JSON, Markdown, HTML), with the callback
    the plugin prints its phase lines from. It does not run pytest items, so it
    measures the end of the run only. Three runs: the first (no baseline: written),
    an identical rerun (compared, every metric unchanged) and a rerun with 3% of the
    answers changed (compared, resampled). The text metrics are kept as the plugin
    keeps them with its answer cache on: the first run scores and stores every pair,
    the reruns read them back (the changed answers' are scored and stored).
    """
    import resource

    from pytest_ragev.config import RunOptions, load_config
    from pytest_ragev.core.attribution import PassageIndex
    from pytest_ragev.core.gcpause import paused_gc
    from pytest_ragev.core.io import atomic_write_json, atomic_write_text
    from pytest_ragev.core.record import make_record
    from pytest_ragev.dataset import load_dataset
    from pytest_ragev.evaluation import (
        EvalInputs,
        RunFacts,
        RunPlan,
        TextScoreMemo,
        evaluate,
        run_params,
    )
    from pytest_ragev.pipelines.answer_cache import AnswerCache
    from pytest_ragev.report import (
        REPORT_RECORDS,
        final_report,
        render_html,
        render_markdown,
    )

    dataset = load_dataset(make_dataset(questions, passages), "scale")
    index = PassageIndex(dataset.corpus)
    results = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="ragev-endrun-") as tmp:
            root = Path(tmp)
            (root / "ragev.toml").write_text(
                f'[dataset]\npath = "{make_dataset(questions, passages)}"\nid = "scale"\n\n'
                '[baseline]\npath = "baseline.json"\n', encoding="utf-8")
            plan = RunPlan.build(load_config(root / "ragev.toml"), RunOptions())
            params = run_params(plan, dataset, {"name": "builtin", "top_k": 10}, None)
            # As the plugin keeps them in its answer cache: the first run's text metrics
            # are read back by the reruns (and the changed answers' are scored and kept).
            memo = TextScoreMemo(AnswerCache(root / "answers"), profile=plan.profile,
                                 tokenizer=plan.tokenizer)
            for scenario, changed in (("first", 0.0), ("identical", 0.0), ("changed", 0.03)):
                answers = _answers(dataset, changed, seed=1)
                records = [make_record(pair, answer, index=index, variant=None)
                           for pair, answer in zip(dataset.pairs, answers, strict=True)]
                inputs = EvalInputs(plan=plan, dataset=dataset, records=records,
                                    facts=RunFacts(total=len(records), finished=len(records),
                                                   rootdir=str(root)),
                                    params={None: params}, memo=memo)
                times: dict[str, float] = {}
                current: list[Any] = []

                def phase(name: str, times: dict[str, float] = times,
                          current: list[Any] = current) -> None:
                    now = time.perf_counter()
                    if current:
                        times[current[0]] = times.get(current[0], 0.0) + now - current[1]
                    current[:] = [name.split(" ")[0], now]

                started = time.perf_counter()
                # As plugin.finish.Finisher does it: the collector paused, the same calls.
                with paused_gc():
                    outcome = evaluate(inputs, phase=phase)
                    phase("json report")
                    atomic_write_json(root / "report.json",
                                      final_report(outcome, dataset_id="scale", params=params),
                                      records=REPORT_RECORDS)
                    phase("markdown")
                    atomic_write_text(root / "report.md", render_markdown(outcome))
                    phase("html")
                    atomic_write_text(root / "report.html", render_html(outcome))
                    phase("end")
                total = time.perf_counter() - started
                sizes = {f"{name}_mb": (root / name).stat().st_size / 1e6
                         for name in ("baseline.json", "report.json", "report.html")}
                if scenario == "first":
                    # The same snapshot compressed, as a *.json.gz baseline path writes it.
                    from pytest_ragev.gate import load_snapshot, write_snapshot

                    written = load_snapshot(root / "baseline.json")
                    zipped = time.perf_counter()
                    write_snapshot(root / "baseline.json.gz", written)
                    sizes["gz_write_s"] = time.perf_counter() - zipped
                    sizes["baseline.json.gz_mb"] = (root / "baseline.json.gz").stat().st_size / 1e6
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                row = {"scenario": scenario, "total": total, **times, **sizes, "peak_mb": peak}
                results.append(row)
                print(f"  {scenario:9} {total:6.2f} s  " + "  ".join(
                    f"{k} {v:.2f}" for k, v in times.items()) + "  " + "  ".join(
                    f"{k} {v:.1f}" for k, v in sizes.items()), flush=True)
                if scenario == "first":
                    # What the first run wrote is the baseline the reruns are gated on.
                    assert (root / "baseline.json").exists()
    return results


def end_of_run_table(sizes: list[tuple[int, int]], repeats: int) -> None:
    """Medians per size and scenario: seconds per phase and file sizes."""
    keys = ["total", "scoring", "gate", "baseline", "verdict", "json", "markdown", "html",
            "baseline.json_mb", "baseline.json.gz_mb", "gz_write_s", "report.json_mb",
            "report.html_mb", "peak_mb"]
    table = []
    for questions, passages in sizes:
        print(f"\n== end of run, {questions} questions / {passages} passages (in-process)",
              flush=True)
        rows = end_of_run(questions, passages, repeats)
        for scenario in ("first", "identical", "changed"):
            mine = [r for r in rows if r["scenario"] == scenario]
            med = {k: statistics.median(float(r.get(k, 0.0)) for r in mine) for k in keys}
            table.append((questions, scenario, med))
    short = {"baseline.json_mb": "base MB", "baseline.json.gz_mb": "gz MB",
             "gz_write_s": "gz s", "report.json_mb": "json MB", "report.html_mb": "html MB",
             "peak_mb": "RSS MB"}
    print("\nquestions scenario   " + " ".join(f"{short.get(k, k):>9}" for k in keys))
    for questions, scenario, med in table:
        print(f"{questions:9} {scenario:10} " + " ".join(f"{med[k]:9.2f}" for k in keys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["3000x30000", "10000x100000"],
                        help="QUESTIONSxPASSAGES, e.g. 30000x300000 100000x1000000")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-xdist", action="store_true", help="skip the -n 2 runs")
    parser.add_argument("--runs", nargs="+", choices=RUN_KINDS, default=list(DEFAULT_RUNS),
                        metavar="NAME", help=f"run only these kinds ({', '.join(RUN_KINDS)}; "
                                             "the default: all but heavy and heavy-n2)")
    parser.add_argument("--heavy-ms", type=float, default=10.0, metavar="MS",
                        help="CPU a question of the heavy pipeline costs (default 10)")
    parser.add_argument("--project", type=Path, metavar="DIR",
                        help="keep the project (and its caches) in DIR: a cold run there "
                             "fills the caches later --runs rerun invocations read")
    parser.add_argument("--end-of-run", action="store_true",
                        help="time only the end of a run, in this process, on synthetic "
                             "records (no pytest items): scoring, gate, baseline, reports")
    args = parser.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    if args.end_of_run:
        end_of_run_table([tuple(int(p) for p in size.lower().split("x"))  # type: ignore[misc]
                          for size in args.sizes], args.repeats)
        return
    for size in args.sizes:
        questions, passages = (int(part) for part in size.lower().split("x"))
        bench(questions, passages, args.repeats, not args.no_xdist, tuple(args.runs),
              args.project, args.heavy_ms)


if __name__ == "__main__":
    main()
