"""Advisors and providers are siblings on core: neither imports the other.

Every module under `advisors/` and `providers/` is parsed and every import in it is read
(module level, inside functions, under `if TYPE_CHECKING:`), relative ones resolved
against the module's package, so no import of any kind crosses between the two.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import advisorchain

ROOT = Path(advisorchain.__file__).parent
SIBLINGS = ("advisors", "providers")


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("advisorchain", *parts))


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module `path` imports, as absolute dotted names (a `from x import y` counts
    as `x` and as `x.y`, since `y` may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def crossings(side: str, root: Path = ROOT) -> list[str]:
    """`module -> import` for every import from `side` into its sibling."""
    other = next(s for s in SIBLINGS if s != side)
    prefix = f"advisorchain.{other}"
    bad = []
    for path in sorted((root / side).rglob("*.py")):
        for module in sorted(imported_modules(path, root)):
            if module == prefix or module.startswith(prefix + "."):
                bad.append(f"{path.relative_to(root).as_posix()} -> {module}")
    return bad


@pytest.mark.parametrize("side", SIBLINGS)
def test_advisors_and_providers_do_not_import_each_other(side: str) -> None:
    assert crossings(side) == []


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The walk finds relative, absolute, function-local and TYPE_CHECKING imports."""
    (tmp_path / "advisors" / "deep").mkdir(parents=True)
    (tmp_path / "advisors" / "__init__.py").write_text("from .deep import x\n")
    (tmp_path / "advisors" / "deep" / "__init__.py").write_text(
        "from ...providers import fallback\n"
    )
    (tmp_path / "advisors" / "probe.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..providers.wire import WireFormat\n"
        "def f():\n"
        "    import advisorchain.providers.http_model\n"
        "    from .. import providers\n",
        encoding="utf-8",
    )
    assert crossings("advisors", tmp_path) == [
        "advisors/deep/__init__.py -> advisorchain.providers",
        "advisors/deep/__init__.py -> advisorchain.providers.fallback",
        "advisors/probe.py -> advisorchain.providers",
        "advisors/probe.py -> advisorchain.providers.http_model",
        "advisors/probe.py -> advisorchain.providers.wire",
        "advisors/probe.py -> advisorchain.providers.wire.WireFormat",
    ]
