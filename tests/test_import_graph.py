"""The package's import graph: no cycle, and no function-local import without a reason.

Every `import` of every module of the package is read from its source (module level,
`TYPE_CHECKING` blocks and function bodies alike). An import of a name through a package
(`from ..advisors.approval import Approver`) counts as an import of the module that
defines the name, followed through the package's re-exports, so a cycle cannot hide
behind an `__init__.py`. Function-local imports of the package's own modules are listed:
each one that remains says why in `LOCAL_IMPORTS`, and "it breaks a cycle" is not a reason.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass

PACKAGE = pathlib.Path(__file__).resolve().parents[1]
NOT_THE_PACKAGE = {"tests", "benchmarks", "docs", "build", "node_modules"}
"""Folders of the checkout that hold no module of the package."""

LAZY_EXTRA = "an optional extra, loaded only when this path runs"

LOCAL_IMPORTS: dict[tuple[str, str], str] = {
    # -- optional extras and heavy machinery, loaded on the path that needs them --------------
    ("advisorchain.cli", "advisorchain.providers.local.weights"): (
        "the embedded model's download, only for `advisorchain demo` / `prepare-model`"
    ),
    ("advisorchain.cli", "advisorchain.providers.local.preflight"): (
        "the embedded model's CPU check, only for `advisorchain demo` / `prepare-model`"
    ),
    ("advisorchain.cli", "advisorchain.demo.app"): "the demo, only for `advisorchain demo`",
    ("advisorchain.cli", "advisorchain.demo.web"): (
        "the web demo needs the `ui` extra, only for `advisorchain demo --web`"
    ),
    ("advisorchain.demo.app", "advisorchain.providers.llamacpp"): LAZY_EXTRA + " (`local`)",
    ("advisorchain.demo.app", "advisorchain.providers.local.weights"): LAZY_EXTRA + " (`local`)",
    ("advisorchain.demo.models", "advisorchain.providers.llamacpp"): LAZY_EXTRA + " (`local`)",
    ("advisorchain.demo.models", "advisorchain.providers.local.weights"): (
        LAZY_EXTRA + " (`local`)"
    ),
    ("advisorchain.providers.llamacpp", "advisorchain.providers.local.weights"): (
        "the weights' download machinery, only when a model is built"
    ),
    ("advisorchain.providers.llamacpp", "advisorchain.providers.local.preflight"): (
        "the CPU check, only when a model is built"
    ),
    ("advisorchain.providers.llamacpp", "advisorchain.providers._llama_state"): (
        LAZY_EXTRA + " (`local`: llama_cpp)"
    ),
    # -- start-up cost ------------------------------------------------------------------------
    ("advisorchain.__main__", "advisorchain.cli"): (
        "`python -m advisorchain` loads the command line only when run as a program"
    ),
    ("advisorchain.providers.factory", "advisorchain.providers.openai"): (
        "`create_model` loads only the provider a model string names"
    ),
    ("advisorchain.providers.factory", "advisorchain.providers.anthropic"): (
        "`create_model` loads only the provider a model string names"
    ),
    ("advisorchain.providers.factory", "advisorchain.providers.openai_responses"): (
        "`create_model` loads only the provider a model string names"
    ),
    ("advisorchain.providers.factory", "advisorchain.providers.gemini"): (
        "`create_model` loads only the provider a model string names"
    ),
    ("advisorchain.providers.factory", "advisorchain.providers.scripted"): (
        "`create_model` loads only the provider a model string names"
    ),
    # -- known, owned elsewhere ---------------------------------------------------------------
    ("advisorchain.core.invocation", "advisorchain.core.deferred"): (
        "TODO(renovate-core): core.deferred no longer imports core.invocation: this import "
        "can move to the module's top"
    ),
}
"""Function-local imports of the package's modules: (importer, imported) -> why."""

KNOWN_CYCLES: dict[frozenset[str], str] = {}
"""Import cycles owned by other work, each with a TODO: the test lets exactly these pass."""


@dataclass(frozen=True, slots=True)
class Import:
    importer: str
    imported: str
    line: int
    local: bool
    """Inside a function body (run when the function runs, not when the module loads)."""


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["advisorchain", *parts])


