"""Sharded runs: merging the partial reports of a 100,000-question run, and its gate (#30).

    .venv/bin/python benchmarks/bench_shards.py [--questions 100000] [--passages 100000]
        [--shards 10] [--repeats 3]

A synthetic dataset of ``--questions`` questions (benchmarks/.data/, written once by
:mod:`bench_scale`) is answered once, as the built-in pipeline would
(``bench_scale._answers``): the records every item makes. Then, in this process:

- ``unsharded end``: the end of the unsharded run gated against its baseline, as
  ``plugin.finish`` does it (``evaluate`` with the collector paused, then the JSON
  report written): the run's answers with 3% of them changed, compared, resampled;
- the ``--shards`` partial reports of the same run (each shard's records through
  ``evaluate`` with its ``ShardPart``, written as the plugin writes them);
- ``merge``: ``ragev report merge SHARD.json... -o RUN.json`` (in-process ``cli.main``):
  read the partial reports, check them, rebuild and end the run, write its report;
- ``merge --gate``: the same, gated against the baseline: the time CI's verdict job
  spends, to set against ``unsharded end``.

It checks the merged reports equal the unsharded one (samples, means, slices, the comparison),
then prints the median of ``--repeats`` for each and the ratio. Targets (#30): merge
<= 10 s for 10 shards of 100,000 questions; ``merge --gate`` about the unsharded end.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale


def _without_identity(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["data"]
    data["task"] = {k: v for k, v in data["task"].items()
                    if k not in ("id", "start_time", "duration_s")}
    return data


def bench(questions: int, passages: int, shards: int, repeats: int) -> dict[str, list[float]]:
    from pytest_ragev import cli
    from pytest_ragev.config import RunOptions, load_config
    from pytest_ragev.core.attribution import PassageIndex
    from pytest_ragev.core.gcpause import paused_gc
    from pytest_ragev.core.io import atomic_write_json
    from pytest_ragev.core.record import make_record
    from pytest_ragev.core.shard import ShardSpec, owned
    from pytest_ragev.core.version import __version__
    from pytest_ragev.dataset import load_dataset
    from pytest_ragev.evaluation import (
        EvalInputs,
        RunFacts,
        RunPlan,
        ShardPart,
        evaluate,
        run_params,
    )
    from pytest_ragev.report import REPORT_RECORDS, final_report

    folder = bench_scale.make_dataset(questions, passages)
    dataset = load_dataset(folder, "scale")
    index = PassageIndex(dataset.corpus)
    timings: dict[str, list[float]] = {"unsharded end": [], "merge": [], "merge --gate": [],
                                       "shard end (mean of shards)": []}
    with tempfile.TemporaryDirectory(prefix="ragev-shards-") as tmp:
        root = Path(tmp)
        config_path = root / "ragev.toml"
        config_path.write_text(f'[dataset]\npath = "{folder}"\nid = "scale"\n\n'
                               '[baseline]\npath = "baseline.json"\n', encoding="utf-8")
        config = load_config(config_path)

        def records_of(changed: float) -> list[Any]:
            answers = bench_scale._answers(dataset, changed, seed=1)
            return [make_record(pair, answer, index=index, variant=None)
                    for pair, answer in zip(dataset.pairs, answers, strict=True)]

        def end(records: list[Any], options: RunOptions, report: Path,
                shard: ShardPart | None = None) -> float:
            plan = RunPlan.build(config, options)
            params = run_params(plan, dataset, {"name": "builtin", "top_k": 10}, None)
            inputs = EvalInputs(plan=plan, dataset=dataset, records=records,
                                facts=RunFacts(total=len(records), finished=len(records),
                                               rootdir=str(root)),
                                params={None: params}, shard=shard)
            started = time.perf_counter()
            with paused_gc():
                outcome = evaluate(inputs)
                atomic_write_json(report, final_report(outcome, dataset_id="scale",
                                                       params=params),
                                  records=REPORT_RECORDS)
            return time.perf_counter() - started

        print(f"  answering {questions} questions (synthetic, once)", flush=True)
        end(records_of(0.0), RunOptions(update_baseline=True), root / "first.json")
        current = records_of(0.03)
        qids = [pair.qid for pair in dataset.pairs]
        print("  writing the partial reports", flush=True)
        paths = []
        shard_times = []
        for k in range(1, shards + 1):
            spec = ShardSpec(k, shards)
            mine = set(owned(qids, spec))
            part = ShardPart(spec=spec, questions=tuple(sorted(mine)),
                             dataset_questions=len(qids), plugin_version=__version__,
                             config=str(config_path))
            path = root / f"shard-{k}.json"
            shard_times.append(end([r for r in current if r.qid in mine],
                                   RunOptions(shard=spec, report_json=path), path, part))
            paths.append(str(path))
        timings["shard end (mean of shards)"].append(statistics.fmean(shard_times))
        verdicts: list[bool] = []
        for repeat in range(repeats):
            timings["unsharded end"].append(end(current, RunOptions(), root / "whole.json"))
            for name, extra in (("merge", []), ("merge --gate", ["--gate"])):
                started = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    status = cli.main(["report", "merge", *paths, "-o",
                                       str(root / "merged.json"), "--config",
                                       str(config_path), *extra])
                timings[name].append(time.perf_counter() - started)
                merged, whole = (_without_identity(root / "merged.json"),
                                 _without_identity(root / "whole.json"))
                # Plain: exit 0; gated: the unsharded run's verdict (3% changed may fail).
                expected = 1 if extra and not whole["verdict"]["passed"] else 0
                assert status == expected, f"ragev report merge {' '.join(extra)} exited {status}"
                assert merged["samples"] == whole["samples"]
                assert merged["metric"] == whole["metric"]
                assert merged.get("slices") == whole.get("slices")
                if extra:
                    assert merged["baseline"] == whole["baseline"]
                    assert merged["verdict"] == whole["verdict"]
            verdicts.append(bool(_without_identity(root / "whole.json")["verdict"]["passed"]))
            print(f"  repeat {repeat + 1} (verdict {'passed' if verdicts[-1] else 'failed'}, "
                  "the same merged): " + "  ".join(
                f"{name} {values[-1]:.2f} s" for name, values in timings.items()), flush=True)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    timings = bench(args.questions, args.passages, args.shards, args.repeats)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    print(f"\n{args.shards} shards of {args.questions} questions, median of "
          f"{args.repeats} repeats:")
    for name, value in medians.items():
        print(f"  {name:28} {value:6.2f} s")
    print(f"  merge --gate / unsharded end: "
          f"{medians['merge --gate'] / medians['unsharded end']:.2f}x  "
          f"(merge target <= 10 s: {'met' if medians['merge'] <= 10 else 'MISSED'})")


if __name__ == "__main__":
    main()
