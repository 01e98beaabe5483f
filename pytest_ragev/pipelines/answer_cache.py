"""Answers cached on disk per (dataset fingerprint, settings hash, question id).

One JSON file per answer under ``directory/<key[:2]>/<key>.json``, written atomically:
readers see a whole entry or none, and two processes writing the same key leave one
of the two (identical) entries. Anything unreadable is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragev.core.io import atomic_write_text
from pytest_ragev.core.types import Answer, Chunk, ChunkLike, Retrieved

#: Bumped when the entry layout changes; entries of another format are misses.
FORMAT = 1


def answer_cache_key(fingerprint: str, settings_key: str, qid: int) -> str:
    """The sha256 hex key of one answer; changes when any of the three parts changes."""
    canonical = json.dumps([FORMAT, fingerprint, settings_key, int(qid)], ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class AnswerCache:
    """A folder of cached answers; safe to share between threads and processes."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"AnswerCache({str(self.directory)!r})"

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"answer cache key {key!r} is not a hex digest; use answer_cache_key")
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Answer | None:
        """The cached answer for ``key``, or ``None`` (missing, corrupt or unreadable)."""
        try:
            raw = self.path(key).read_text(encoding="utf-8")
            entry = json.loads(raw)
            return _decode(entry, key)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def put(self, key: str, answer: Answer) -> None:
        """Store ``answer``; ``TypeError`` when its meta or retrieved items are not JSON-safe."""
        if not isinstance(answer.text, str):
            raise TypeError(f"Answer.text is {type(answer.text).__name__}, not str")
        entry = {
            "format": FORMAT,
            "key": key,
            "text": answer.text,
            "retrieved": [_encode_item(item) for item in answer.retrieved],
            "meta": _json_safe(dict(answer.meta), "meta"),
        }
        atomic_write_text(self.path(key), json.dumps(entry, ensure_ascii=False) + "\n")


def _encode_item(item: Retrieved) -> Any:
    # ints and strs stay themselves (JSON keeps them apart); chunks become objects.
    if isinstance(item, bool):
        raise TypeError("a retrieved item is a bool; use passage ids (int), texts or chunks")
    if isinstance(item, int | str):
        return item
    if isinstance(item, ChunkLike):
        passage_id = getattr(item, "passage_id", None)
        score = getattr(item, "score", None)
        if passage_id is not None and (isinstance(passage_id, bool)
                                       or not isinstance(passage_id, int)):
            raise TypeError(f"chunk passage_id {passage_id!r} is not an int")
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise TypeError(f"chunk score {score!r} is not a number")
        return {"text": str(item.text), "passage_id": passage_id,
                "score": None if score is None else _number(float(score))}
    raise TypeError(f"cannot cache a retrieved item of type {type(item).__name__}")


def _number(value: float) -> Any:
    # JSON has no NaN/inf: keep them as tagged strings so they come back as floats.
    return value if math.isfinite(value) else {"float": repr(value)}


def _decode_number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return float(value["float"])
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("bad score")
    return float(value)


def _decode(entry: Any, key: str) -> Answer | None:
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
        return None
    text = entry["text"]
    meta = entry["meta"]
    items = entry["retrieved"]
    if not isinstance(text, str) or not isinstance(meta, dict) or not isinstance(items, list):
        return None
    retrieved: list[Retrieved] = []
    for item in items:
        if isinstance(item, bool):
            return None
        if isinstance(item, int | str):
            retrieved.append(item)
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            passage_id = item.get("passage_id")
            if passage_id is not None and (isinstance(passage_id, bool)
                                           or not isinstance(passage_id, int)):
                return None
            retrieved.append(Chunk(text=item["text"], passage_id=passage_id,
                                   score=_decode_number(item.get("score"))))
        else:
            return None
    return Answer(retrieved=retrieved, text=text, meta=meta)


def _json_safe(value: Any, where: str) -> Any:
    """``value`` if it survives a JSON round trip unchanged; ``TypeError`` naming the spot."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"Answer.{where} = {value!r} is not JSON-safe (NaN/inf); use None")
        return value
    if isinstance(value, list):
        return [_json_safe(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                raise TypeError(f"Answer.{where} has the non-string key {name!r}; JSON keys "
                                "are strings")
            out[name] = _json_safe(item, f"{where}[{name!r}]")
        return out
    raise TypeError(
        f"Answer.{where} holds a {type(value).__name__} ({str(value)[:40]!r}), which is not "
        "JSON-safe; store str, int, float, bool, None, lists and dicts"
    )
