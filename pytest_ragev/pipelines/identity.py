"""What identifies a knowledge base and an answer, so caches never serve the wrong one.

Functions of the settings, the pipeline object and (for a project's own code) its
source files: the plugin shell decides which pipeline answers (its own or a conftest's)
and passes that in.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import sys
from collections.abc import Iterable
from pathlib import Path

from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.core.version import __version__
from pytest_ragev.pipelines.protocol import Pipeline


def options_digest(settings: PipelineSettings) -> str:
    """sha256 of the pipeline name and every knob as written: all that is known of a
    pipeline whose code cannot be hashed (a conftest's)."""
    return sha256_json({"name": settings.name, "options": dict(settings.options)})


def kb_identity(settings: PipelineSettings, pipeline: Pipeline | None) -> str:
    """Configurations with the same identity share one knowledge base.

    ``pipeline`` is the built-in pipeline that builds the KB, or ``None`` when a user's
    hook builds it: that builder may read any knob, so only identical settings share.
    """
    if pipeline is not None:
        key = pipeline.kb_key()
        if key is not None:
            return key
    return options_digest(settings)


def answer_settings_key(
    settings: PipelineSettings, pipeline: Pipeline | None, *, code: str = ""
) -> str:
    """The settings part of an answer-cache key: the plugin version, the pipeline's own
    answer key (``None``: a conftest pipeline, known by its knobs) and ``code``, the
    :func:`project_code_digest` of the project files that implement it (a conftest's, a
    factory's; the built-in pipeline's own key covers its code)."""
    knobs = pipeline.answer_key() if pipeline is not None else options_digest(settings)
    return f"{__version__}:{knobs}" + (f":{code}" if code else "")


def cache_enabled(
    settings: PipelineSettings, *, no_cache: bool, configured: bool | None, user_answers: bool,
    remote_model: bool = False,
) -> bool:
    """Whether answers of ``settings`` are cached.

    ``--ragev-no-cache`` turns caching off, ``[run] cache`` decides when set. By default
    only the built-in pipeline with its offline generator is cached: its answers are a
    function of its settings and code. Not a conftest hook's, not a remote service's,
    and not the built-in pipeline's when a remote chat model (``remote_model``) writes
    its answers: the model behind the same name can change without a knob changing.
    """
    if no_cache:
        return False
    if configured is not None:
        return configured
    return settings.name == "builtin" and not user_answers and not remote_model


#: Files under these folders belong to installed packages, not to the project.
_INSTALLED = ("site-packages", "dist-packages")


def project_sources(start: Iterable[Path], root: Path) -> list[Path]:
    """``start`` and every project module they import, transitively, sorted.

    A project module is one whose file lies under ``root`` and not in an installed
    package (nor in pytest-ragev itself, whose code the built-in digest covers). Imports
    are read from the source (function-level ones too), resolved through the modules
    already imported, else located without running them; what cannot be found is left
    out (a typo in an import fails the user's code long before this matters).
    """
    base = root.resolve()
    own = Path(__file__).resolve().parents[1]
    seen: set[Path] = set()
    todo = [Path(path).resolve() for path in start]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        package = _package_of(path)
        for name in _imported_names(tree, package):
            found = _module_file(name)
            if (found is not None and found.is_relative_to(base) and not found.is_relative_to(own)
                    and not any(part in _INSTALLED for part in found.parts)):
                todo.append(found)
    return sorted(seen)


def project_code_digest(start: Iterable[Path], root: Path) -> str:
    """sha256 over the names (relative to ``root``) and bytes of :func:`project_sources`."""
    base = root.resolve()
    digest = hashlib.sha256(b"pytest-ragev project code v1\n")
    for path in project_sources(start, root):
        try:
            data = path.read_bytes()
        except OSError:
            data = b""
        name = (path.relative_to(base) if path.is_relative_to(base) else path).as_posix()
        digest.update(b"%s\0%d\0" % (name.encode(), len(data)) + data)
    return digest.hexdigest()


def _package_of(path: Path) -> str | None:
    """The package of the imported module whose file is ``path`` (for relative imports)."""
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == path:
            return getattr(module, "__package__", None)
    return None


def _imported_names(tree: ast.AST, package: str | None) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                if not package:
                    continue
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                target = ".".join([*parts, *([target] if target else [])])
            names.append(target)
            names += [f"{target}.{alias.name}" for alias in node.names]
    return [name for name in names if name]


def _module_file(name: str) -> Path | None:
    """The source file of module ``name``: from the imported module, else located on
    ``sys.path`` without importing anything (a function-level import runs only later)."""
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None) if module is not None else None
    if file is None and module is None:
        file = _locate(name)
    if not file or not str(file).endswith(".py"):
        return None
    return Path(file).resolve()


def _locate(name: str) -> str | None:
    search: list[str] | None = None  # None: sys.path
    origin: str | None = None
    for part in name.split("."):
        try:
            spec = importlib.machinery.PathFinder.find_spec(part, search)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        origin = spec.origin
        locations = spec.submodule_search_locations
        search = list(locations) if locations is not None else []
    return origin
