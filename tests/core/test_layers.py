"""The index side and the query side do not lean on each other, and what lies
under both loads neither.

``ragkit/pipeline`` (documents in, graph and indexes out) and ``ragkit/query``
(a question in, a context and an answer out) share what lies under both:
``ragkit/core`` (the stores bundle, graph keys, the LLM cache, token counting,
extractions and the pure merge), the protocols and the schema. Neither imports
the other, and ``ragkit/core`` imports neither, so either side can change (or
run in its own process) without the other.

Two checks. The direct one parses every ``.py`` file with ``ast``: imports
inside functions, under ``if TYPE_CHECKING`` and relative ones count as much
as the module-level ones. The transitive one imports each module in a fresh
interpreter and reads ``sys.modules``: a layer rule is only as true as its
weakest indirect import (``core`` -> ``settings`` -> a pipeline section model
would load the whole index side into a query). If either fails, move what both
sides need into ``ragkit/core`` (or into the side that owns it) instead of
importing across; wiring (settings -> adapters -> stores) belongs at the top.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ragkit

ROOT = Path(ragkit.__file__).resolve().parent
FORBIDDEN = {
    "pipeline": ("ragkit.query",),
    "query": ("ragkit.pipeline",),
    "core": ("ragkit.pipeline", "ragkit.query"),
}
"""A subpackage of ragkit -> the packages none of its modules may import."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, module: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of everything ``source`` (the text of ``module``)
    imports, anywhere in it. ``from a import b`` yields ``a`` and ``a.b``: ``b``
    may be a module (``from ragkit import query``). Calls of
    ``importlib.import_module("...")`` / ``__import__("...")`` with a literal
    name count too."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def _absolute(name: str | None, level: int, package: str) -> str:
    if level == 0:
        return name or ""
    parts = package.split(".")
    if level - 1 >= len(parts):
        raise ValueError(f"relative import beyond the top package from {package}")
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{name}" if name else base


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def violations(side: str) -> list[str]:
    found: dict[str, str] = {}
    for path in sorted((ROOT / side).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for line, name in imported(source, module_name(path), path.name == "__init__.py"):
            if any(within(name, banned) for banned in FORBIDDEN[side]):
                found.setdefault(f"{path.relative_to(ROOT.parent)}:{line}", name)  # one name per line
    return [f"{where} imports {name}" for where, name in found.items()]


@pytest.mark.parametrize("side", FORBIDDEN)
def test_no_side_imports_the_other(side):
    files = list((ROOT / side).rglob("*.py"))
    assert files, f"ragkit/{side} has no modules: the layer this test guards is missing"
    found = violations(side)
    assert not found, (
        f"ragkit/{side} must not import {' or '.join(FORBIDDEN[side])}; move what both sides "
        "need into ragkit/core:\n" + "\n".join(found)
    )


CASES = {
    "import ragkit.query.lines": "ragkit.query.lines",
    "from ragkit.query import engine": "ragkit.query",
    "from ragkit import query": "ragkit.query",
    "from ..query import lines": "ragkit.query",
    "from .. import query": "ragkit.query",
    "from ..query.lines import x": "ragkit.query.lines",
    "def f():\n    from ragkit.query.lines import x": "ragkit.query.lines",
    "class C:\n    def m(self):\n        import ragkit.query": "ragkit.query",
    "if TYPE_CHECKING:\n    from ragkit.query.items import ChunkItem": "ragkit.query.items",
    "import importlib\nimportlib.import_module('ragkit.query.engine')": "ragkit.query.engine",
}


@pytest.mark.parametrize("source", CASES)
def test_every_form_of_import_is_seen(source):
    """The checker itself: each way of writing an import, in a module of ragkit/pipeline."""
    names = [name for _, name in imported(source, "ragkit.pipeline.example")]
    assert CASES[source] in names, names
    assert any(within(n, "ragkit.query") for n in names)


def test_relative_imports_resolve_from_a_package_and_from_a_module():
    assert [n for _, n in imported("from . import x", "ragkit.core", is_package=True)] == ["ragkit.core", "ragkit.core.x"]
    assert [n for _, n in imported("from . import x", "ragkit.core.stores")] == ["ragkit.core", "ragkit.core.x"]
    assert [n for _, n in imported("from .. import x", "ragkit.core.stores")][0] == "ragkit"
    assert not any(within(n, "ragkit.query") for _, n in imported("import ragkit.querying", "ragkit.core.stores"))


# -- what importing a module loads, transitively --------------------------------------------------

WIRING = ("ragkit.server", "ragkit.mcp", "ragkit.cli", "ragkit.rag", "ragkit.backends", "ragkit.builtin", "ragkit.testing")
"""The top of the house: entry points, the wiring of settings to adapters, the built-ins' registration, the test kit."""
SIDES = ("ragkit.pipeline", "ragkit.query")
LOWER = (
    "ragkit.core", "ragkit.protocols", "ragkit.plugins", "ragkit.storage", "ragkit.offline", "ragkit.models",
    "ragkit.loaders", "ragkit.sections", "ragkit.schema", "ragkit.errors", "ragkit.ids", "ragkit.redact",
    "ragkit.access", "ragkit.tokenizer", "ragkit._loop_thread",
)
LOADS_NONE_OF = {
    "ragkit.query": ("ragkit.pipeline", "ragkit.settings", *WIRING),
    "ragkit.pipeline": ("ragkit.query", "ragkit.settings", *WIRING),
    "ragkit.settings": (*SIDES, *WIRING),
    **dict.fromkeys(LOWER, (*SIDES, "ragkit.settings", *WIRING)),
}
"""A package (or top-level module) -> what importing any one of its modules
must not load. The two sides load neither each other nor settings (they are
handed typed configuration: ``ragkit.sections``) nor anything of the top; the
layers under them (and settings) load neither side nor the top."""

_PROBE = r"""
import importlib, json, os, subprocess, sys
todo = json.loads(sys.argv[1])  # [[module, [banned packages]], ...], the largest modules first
if hasattr(os, "fork"):  # libraries, not ragkit: loaded once here, so each child imports only ragkit's own
    import asyncio, numpy, pydantic

def ours(modules):
    return sorted(m for m in modules if m == "ragkit" or m.startswith("ragkit."))

def fresh_import(name):
    if not hasattr(os, "fork"):  # one interpreter per module where a process cannot fork
        code = f"import importlib, sys; importlib.import_module({name!r}); print(*sys.modules)"
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        return ours(run.stdout.split()) if run.returncode == 0 else {"error": run.stderr[-2000:]}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: this interpreter has loaded no ragkit module yet
        os.close(read)
        try:
            importlib.import_module(name)
            payload = json.dumps(ours(sys.modules))
        except BaseException as exc:
            payload = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        with os.fdopen(write, "w") as fh:
            fh.write(payload)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        result = json.loads(fh.read())
    os.waitpid(pid, 0)
    return result

banned = dict((name, rule) for name, rule in todo)
out = {}
for name, _ in todo:
    if name in out:
        continue
    loaded = out[name] = fresh_import(name)
    if isinstance(loaded, dict):
        continue
    # A module loaded on the way loads, imported alone, no more than this did
    # (its own imports all ran here): where this set breaks none of its rules, it is proven too.
    for other in loaded:
        if other not in out and other in banned and not any(
            m == b or m.startswith(b + ".") for m in loaded for b in banned[other]
        ):
            out[other] = {"within": name}
print(json.dumps(out))
"""


def modules_of(package: str) -> list[str]:
    """Every importable module of a package (or the one top-level module), ``__main__`` left out."""
    path = ROOT.parent.joinpath(*package.split("."))
    if not path.is_dir():
        return [package] if path.with_suffix(".py").is_file() else []
    return [module_name(p) for p in sorted(path.rglob("*.py")) if p.name != "__main__.py"]


def _size(module: str) -> int:
    path = ROOT.parent.joinpath(*module.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).stat().st_size


def loaded_by(rules: dict[str, tuple[str, ...]]) -> dict[str, list[str] | dict[str, str]]:
    """Each module -> the ``ragkit`` modules that importing it alone loads, in
    an interpreter that has imported no ``ragkit`` module before; or
    ``{"within": M}`` where importing ``M`` loaded it and broke none of its
    ``rules`` (module -> packages it must not load), which proves it as well:
    the largest modules go first, so most modules cost no import of their own."""
    todo = [[name, list(rules[name])] for name in sorted(rules, key=lambda n: (-_size(n), n))]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # no BLAS threads across fork
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(todo)], capture_output=True, text=True, check=True, timeout=600, env=env
    )
    return json.loads(result.stdout)


