"""The import graph of ``memsys/`` and ``benchmarks/`` as the layering rules want it: every import
going down the layer map of ``docs/architecture.md``, no module over :data:`MAX_MODULE_LINES`
lines, no import cycle between modules, the library (``memsys``) never importing the harness above it
(``benchmarks``), the library free of the config framework (Hydra, OmegaConf), which is the
harness's business, and the library's shared building blocks (everything outside
``memsys/methods/`` and the LLM providers) importing no method and no concrete provider.

Every import statement counts, read from the source with :mod:`ast` (nothing is imported): at
module level, inside functions, under ``if TYPE_CHECKING:`` and in ``try`` blocks alike, since
each is a dependency a reader has to follow. ``from package import name`` depends on the
submodule ``package.name`` when there is one, else on the package's ``__init__``; importing a
submodule is not counted as depending on its parent packages (Python runs their ``__init__``
first, but a package that re-exports its submodules is not a cycle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from benchmarks.data.paths import REPO_ROOT

#: The packages whose modules make the graph.
PACKAGES = ("memsys", "benchmarks")
#: Top-level names of the config framework, which ``memsys`` must not import.
CONFIG_FRAMEWORK = frozenset({"hydra", "omegaconf"})
#: Library packages above the shared building blocks: the methods, and the concrete LLM providers
#: (their interface, ``memsys.llm.providers.base``, is what the backbone builds on).
UPPER = ("memsys.methods", "memsys.llm.providers")
PROVIDER_INTERFACE = "memsys.llm.providers.base"


@dataclass(frozen=True)
class Import:
    """One imported name: the module it resolves to, and where the statement is."""

    importer: str
    target: str
    line: int


def module_name(path: Path) -> str:
    """``memsys/llm/cache.py`` → ``memsys.llm.cache``; a package's ``__init__`` is the package."""
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of :data:`PACKAGES` by name."""
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
    }


def imports_of(name: str, path: Path) -> Iterator[Import]:
    """What the module's import statements name, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield Import(name, submodule if submodule in modules() else source, node.lineno)


@cache
def all_imports() -> tuple[Import, ...]:
    return tuple(found for name, path in modules().items() for found in imports_of(name, path))


