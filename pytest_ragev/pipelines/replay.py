"""``[pipeline] name = "replay"``: answers read from an answers file, not computed.

The file (:mod:`pytest_ragev.pipelines.answers`) holds what a pipeline answered
somewhere else: a Ray Data or Dask job, Spark, a provider's batch API, or another run's
``--ragev-answers-out``. The plugin scores, reports and gates these answers as any
pipeline's: retrieved texts are placed on passages by the same rules, and a question the
file has no row for fails with a line naming it. Rows for questions or configurations
the run does not have are a usage error before any question runs.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Collection
from pathlib import Path
from typing import Any

from pytest_ragev.core.errors import PipelineError
from pytest_ragev.core.paths import portable_path
from pytest_ragev.core.tables import Table
from pytest_ragev.core.types import Answer, PipelineSettings, QAPair
from pytest_ragev.pipelines.answers import AnswersFile

#: The keys of the ``[pipeline]`` table the replay pipeline reads.
REPLAY_KEYS = ("name", "answers")
#: How many questions an error line names before "and N more".
_NAMED = 5


class MissingAnswer(PipelineError):
    """The answers file has no row for a question the run asks."""


@functools.lru_cache(maxsize=4)
def _load(path: Path, stamp: tuple[int, int], source: str) -> tuple[AnswersFile, str]:
    """The file read and its sha256 (once per file version: every configuration that
    replays one file shares it)."""
    del stamp  # part of the cache key only: a rewritten file is read again
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return AnswersFile.load(path, source=source), digest.hexdigest()


def _stamp(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError:
        return (0, 0)  # AnswersFile.load names the problem
    return (info.st_mtime_ns, info.st_size)


class ReplayPipeline:
    """Answers each question with its row of an answers file (``[pipeline] answers``)."""

    def __init__(self, settings: PipelineSettings, *, source: Path | str) -> None:
        table = Table(settings.options, where="[pipeline]", source=source)
        table.check_keys(REPLAY_KEYS)
        answers = table.string("answers", required=True)
        assert answers is not None  # required
        self.settings = settings
        self.variant = settings.variant
        self.path = Path(settings.base_dir) / answers
        self._shown = portable_path(self.path, Path(settings.base_dir))
        self.file, self.digest = _load(self.path, _stamp(self.path), str(source))

    def snapshot(self) -> dict[str, Any]:
        """The file replayed and its digest: a baseline records which answers it judged."""
        return {"answers": self._shown, "answers_sha256": self.digest}

    def kb_key(self) -> str | None:
        """The answers were made elsewhere: no knowledge base."""
        return None

    def answer_key(self) -> str:
        """The file's digest: its answers are all the pipeline gives."""
        return self.digest

    def answer(self, case: QAPair, kb: Any = None) -> Answer:
        """The file's answer to ``case`` for this configuration; :class:`MissingAnswer`
        when it has none."""
        key = (self.variant if self.file.by_variant else None, case.qid)
        found = self.file.answers.get(key)
        if found is None:
            of = f" for variant {self.variant!r}" if self.file.by_variant and self.variant else ""
            raise MissingAnswer(
                f"{self._shown} has no row for q{case.qid}{of}; add its answer to the file, "
                "or deselect the question"
            )
        return found

    def check_questions(
        self, qids: Collection[int], configurations: Collection[str | None]
    ) -> str | None:
        """The one-line problem when the file has rows the run has no question or
        configuration for (extra rows), else ``None``."""
        extra = self.file.extra(qids, configurations)
        if not extra:
            return None
        named = ", ".join(f"q{qid}" + (f" [{variant}]" if variant else "")
                          for variant, qid in extra[:_NAMED])
        more = f" and {len(extra) - _NAMED} more" if len(extra) > _NAMED else ""
        return (f"{self._shown} has {len(extra)} row(s) for questions or variants the run "
                f"does not have ({named}{more}); remove them, or point [pipeline] answers at "
                "the file made for this dataset and config")

    def close(self) -> None:
        """Nothing to release."""