def _modules() -> dict[str, pathlib.Path]:
    found: dict[str, pathlib.Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if any(p in NOT_THE_PACKAGE or p.startswith(".") or p.endswith(".egg-info") for p in parts):
            continue
        found[_module_name(path)] = path
    return found


class _Graph:
    def __init__(self) -> None:
        self.modules = _modules()
        self.trees = {name: ast.parse(path.read_text()) for name, path in self.modules.items()}

    def is_package(self, name: str) -> bool:
        return self.modules[name].name == "__init__.py"

    def absolute(self, importer: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = importer.split(".")
        if not self.is_package(importer):
            base.pop()
        base = base[: len(base) - node.level + 1]
        return ".".join([*base, node.module] if node.module else base)

    def known_prefix(self, dotted: str) -> str | None:
        while dotted and dotted not in self.modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def defining_module(self, module: str, name: str, seen: frozenset[str] = frozenset()) -> str:
        """The module that defines `name` as seen from `module`, following the re-exports
        of packages (`from .x import name` in an `__init__.py`)."""
        if f"{module}.{name}" in self.modules:
            return f"{module}.{name}"
        if not self.is_package(module) or module in seen:
            return module
        for node in self.trees[module].body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        source = self.known_prefix(self.absolute(module, node))
                        if source is None or source == module:
                            return module
                        return self.defining_module(source, alias.name, seen | {module})
        return module

    def imports(self, importer: str) -> Iterator[Import]:
        for node, local in _import_nodes(self.trees[importer]):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                stem = self.known_prefix(self.absolute(importer, node))
                if stem is None:
                    continue
                targets = [self.defining_module(stem, alias.name) for alias in node.names]
            else:
                targets = [t for a in node.names if (t := self.known_prefix(a.name))]
            for target in targets:
                if target != importer and not importer.startswith(target + "."):
                    yield Import(importer, target, node.lineno, local)

    def edges(self) -> dict[str, set[str]]:
        """Who imports whom. Importing `a.b.c` first runs the `__init__.py` of `a` and
        `a.b`, so an import also leads to each package above its target that is not
        already above the importer (that one is loading already)."""
        graph: dict[str, set[str]] = {name: set() for name in self.modules}
        for name in self.modules:
            for found in self.imports(name):
                graph[name].add(found.imported)
                graph[name].update(
                    package
                    for package in _packages_above(found.imported)
                    if not name.startswith(package + ".")
                )
        return graph


def _packages_above(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _import_nodes(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of `tree`, and whether it sits inside a function body."""

    def walk(node: ast.AST, local: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, local
            inside = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            yield from walk(child, inside)

    return walk(tree, False)


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_no_import_cycle_anywhere_in_the_package() -> None:
    cycles = _cycles(_Graph().edges())
    unknown = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert unknown == []
    assert sorted(map(sorted, set(KNOWN_CYCLES) - set(cycles))) == []  # fixed: drop the entry


def test_each_function_local_import_of_the_package_says_why() -> None:
    graph = _Graph()
    local = {
        (found.importer, found.imported): f"{graph.modules[found.importer]}:{found.line}"
        for name in graph.modules
        for found in graph.imports(name)
        if found.local
    }
    unexplained = sorted(
        f"{where}: {pair}" for pair, where in local.items() if pair not in LOCAL_IMPORTS
    )
    assert unexplained == []
    assert sorted(set(LOCAL_IMPORTS) - set(local)) == []  # gone: drop the entry


def test_the_graph_sees_what_it_must() -> None:
    """The reader itself: a re-export through a package resolves to the defining module,
    an import in a function counts as local, and a cycle among modules is found."""
    graph = _Graph()
    found = {(i.imported, i.local) for i in graph.imports("advisorchain.toolsets.mcp._sampling")}
    assert ("advisorchain.advisors.approval.approvers", False) in found
    assert ("advisorchain.advisors.approval", False) not in found
    local = {(i.importer, i.imported) for n in graph.modules for i in graph.imports(n) if i.local}
    assert ("advisorchain.providers.factory", "advisorchain.providers.openai") in local
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    tree = ast.parse("import os\nif True:\n    import sys\ndef f():\n    import json\n")
    assert [(n.lineno, local) for n, local in _import_nodes(tree)] == [
        (1, False),
        (3, False),
        (5, True),
    ]
