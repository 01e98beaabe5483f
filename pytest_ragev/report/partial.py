"""The ``data.shard`` block of a partial report (``--ragev-shard K/N``), read back.

:func:`read_shard_block` turns the block :func:`~pytest_ragev.report.json.shard_json`
writes into the :class:`~pytest_ragev.evaluation.ShardPart` it was made from and the
facts the shard's shell saw; every problem is one line through the file's reader.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_ragev.core.checked import Checked, kind
from pytest_ragev.core.shard import ShardSpec
from pytest_ragev.evaluation import RunFacts, ShardPart

_FIX = "is not what a run with --ragev-shard writes; pass its partial report unedited"


def _custom_metric(raw: Any, where: str, read: Checked) -> dict[str, object]:
    entry = read.mapping(raw, where)
    bounds = read.listing(entry.get("bounds", [0.0, 1.0]), f"{where}.bounds")
    direction = entry.get("direction", "higher")
    metric_kind = entry.get("kind", "all")
    if (len(bounds) != 2 or direction not in ("higher", "lower")
            or metric_kind not in ("retrieval", "generation", "all")):
        raise read.fail(where, f"(a custom metric's name, direction, kind, bounds) {_FIX}")
    return {
        "name": read.string(read.key(entry, "name", where), f"{where}.name"),
        "direction": direction,
        "kind": metric_kind,
        "bounds": [read.optional_number(bounds[0], f"{where}.bounds[0]"),
                   read.optional_number(bounds[1], f"{where}.bounds[1]")],
    }


def read_shard_block(raw: Any, read: Checked, facts: RunFacts) -> tuple[ShardPart, RunFacts]:
    """The share a partial report records and its shell's ``facts`` (``facts``: the
    report's task, completed with the counts and warnings the block keeps)."""
    block = read.mapping(raw, "data.shard")
    index = read.count(read.key(block, "index", "data.shard"), "data.shard.index")
    total = read.count(read.key(block, "total", "data.shard"), "data.shard.total")
    try:
        spec = ShardSpec(index, total)
    except ValueError:
        raise read.fail("data.shard", f"says shard {index} of {total}, which {_FIX}") from None
    customs = [_custom_metric(item, f"data.shard.custom_metrics[{n}]", read)
               for n, item in enumerate(read.listing(block.get("custom_metrics", []),
                                                     "data.shard.custom_metrics"))]
    configurations: list[str | None] = []
    for n, name in enumerate(read.listing(block.get("configurations", [None]),
                                          "data.shard.configurations")):
        if name is not None and not isinstance(name, str):
            raise read.fail(f"data.shard.configurations[{n}]",
                            f"is {kind(name)}, not a variant name (null: the base one)")
        configurations.append(name)
    part = ShardPart(
        spec=spec,
        questions=tuple(read.integers(read.key(block, "questions", "data.shard"),
                                      "data.shard.questions")),
        dataset_questions=read.count(read.key(block, "dataset_questions", "data.shard"),
                                     "data.shard.dataset_questions"),
        assignment=read.string(block.get("assignment", "hash"), "data.shard.assignment"),
        configurations=tuple(configurations),
        plugin_version=read.string(block.get("plugin_version", ""),
                                   "data.shard.plugin_version"),
        config=read.string(block.get("config", ""), "data.shard.config"),
        custom_metrics=tuple(customs),
    )
    run = read.mapping(block.get("run", {}), "data.shard.run")
    interrupted = run.get("interrupted")
    if interrupted is not None and not isinstance(interrupted, str):
        raise read.fail("data.shard.run.interrupted", f"is {kind(interrupted)}, not a line")
    shell = replace(
        facts,
        interrupted=interrupted,
        duplicates=read.count(run.get("duplicates", 0), "data.shard.run.duplicates"),
        cache_hits=read.count(run.get("cache_hits", 0), "data.shard.run.cache_hits"),
        cache_misses=read.count(run.get("cache_misses", 0), "data.shard.run.cache_misses"),
        warnings=tuple(read.strings(run.get("warnings", []), "data.shard.run.warnings")),
    )
    return part, shell
