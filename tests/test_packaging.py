"""`pip install .` installs one package, `advisorchain`, typed, and nothing else."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import advisorchain

ROOT = Path(advisorchain.__file__).resolve().parent
SKIP = shutil.ignore_patterns(
    ".venv*",
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    "benchmarks",
    "tests",
    ".cache",
)


def test_wheel_contains_only_the_advisorchain_package(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=SKIP)
    packages = {
        f"advisorchain/{init.parent.relative_to(source).as_posix()}/__init__.py".replace("/./", "/")
        for init in source.rglob("__init__.py")
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("advisorchain-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"advisorchain"}
    assert "advisorchain/py.typed" in names
    assert "advisorchain/core/chain.py" in names
    assert "advisorchain/advisors/tool_calling.py" in names
    assert "advisorchain/providers/scripted.py" in names
    assert not any(n.startswith("advisorchain/tests/") for n in names)
    assert packages, "no package found in the copied tree"
    missing = sorted(packages - set(names))
    assert not missing, f"packages left out of the wheel (pyproject's packages list): {missing}"


def test_the_package_reports_the_version_pyproject_declares() -> None:
    root = Path(advisorchain.__file__).resolve().parent
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert advisorchain.__version__ == declared
    assert f"advisorchain-{declared}-py3-none-any.whl" in (root / "README.md").read_text()
