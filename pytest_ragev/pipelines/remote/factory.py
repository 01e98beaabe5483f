"""``[pipeline] name = "module:callable"``: a pipeline built by the user's own factory.

The factory is called once per configuration with the :class:`PipelineSettings`; it
returns any object with ``answer(case) -> Answer``. Optional methods ``snapshot()``,
``answer_key()`` and ``close()`` are used when present.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import ConfigError, PipelineError
from pytest_ragev.core.knobs import plain_options
from pytest_ragev.core.redact import redact
from pytest_ragev.core.types import Answer, PipelineSettings, QAPair

_SYS_PATH_LOCK = threading.Lock()


class AnswerPipeline(Protocol):
    """What a factory must return."""

    def answer(self, case: QAPair) -> Answer:
        """The pipeline's answer to one question."""
        ...


class FactoryPipeline:
    """Adapts the user's object to the remote-pipeline interface."""

    def __init__(
        self, name: str, settings: PipelineSettings, inner: AnswerPipeline,
        source_file: Path | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self.inner = inner
        #: The file of the factory's module: the answer cache's key covers its source
        #: and the project modules it imports.
        self.source_file = source_file

    def __repr__(self) -> str:
        return f"FactoryPipeline({self.name!r}, {type(self.inner).__name__})"

    def snapshot(self) -> dict[str, Any]:
        """The object's own ``snapshot()`` when it has one, else the table (secrets hidden)."""
        own = getattr(self.inner, "snapshot", None)
        # plain_options: recording the table is not the factory's code reading it.
        knobs = own() if callable(own) else plain_options(self.settings.options)
        return {"name": self.name, **redact(dict(knobs))}

    def kb_key(self) -> str | None:
        """The user's pipeline brings its own knowledge base."""
        return None

    def answer_key(self) -> str:
        """The object's ``answer_key()`` when present, else sha256 of name and every knob."""
        own = getattr(self.inner, "answer_key", None)
        if callable(own):
            return str(own())
        return sha256_json({"name": self.name, "options": plain_options(self.settings.options)})

    def answer(self, case: QAPair, kb: object | None = None) -> Answer:
        """Call the user's ``answer(case)`` and check it returned an :class:`Answer`."""
        result = self.inner.answer(case)
        if not isinstance(result, Answer):
            raise PipelineError(
                f"[pipeline] name = {self.name!r}: answer() returned {type(result).__name__} "
                f"for qid {case.qid}; return pytest_ragev.Answer(retrieved=[...], text=...)"
            )
        return result

    def close(self) -> None:
        """Call the object's ``close()`` when it has one."""
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            closer()


def _import(module_name: str, name: str, base_dir: Path, source: Path | str) -> Any:
    folder = str(Path(base_dir).resolve())
    with _SYS_PATH_LOCK:
        if folder not in sys.path:
            # The config file's folder first, so a local pipelines.py beats an installed one.
            sys.path.insert(0, folder)
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            missing = error.name or ""
            if missing == module_name or module_name.startswith(missing + "."):
                raise ConfigError(
                    f"{source}: [pipeline] name = {name!r}: no module named {module_name!r} "
                    f"(looked in {folder} and sys.path); check the spelling or install it"
                ) from None
            raise ConfigError(
                f"{source}: [pipeline] name = {name!r}: importing {module_name!r} failed: "
                f"no module named {missing!r}; install it in this environment"
            ) from error


def load_factory(
    name: str, settings: PipelineSettings, *, source: Path | str | None = None
) -> FactoryPipeline:
    """Import ``module``, call ``callable(settings)`` and check the result has ``answer``."""
    where = source if source is not None else Path(settings.base_dir) / "ragev.toml"
    module_name, _, attr_path = name.partition(":")
    if not module_name or not attr_path:
        raise ConfigError(
            f"{where}: [pipeline] name = {name!r} is not module:callable; write e.g. "
            "name = \"my_pipelines:build\""
        )
    target: Any = _import(module_name, name, settings.base_dir, where)
    walked = module_name
    for position, part in enumerate(attr_path.split(".")):
        if not hasattr(target, part):
            public = sorted(n for n in dir(target) if not n.startswith("_"))
            raise ConfigError(
                f"{where}: [pipeline] name = {name!r}: {walked!r} has no attribute "
                f"{part!r}; it defines: {', '.join(public[:12]) or 'nothing public'}"
            )
        target = getattr(target, part)
        walked += (":" if position == 0 else ".") + part
    if not callable(target):
        raise ConfigError(
            f"{where}: [pipeline] name = {name!r}: {attr_path!r} is of type "
            f"{type(target).__name__}, not a callable; point at a function or class that "
            "takes the PipelineSettings"
        )
    factory: Callable[[PipelineSettings], Any] = target
    try:
        built = factory(settings)
    except Exception as error:  # the user's code: one line at start-up, not INTERNALERROR
        detail = " ".join(str(error).split())[:200]
        raise PipelineError(
            f"{where}: [pipeline] name = {name!r}: the factory raised "
            f"{type(error).__name__}: {detail}; call {attr_path}(settings) by hand to see "
            "the traceback"
        ) from error
    answer = getattr(built, "answer", None)
    if not callable(answer):
        raise ConfigError(
            f"{where}: [pipeline] name = {name!r}: the factory returned an object of type "
            f"{type(built).__name__} without an answer(case) method; return an object "
            "whose answer(case) gives a pytest_ragev.Answer"
        )
    module_file = getattr(sys.modules.get(module_name), "__file__", None)
    return FactoryPipeline(name, settings, built,
                           source_file=Path(module_file) if module_file else None)
