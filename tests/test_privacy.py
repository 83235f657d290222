"""The privacy rule (docs/architecture.md, "Privacy"), checked on every module's source.

1. Every module of the package declares `__all__`, a list of names the module binds.
2. Nothing outside `core/` imports a private core module (`core._*`).
3. `demo/` uses only public names: no private module, and from a module of the package
   only names its `__all__` lists (the demo is written as an application would be).
4. No private API of a dependency: no import of a module or a name that starts with `_`
   from a third-party distribution. (The standard library is not checked: its regular
   expression parser, which `advisors/tool_search/regex.py` reads model-written patterns
   with, has no public form.)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "advisorchain"
_NOT_PACKAGE = {"tests", "benchmarks", "build", "docs"}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (`advisorchain.core.tools`)."""
    found: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in _NOT_PACKAGE or any(p.startswith(".") for p in parts):
            continue
        names = [PACKAGE, *parts[:-1]]
        if path.name != "__init__.py":
            names.append(path.stem)
        found[".".join(names)] = path
    return found


MODULES = _modules()


@cache
def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


@dataclass(frozen=True)
class Import:
    module: str  # the dotted module imported from (resolved if relative)
    names: tuple[str, ...]  # the names taken from it (`from m import a, b`), or ()
    line: int
    relative: bool


def _imports(module: str) -> Iterator[Import]:
    package = module if _is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, (), node.lineno, False)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names = tuple(a.name for a in node.names)
            yield Import(target, names, node.lineno, bool(node.level))


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """Names a module's top level binds (definitions, assignments, imports), also inside
    its top-level `if`/`try` blocks."""
    bound: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                bound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.If):
            bound |= _bound_names(node.body) | _bound_names(node.orelse)
        elif isinstance(node, ast.Try):
            bound |= _bound_names(node.body) | _bound_names(node.orelse)
            for handler in node.handlers:
                bound |= _bound_names(handler.body)
    return bound


def _declared_all(module: str) -> list[str] | None:
    """The module's top-level `__all__` (a literal list or tuple of strings), or `None`."""
    for node in _tree(module).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value
            assert isinstance(value, (ast.List, ast.Tuple)), f"{module}: __all__ is not a literal"
            names = [e.value for e in value.elts if isinstance(e, ast.Constant)]
            assert len(names) == len(value.elts) and all(isinstance(n, str) for n in names)
            return [str(n) for n in names]
    return None


def _shown(module: str) -> str:
    path = MODULES[module]
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else module


def _third_party(dotted: str) -> bool:
    top = dotted.split(".")[0]
    return top != PACKAGE and top not in sys.stdlib_module_names


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and part != "__future__" for part in dotted.split("."))


def test_the_walk_sees_the_whole_package() -> None:
    assert f"{PACKAGE}.core.tools" in MODULES
    assert f"{PACKAGE}.demo.web" in MODULES
    assert len(MODULES) > 90


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_declares_all_of_names_it_binds(module: str) -> None:
    declared = _declared_all(module)
    assert declared is not None, f"{MODULES[module]} declares no __all__"
    assert len(declared) == len(set(declared)), f"{module}: a name twice in __all__"
    missing = set(declared) - _bound_names(_tree(module).body)
    assert not missing, f"{module}: __all__ names what it does not bind: {sorted(missing)}"


def test_nothing_outside_core_imports_a_private_core_module() -> None:
    core = f"{PACKAGE}.core."
    found = [
        f"{_shown(m)}:{i.line} imports {i.module}" + (f" ({', '.join(i.names)})" if i.names else "")
        for m in MODULES
        if not m.startswith(core) and m != f"{PACKAGE}.core"
        for i in _imports(m)
        if i.module.startswith(core)
        and _private(i.module.removeprefix(core))
        or (i.module == f"{PACKAGE}.core" and any(n.startswith("_") for n in i.names))
    ]
    assert not found, "\n".join(found)


def _public_in(module: str, name: str) -> bool:
    """Whether `from module import name` takes a public name of the package."""
    if name.startswith("_"):
        return False
    if f"{module}.{name}" in MODULES:  # a submodule
        return not _private(name)
    declared = _declared_all(module) if module in MODULES else None
    return declared is not None and name in declared


def test_the_demo_uses_only_public_names() -> None:
    demo = f"{PACKAGE}.demo"
    found: list[str] = []
    for m in MODULES:
        if not (m == demo or m.startswith(demo + ".")):
            continue
        for i in _imports(m):
            if not (i.module == PACKAGE or i.module.startswith(PACKAGE + ".")):
                continue
            if i.module.startswith(demo + ".") or i.module == demo:
                continue  # the demo's own modules
            where = f"{_shown(m)}:{i.line}"
            if _private(i.module):
                found.append(f"{where}: private module {i.module}")
                continue
            for name in i.names:
                if not _public_in(i.module, name):
                    found.append(f"{where}: {name} is not in {i.module}.__all__")
    assert not found, "\n".join(found)


def test_no_private_api_of_a_dependency() -> None:
    found = [
        f"{_shown(m)}:{i.line}: {i.module} " + ", ".join(n for n in i.names if n.startswith("_"))
        for m in MODULES
        for i in _imports(m)
        if not i.relative
        and _third_party(i.module)
        and (_private(i.module) or any(n.startswith("_") for n in i.names))
    ]
    assert not found, "\n".join(found)


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """Each check finds a violation of its rule (so none passes by seeing nothing)."""
    source = (
        "from opentelemetry.metrics._internal.instrument import _ProxyHistogram\n"
        "from ..core._activity import report\n"
        "from ..ui._http import Receive\n"
        "from ..core.tools import _describe_validation_error\n"
    )
    fake = f"{PACKAGE}.demo._fake_for_test"
    path = tmp_path / "fake.py"
    path.write_text(source)
    MODULES[fake] = path
    _tree.cache_clear()
    try:
        with pytest.raises(AssertionError, match="declares no __all__"):
            test_every_module_declares_all_of_names_it_binds(fake)
        with pytest.raises(AssertionError, match="core._activity"):
            test_nothing_outside_core_imports_a_private_core_module()
        with pytest.raises(AssertionError, match="private module advisorchain.ui._http"):
            test_the_demo_uses_only_public_names()
        with pytest.raises(AssertionError, match="_describe_validation_error"):
            test_the_demo_uses_only_public_names()
        with pytest.raises(AssertionError, match="_ProxyHistogram"):
            test_no_private_api_of_a_dependency()
    finally:
        del MODULES[fake]
        _tree.cache_clear()


__all__: list[str] = []