def internal(target: str) -> str | None:
    """The module of :data:`PACKAGES` that an import names (its longest known prefix)."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        if (candidate := ".".join(parts[:end])) in modules():
            return candidate
    return None


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in modules()}
    for found in all_imports():
        target = internal(found.target)
        if target is not None and target != found.importer:
            edges[found.importer].add(target)
    return edges


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def cycle_through(start: str, members: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest import cycle from ``start`` back to it within one component (breadth-first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in no cycle")


def describe(found: Import) -> str:
    path = modules()[found.importer].relative_to(REPO_ROOT)
    return f"{path}:{found.line} imports {found.target}"


def test_the_graph_is_read() -> None:
    """The parser sees what it should: a known edge, a known relative import, both packages."""
    edges = graph()
    assert "memsys.llm.cache" in edges["memsys.llm.replay"]
    assert "memsys.methods.esmem.prompts" in edges["memsys.methods.esmem.segmenter"]
    assert "memsys.types" in edges["benchmarks.pipeline.harness"]


def test_no_import_cycle() -> None:
    edges = graph()
    cycles = [
        " -> ".join(cycle_through(component[0], set(component), edges))
        for component in strongly_connected(edges)
    ]
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_memsys_does_not_import_benchmarks() -> None:
    upward = [
        describe(found)
        for found in all_imports()
        if found.importer.split(".")[0] == "memsys" and found.target.split(".")[0] == "benchmarks"
    ]
    assert upward == [], "memsys imports the harness above it:\n" + "\n".join(upward)


def config_framework_imports() -> list[Import]:
    return [
        found
        for found in all_imports()
        if found.importer.split(".")[0] == "memsys"
        and found.target.split(".")[0] in CONFIG_FRAMEWORK
    ]


def test_memsys_does_not_import_the_config_framework() -> None:
    found = config_framework_imports()
    assert found == [], "memsys imports hydra/omegaconf:\n" + "\n".join(map(describe, found))


def in_package(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(f"{package}.") for package in packages)


def test_shared_building_blocks_do_not_import_methods_or_providers() -> None:
    """A building block several methods use (``memsys.tokens``, ``memsys.segment``,
    ``memsys.llm.cache``, ...) depends on neither a method nor a provider: what it needs from
    one moves down (as locating a GGUF file moved from the llama.cpp provider to
    :mod:`memsys.gguf`)."""
    upward = [
        describe(found)
        for found in all_imports()
        if in_package(found.importer, ("memsys",))
        and not in_package(found.importer, UPPER)
        and in_package(found.target, UPPER)
        and not in_package(found.target, (PROVIDER_INTERFACE,))
    ]
    assert upward == [], "building blocks importing a method or provider:\n" + "\n".join(upward)


#: Where the layer map lives (a fenced block with the info string ``layers``).
LAYER_MAP = REPO_ROOT / "docs" / "architecture.md"
#: The most lines a module of :data:`PACKAGES` may have.
MAX_MODULE_LINES = 600


def layer_map(text: str) -> dict[str, int]:
    """Each package of the map → its line (0 is the top), from the ``layers`` block of ``text``."""
    block = text.split("```layers\n", 1)[1].split("```", 1)[0]
    return {
        package: depth
        for depth, line in enumerate(block.strip().splitlines())
        for package in line.split()
    }


def layer_unit(module: str) -> str:
    """The map's unit a module belongs to: its package one level below the top
    (``benchmarks.tables.report.build`` → ``benchmarks.tables``), or the top-level module itself."""
    return ".".join(module.split(".")[:2])


def layer_violations(imports: tuple[Import, ...], layers: dict[str, int]) -> list[str]:
    """Every import of a unit on the importer's own line or above it, and every importer or
    imported unit the map does not place."""
    found = []
    for each in imports:
        target = internal(each.target)
        if target is None or target in PACKAGES:
            continue
        importer, imported = layer_unit(each.importer), layer_unit(target)
        if importer == imported:
            continue
        missing = [unit for unit in (importer, imported) if unit not in layers]
        if missing:
            found.append(f"{describe(each)}: {', '.join(missing)} not in the layer map")
        elif layers[imported] <= layers[importer]:
            found.append(f"{describe(each)}: {importer} may not import {imported}")
    return found


def test_the_layer_map_is_read() -> None:
    layers = layer_map(LAYER_MAP.read_text(encoding="utf-8"))
    assert layers["benchmarks.console"] == 0
    assert layers["benchmarks.tables"] < layers["benchmarks.pipeline"] < layers["memsys.methods"]
    assert layers["memsys.types"] == max(layers.values())


def test_the_layer_check_catches_an_upward_import() -> None:
    """A metric importing the table renderer's package above it, and a package the map forgot."""
    layers = {"benchmarks.tables": 0, "benchmarks.metrics": 1}
    upward = Import("benchmarks.metrics.ranking", "benchmarks.tables.report", 3)
    unknown = Import("benchmarks.metrics.ranking", "benchmarks.pipeline.run", 4)
    downward = Import("benchmarks.tables.report", "benchmarks.metrics.ranking", 5)
    assert layer_violations((downward,), layers) == []
    found = layer_violations((upward, unknown), layers)
    assert [line.split(": ", 1)[1] for line in found] == [
        "benchmarks.metrics may not import benchmarks.tables",
        "benchmarks.pipeline not in the layer map",
    ]


def test_every_import_goes_down_the_layer_map() -> None:
    layers = layer_map(LAYER_MAP.read_text(encoding="utf-8"))
    found = layer_violations(all_imports(), layers)
    assert found == [], "imports against docs/architecture.md's layer map:\n" + "\n".join(found)


def test_every_package_is_on_the_layer_map() -> None:
    layers = layer_map(LAYER_MAP.read_text(encoding="utf-8"))
    units = {layer_unit(name) for name in modules()} - set(PACKAGES)
    assert sorted(units - set(layers)) == [], "packages docs/architecture.md does not place"
    assert sorted(set(layers) - units) == [], "packages on the layer map that do not exist"


def test_no_module_is_over_the_line_limit() -> None:
    long = {
        str(path.relative_to(REPO_ROOT)): lines
        for path in modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines"
