"""Imports inside decirank point one way: no module imports, even lazily, a module that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import decirank

PACKAGE_ROOT = Path(decirank.__file__).parent


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _imported(node: ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    if not base.startswith("decirank"):
        return set()
    # "from . import wire" imports the module wire; "from .. import __version__" imports the package.
    return {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}


def import_graph() -> dict[str, set[str]]:
    """Each decirank module and the decirank modules it imports anywhere in its body (functions included)."""
    sources = {_module_name(path): path for path in PACKAGE_ROOT.rglob("*.py")}
    known = {name for name, _ in sources}
    graph: dict[str, set[str]] = {}
    for (module, is_package), path in sources.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                targets |= _imported(node, module, is_package, known)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name.startswith("decirank")}
        graph[module] = {target for target in targets if target in known and target != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_finder_sees_a_cycle():
    """The cycle finder reports two modules that import each other, so an empty answer means something."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_no_module_imports_one_that_imports_it_back():
    """No group of decirank modules imports each other in a circle, lazily inside a function or not."""
    assert cycles(import_graph()) == []


def test_nothing_below_the_package_root_imports_the_root():
    """Modules take __version__ from decirank._version, never from the package root that imports them all."""
    importers = sorted(module for module, targets in import_graph().items() if "decirank" in targets)
    assert importers == []


TRAINING = PACKAGE_ROOT.parents[1] / "training"


def test_training_imports_no_private_name_of_decirank():
    """The recipe reads the runtime through its public module (``decirank.backends.local.runtime``), so the
    runtime's private modules can change without breaking the way the model is trained."""
    scripts = sorted(TRAINING.glob("*.py"))
    assert scripts, f"no training scripts under {TRAINING}"
    private = []
    for path in scripts:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            private += [
                f"{path.name}: {name}"
                for name in names
                if name.startswith("decirank") and any(part.startswith("_") for part in name.split("."))
            ]
    assert private == []
