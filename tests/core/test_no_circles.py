"""No two parts of ``ragkit/`` import each other, directly or round a longer loop.

A part is a package of ``ragkit`` (``ragkit.core``, ``ragkit.protocols``,
``ragkit.pipeline``, ... a subpackage such as ``ragkit.server.chat`` counts as
its package's) or a top-level module (``ragkit.settings``, ``ragkit.redact``,
the package's own ``__init__`` as ``ragkit``). Every ``.py`` file is parsed
with ``ast``: module-level imports and imports inside functions count alike
(a deferred import hides a circle, it does not remove it). Imports under ``if
TYPE_CHECKING:`` are left out: they name types for the checker and load
nothing. ``importlib.import_module`` with a name held in a variable (the plugin
registry's entry points) is not seen.

A failure lists each circle's parts and the imports that close it, file and
line. Break it by moving what the lower part needs down into it (or into a
smaller module under both), never by hiding the import inside a function.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import ragkit

ROOT = Path(ragkit.__file__).resolve().parent
MODULES = {
    ".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
    for p in ROOT.rglob("*.py")
}


def part_of(module: str) -> str:
    """``ragkit.core.lock`` -> ``ragkit.core``; ``ragkit.settings`` -> itself; ``ragkit`` -> ``ragkit``."""
    return ".".join(module.split(".")[:2])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, but the bodies of ``if TYPE_CHECKING:`` (their ``else`` is walked)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for node in child.orelse:
                yield node
                yield from _nodes(node)
            continue
        yield child
        yield from _nodes(child)


def imports_of(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, module) for each ragkit module ``source`` imports. ``from a import b``
    names ``a.b`` when that is a module, else ``a``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in _nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                name = f"{base}.{alias.name}"
                yield node.lineno, name if name in MODULES else base


def part_graph() -> dict[tuple[str, str], list[str]]:
    """(importing part, imported part) -> the ``file:line`` of each import between them."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        for line, name in imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
            if name != "ragkit" and not name.startswith("ragkit."):
                continue
            source, target = part_of(module), part_of(name)
            if source != target:
                edges[source, target].append(f"{rel}:{line}")
    return edges


def circles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The strongly connected groups of two parts or more (Tarjan), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def loops(group: list[str], edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The shortest loop through each part of a circle (breadth first), each once:
    a few short loops say more than every import inside a large circle."""
    inside = {(a, b) for a, b in edges if a in group and b in group}
    found: dict[frozenset[str], list[str]] = {}
    for start in group:
        paths = {start: [start]}
        queue = [start]
        while queue:
            node = queue.pop(0)
            nexts = sorted(b for a, b in inside if a == node)
            if start in nexts:
                loop = paths[node]
                found.setdefault(frozenset(loop), loop)
                break
            for nxt in nexts:
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    queue.append(nxt)
    return sorted(found.values(), key=lambda loop: (len(loop), loop))


def describe(group: list[str], edges: dict[tuple[str, str], list[str]]) -> str:
    lines = [f"circle of {len(group)} parts: {', '.join(group)}"]
    for loop in loops(group, edges):
        hops = [f"{a} -> {b} ({edges[a, b][0]})" for a, b in zip(loop, [*loop[1:], loop[0]])]
        lines.append("  " + "; ".join(hops))
    return "\n".join(lines)


def test_no_two_parts_of_ragkit_import_each_other():
    edges = part_graph()
    assert ("ragkit.pipeline", "ragkit.core") in edges, "the walk saw no import: the checker is broken"
    found = circles(edges)
    assert not found, "parts of ragkit that import each other:\n" + "\n".join(describe(g, edges) for g in found)


def test_the_walk_sees_each_form_and_leaves_out_type_checking():
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from ragkit import settings\n"
        "from ..query import engine\n"
        "def f():\n    import ragkit.server.app\n"
        "if TYPE_CHECKING:\n    from ragkit.cli import main\n"
        "else:\n    from ragkit.storage import snapshot_journal\n"
    )
    names = {name for _, name in imports_of(source, "ragkit.pipeline.index", is_package=False)}
    assert {"ragkit.settings", "ragkit.query.engine", "ragkit.server.app", "ragkit.storage.snapshot_journal"} <= names
    assert not any(n.startswith("ragkit.cli") for n in names)


def test_a_circle_is_found_round_a_longer_loop():
    edges = {("a", "b"): ["x:1"], ("b", "c"): ["y:2"], ("c", "a"): ["z:3"], ("c", "d"): ["w:4"]}
    assert circles(edges) == [["a", "b", "c"]]
