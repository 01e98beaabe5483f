"""``ragev cache merge``: the answer caches of a sharded run's jobs made one store.

Each CI job of a sharded run (``--ragev-shard K/N``) uploads its answer cache folder
(``.pytest_cache/d/ragev/answers``) as an artifact; the merge job downloads them and
merges them into one folder, which the next run restores (docs/sharding.md). Exit 0
when merged, 2 when a source is not an answer cache (one line naming it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_ragev.cli import CommandAdder
from pytest_ragev.pipelines.cache_merge import merge_caches

#: Where pytest keeps a run's answer cache, relative to the rootdir.
DEFAULT_TARGET = Path(".pytest_cache") / "d" / "ragev" / "answers"


def _merge(args: argparse.Namespace) -> int:
    target = Path(args.output)
    merged = merge_caches([Path(source) for source in args.sources], target)
    print(f"ragev: merged {len(args.sources)} answer caches into {target}: {merged.line}")
    return 0


def configure(commands: CommandAdder) -> None:
    """Add ``ragev cache merge``."""
    merge = commands.add(
        "merge", handler=_merge,
        help="merge the answer caches of several jobs (a sharded run's) into one",
        description="Add every sound row of the answer caches SOURCE... (folders a run "
        "cached its answers in, or their answers.sqlite files) to the cache in -o "
        "(default: this project's .pytest_cache/d/ragev/answers): the union by the cache's "
        "key, damaged rows left out. Exit 0 when merged, 2 when a source is not an answer "
        "cache.",
    )
    merge.add_argument("sources", metavar="SOURCE", nargs="+",
                       help="an answer cache folder (or its answers.sqlite)")
    merge.add_argument("-o", "--output", metavar="FOLDER", default=str(DEFAULT_TARGET),
                       help=f"the cache folder to merge into (default: {DEFAULT_TARGET})")