def transitive_violations(package: str, loaded: dict) -> list[str]:
    found = []
    for name in modules_of(package):
        modules = loaded[name]
        assert "error" not in modules, f"importing {name} failed: {modules['error']}"
        if "within" in modules:
            continue
        banned = sorted(m for m in modules if any(within(m, b) for b in LOADS_NONE_OF[package]))
        if banned:
            found.append(f"{name} loads {', '.join(banned)}")
    return found


@pytest.fixture(scope="module")
def loaded() -> dict:
    return loaded_by({m: rule for package, rule in LOADS_NONE_OF.items() for m in modules_of(package)})


@pytest.mark.parametrize("package", LOADS_NONE_OF)
def test_importing_a_module_loads_no_higher_layer(package, loaded):
    """Import each module of ``package`` alone, in a fresh interpreter: the
    layers it must not lean on stay out of ``sys.modules``. A failure names
    the module and what it pulled in; follow its imports (``python -X importtime
    -c 'import MODULE'`` shows the chain) to the one that reaches up."""
    assert modules_of(package), f"{package} has no modules: the layer this test guards is missing"
    found = transitive_violations(package, loaded)
    assert not found, f"importing a module of {package} must load none of {', '.join(LOADS_NONE_OF[package])}:\n" + "\n".join(found)


