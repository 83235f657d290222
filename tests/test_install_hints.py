"""Install hints work for a clone and a built wheel: advisorchain is on no package index,
so no hint may say `pip install 'advisorchain[...]'`; the requirements a hint names are
those pyproject.toml declares for the extra."""

from __future__ import annotations

import builtins
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

import advisorchain
from advisorchain.core.extras import EXTRAS, install_hint

ROOT = Path(advisorchain.__file__).resolve().parent
INDEX_FORM = re.compile(r"""pip install\s+(-e\s+)?['"]?advisorchain\[""")


def _texts() -> list[Path]:
    skip = {".venv", ".git", "build", "dist", "node_modules"}
    return [
        p
        for p in ROOT.rglob("*")
        if p.suffix in {".py", ".md", ".toml", ".txt", ".cfg"}
        and not skip.intersection(p.relative_to(ROOT).parts)
        and p.name != "test_install_hints.py"
    ]


def test_no_hint_names_the_package_on_an_index() -> None:
    offenders = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in _texts()
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if INDEX_FORM.search(line) and "fails" not in line
    ]
    assert offenders == []


def test_the_hints_requirements_are_the_extras_of_pyproject() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = declared["project"]["optional-dependencies"]
    for name, requirements in EXTRAS.items():
        assert list(requirements) == extras[name], name
        hint = install_hint(name)
        assert all(f"'{r}'" in hint for r in requirements)
        assert f"pip install '.[{name}]'" in hint
    assert "make local-llama" in install_hint("local")


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in modules:
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)


def test_a_missing_postgres_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from advisorchain.advisors import PostgresApprovalStore

    _without(monkeypatch, "psycopg")
    with pytest.raises(ImportError) as caught:
        PostgresApprovalStore("postgresql://127.0.0.1:1/none")
    message = str(caught.value)
    assert "pip install 'psycopg[binary]>=3.1'" in message
    assert "pip install '.[postgres]'" in message


def test_a_missing_mcp_sdk_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from advisorchain.toolsets.mcp import _transport

    _without(monkeypatch, "mcp")
    with pytest.raises(ImportError, match=re.escape("pip install 'mcp>=2.3,<3'")):
        _transport.require_mcp()
