"""The import rules of docs/architecture.md that import-linter cannot express.

Exit 1 with one line per violation:

4. no function-level import of a ``pytest_ragev`` module outside ``plugin/__init__.py``
   (heavy third-party imports may stay lazy; ``if TYPE_CHECKING:`` blocks are fine);
5. no import of another package's private ``_x`` module, and no import of a module's
   private ``_name`` from another module (make it public where it lives, or move it);
6. nothing below the plugin shell imports the package face ``pytest_ragev`` itself;
and no import circle between modules, counting module-level and ``if TYPE_CHECKING:``
imports alike: a type-only import is still a dependency a reader follows, and a circle
of them is a tangle even when Python never runs it. Function-level imports stay out of
the graph (rule 4 allows them only in ``plugin/__init__.py``, the lazy entry point).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_ragev"
#: May import lazily (start-up cost of every pytest run) and use the face.
ENTRY = "pytest_ragev.plugin"
#: The shell and the deprecated aliases may import the package face.
FACE_USERS = ("pytest_ragev.plugin", "pytest_ragev.cli", "pytest_ragev.server")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = package_of(module, is_package).split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]
) -> list[str]:
    """The ``pytest_ragev`` modules an import statement depends on.

    ``from pkg import sub`` depends on the submodule ``pkg.sub`` (the package is already
    being imported); ``from pkg import name`` on the package itself.
    """
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.startswith("pytest_ragev")]
    target = resolve(node, module, is_package)
    if not target.startswith("pytest_ragev"):
        return []
    subs = [f"{target}.{alias.name}" for alias in node.names]
    found = [sub for sub in subs if sub in known]
    return found + ([target] if len(found) < len(subs) else [])


def private_names(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]
) -> list[str]:
    """The ``_private`` names (not submodules) ``node`` takes from another module."""
    if not isinstance(node, ast.ImportFrom):
        return []
    target = resolve(node, module, is_package)
    if not target.startswith("pytest_ragev") or target == module:
        return []
    return [f"{target}.{alias.name}" for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")
            and f"{target}.{alias.name}" not in known]


def type_checking_block(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING")


def walk(tree: ast.Module):  # type: ignore[no-untyped-def]
    """(node, inside a function, inside ``if TYPE_CHECKING``) for every import."""
    stack: list[tuple[ast.AST, bool, bool]] = [(tree, False, False)]
    while stack:
        node, in_function, typing_only = stack.pop()
        for child in ast.iter_child_nodes(node):
            function = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            typing = typing_only or type_checking_block(child)
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, function, typing
            stack.append((child, function, typing))


def main() -> int:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path): path for path in files}
    problems: list[str] = []
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(PACKAGE.parent)
        for node, in_function, typing_only in walk(tree):
            targets = [t for t in imported(node, name, is_package, set(modules)) if t in modules]
            if not targets:
                continue
            line = f"{where}:{node.lineno}"
            if in_function and name != ENTRY and not typing_only:
                problems.append(f"{line}: function-level import of {targets[0]} (rule 4)")
            for target in targets:
                private = [part for part in target.split(".")[1:] if part.startswith("_")]
                owner = target.rpartition(".")[0]
                if private and not (name == owner or name.startswith(owner + ".")):
                    problems.append(f"{line}: imports {target}, private to {owner} (rule 5)")
                if target == "pytest_ragev" and not name.startswith(FACE_USERS):
                    problems.append(f"{line}: imports the package face (rule 6)")
                if (typing_only or not in_function) and target != name:
                    graph[name].add(target)
            for private_name in private_names(node, name, is_package, set(modules)):
                problems.append(f"{line}: imports {private_name}, private to its module "
                                "(rule 5)")
    for component in circles(graph):
        circle = shortest_cycle(graph, component)
        rest = sorted(set(component) - set(circle))
        tangled = f" (and through it: {', '.join(rest)})" if rest else ""
        problems.append(f"import circle: {' -> '.join(circle)}{tangled}")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan).

    A package's ``__init__`` importing its own submodules is not a circle unless a
    submodule imports the package back.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest circle through the component's first module, as the imports run:
    ``[a, b, a]`` (breadth first, within the component)."""
    start = component[0]
    members = set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    return [*component, start]  # not reached: a component of two or more is a circle


if __name__ == "__main__":
    sys.exit(main())
