"""The verdict store: every judgement a run made, kept so that a rerun replays it.

A judged metric's value is a model's answer, and a model answers a little differently
each time: re-judging every run makes a CI verdict flip on nothing. So every verdict is
kept under a key of everything it depends on (the judge's model and endpoint, the
prompt's version, and the texts the prompt shows: question, answer, reference answer,
retrieved passages; :func:`verdict_key`), and a run with the same inputs replays it
without a call. Only what changed is judged again.

The store is a text file that ``git diff`` reads: JSON lines, one verdict per line,
sorted by key, so a committed store (``[judge] store``) shows in review exactly which
verdicts a change made anew::

    {"key": "6f1c…", "metric": "correctness", "score": 0.5, "reason": "…", "judge": "…",
     "prompt": "correctness/1", "prompt_tokens": 212, "completion_tokens": 31,
     "question": "Wie hoch ist der Eiffelturm?"}

Writes are atomic (a temporary file, then a rename); a line that is not a verdict (a
merge conflict, a hand edit) is a one-line error naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.io import atomic_write_text

#: Tags every key, so that a new way of making keys never meets an old one.
_KEY_TAG = "pytest-ragev verdict v1"
#: Characters of a question a store line shows (for a reader; not part of the key).
_QUESTION_CHARS = 100


def verdict_key(*, judge: Mapping[str, Any], prompt: str, texts: Mapping[str, Any]) -> str:
    """The store key of one verdict: sha256 (hex) over the canonical JSON of the judge's
    identity (model, endpoint and the knobs that change its answers), the prompt's
    version and the texts the prompt shows (only those: a faithfulness verdict does not
    depend on the reference answer, so editing it judges nothing again)."""
    document = {"tag": _KEY_TAG, "judge": dict(judge), "prompt": prompt, "texts": dict(texts)}
    canonical = json.dumps(document, sort_keys=True, ensure_ascii=False,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class StoredVerdict:
    """One line of the store."""

    key: str
    metric: str
    score: float
    reason: str
    judge: str
    prompt: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    question: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key, "metric": self.metric, "score": self.score, "reason": self.reason,
            "judge": self.judge, "prompt": self.prompt, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "question": " ".join(self.question.split())[:_QUESTION_CHARS],
        }


def _read_line(data: Any, where: str) -> StoredVerdict:
    fix = ("restore the file from version control, or delete the line (a verdict that "
           "is missing is judged again)")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} is not a JSON object; {fix}")
    try:
        score = data["score"]
        if isinstance(score, bool) or not isinstance(score, int | float) or not (
                0.0 <= float(score) <= 1.0):
            raise ValueError(f"score {score!r} is not a number in [0, 1]")
        key = data["key"]
        if not isinstance(key, str) or len(key) != 64:
            raise ValueError(f"key {key!r} is not a sha256 hex digest")
        return StoredVerdict(
            key=key, metric=str(data["metric"]), score=float(score),
            reason=str(data.get("reason", "")), judge=str(data.get("judge", "")),
            prompt=str(data.get("prompt", "")),
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            question=str(data.get("question", "")),
        )
    except KeyError as missing:
        raise ConfigError(f"{where} has no {missing.args[0]!r}; {fix}") from None
    except (TypeError, ValueError) as problem:
        raise ConfigError(f"{where}: {problem}; {fix}") from None


class VerdictStore:
    """The verdicts of one store file, read once; thread-safe.

    :meth:`get` looks a verdict up (and remembers the key as used); :meth:`add` keeps
    one made now. :meth:`write` writes the file again, sorted by key, with the verdicts
    made or replayed this run and, unless ``prune``, every other one it held.
    """

    def __init__(self, path: Path | None, entries: Iterable[StoredVerdict] = ()) -> None:
        self.path = path
        self._entries = {entry.key: entry for entry in entries}
        self._added: dict[str, StoredVerdict] = {}
        self._used: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path) -> VerdictStore:
        """Read ``path`` (a missing file is an empty store); :class:`ConfigError` (one
        line naming the file and line) when it cannot be read or holds a damaged line."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path)
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"{path}: the verdict store cannot be read ({error}); fix its "
                              "permissions or encoding, or remove it to judge again") from None
        entries = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path} line {number}"
            try:
                data = json.loads(line)
            except ValueError:
                raise ConfigError(
                    f"{where} is not JSON (a merge conflict?); restore the file from version "
                    "control, or delete the line (a verdict that is missing is judged again)"
                ) from None
            entries.append(_read_line(data, where))
        return cls(path, entries)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> StoredVerdict | None:
        """The stored verdict under ``key``, if any."""
        with self._lock:
            entry = self._added.get(key) or self._entries.get(key)
            if entry is not None:
                self._used.add(key)
            return entry

    def add(self, entry: StoredVerdict) -> None:
        """Keep a verdict made now (it replaces one under the same key)."""
        with self._lock:
            self._added[entry.key] = entry
            self._used.add(entry.key)

    def merged(self, entries: Sequence[StoredVerdict], *, prune: bool) -> list[StoredVerdict]:
        """The file's verdicts after this run: ``entries`` (made or replayed by the run,
        on any process) over the stored ones; with ``prune`` only ``entries``."""
        with self._lock:
            kept = {} if prune else dict(self._entries)
        kept.update({entry.key: entry for entry in entries})
        return [kept[key] for key in sorted(kept)]

    def changed_by(self, entries: Sequence[StoredVerdict], *, prune: bool) -> bool:
        """Whether writing ``entries`` would change the file."""
        merged = self.merged(entries, prune=prune)
        with self._lock:
            return [e.to_json() for e in merged] != [
                self._entries[k].to_json() for k in sorted(self._entries)]


def write_store(path: Path, entries: Sequence[StoredVerdict]) -> None:
    """Write the store file atomically: one verdict per line, sorted by key."""
    text = "".join(json.dumps(entry.to_json(), ensure_ascii=False, sort_keys=False) + "\n"
                   for entry in sorted(entries, key=lambda e: e.key))
    os.makedirs(path.parent, exist_ok=True)
    atomic_write_text(path, text)
