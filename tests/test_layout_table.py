"""docs/architecture.md's layout table and the tree agree (issue 36): every folder of the
package has its row, every module is named in it, and every module it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_THE_PACKAGE = ("tests", "benchmarks", "docs", "build", "dist", "node_modules")
"""Folders of a checkout that hold no module of the package (`build` and `dist`: a wheel's
build leaves copies there)."""
WHOLE_FOLDERS = ("demo",)
"""Folders whose row speaks for the folder as a whole: the demo is an application."""


def _layout() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return text[text.index("## Layout") : text.index("## Decisions")]


def _files() -> list[Path]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        top = relative.parts[0]
        if top in NOT_THE_PACKAGE or top.startswith(".") or "__pycache__" in relative.parts:
            continue
        found.append(relative)
    return found


def test_every_folder_of_the_package_has_its_row() -> None:
    layout = _layout()
    folders = {f.parent.as_posix() for f in _files() if f.name == "__init__.py"} - {"."}
    assert sorted(f for f in folders if f"`{f}/`" not in layout) == []


def test_every_module_is_named_in_the_layout_table() -> None:
    layout = _layout()
    unnamed = [
        f.as_posix()
        for f in _files()
        if f.name != "__init__.py"
        and f.parts[0] not in WHOLE_FOLDERS
        and f"`{f.name}`" not in layout
        and f"`{f.as_posix()}`" not in layout
    ]
    assert unnamed == []


def test_every_module_the_table_names_exists() -> None:
    names = {f.name for f in _files()} | {f.as_posix() for f in _files()}
    named = set(re.findall(r"`([\w/]+\.py)`", _layout()))
    assert sorted(n for n in named - names if not (ROOT / n).is_file()) == []


def test_the_checks_see_the_tree() -> None:
    files = {f.as_posix() for f in _files()}
    assert {"core/chain.py", "providers/http/connection.py", "toolsets/mcp/_toolset.py"} <= files
    assert not any(f.startswith(("tests/", "benchmarks/", ".venv/")) for f in files)