def test_the_probe_sees_a_transitive_import():
    """The checker itself: ``ragkit.rag`` reaches both sides only through other
    modules; a module is taken as proven by a larger one's import only where
    that import broke none of its rules."""
    found = loaded_by({"ragkit.rag": (), "ragkit.ids": ("ragkit.query",), "ragkit.errors": ()})
    modules = found["ragkit.rag"]
    assert "ragkit.pipeline.index" in modules and "ragkit.query.engine" in modules
    assert "ragkit.cli.main" not in modules
    # Loaded by rag.py and free of its own (empty) rule: proven by rag's import.
    assert found["ragkit.errors"] == {"within": "ragkit.rag"}
    # Loaded by rag.py too, but rag's modules break its rule: imported alone, and clean.
    assert isinstance(found["ragkit.ids"], list) and not any(within(m, "ragkit.query") for m in found["ragkit.ids"])


# -- what the index side writes ----------------------------------------------------------------


async def test_indexed_records_hold_no_query_side_token_counts(tmp_path):
    """Issue 14 finding 2: indexing used to write a tokenizer-specific
    ``line_tokens`` count into every chunk, node and edge (in every backend)
    for the query side's context lines. Stored records now hold the data only:
    no property or field names a line's token count, in any store."""
    from ragkit.rag import RAG
    from ragkit.settings import Settings
    from ragkit.testing import HashEmbedder

    texts = [
        "Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.",
        "Charles Babbage designed the Difference Engine. Babbage taught at Cambridge.",
    ]
    async with RAG(Settings(working_dir=tmp_path), embedder=HashEmbedder({"dimension": 32})) as rag:
        await rag.ainsert(texts)
        stores = rag.stores
        nodes = [n.properties async for n in stores.graph.nodes()]
        edges = [e.properties async for e in stores.graph.edges()]
        chunks = await stores.chunks.get_many([k async for k in stores.chunks.keys()])
        vectors = [
            rec.metadata
            for store in (stores.chunk_vectors, stores.entity_vectors, stores.relation_vectors)
            for rec in await store.get([i async for i in store.ids()])
            if rec is not None
        ]
    assert nodes and edges and chunks and vectors
    for record in [*nodes, *edges, *chunks, *vectors]:
        assert not [k for k in record if "line" in k.lower()], record
        assert not [v for v in record.values() if isinstance(v, str) and v.count("|") == 2 and v.startswith("cl100k")]
