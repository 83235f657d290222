from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from advisorchain.providers.local_weights import (
    MODEL_FILE_NAME,
    ModelWeightsError,
    WeightsSpec,
    assemble,
    ensure_local_model,
    part_paths,
    verify,
)

CHUNKS = [b"GGUF" + bytes(range(256)) * 5, b"middle part " * 1000, b"tail"]
JOINED = b"".join(CHUNKS)
SPEC = WeightsSpec(size=len(JOINED), sha256=hashlib.sha256(JOINED).hexdigest())


@pytest.fixture
def parts(tmp_path: Path) -> list[Path]:
    paths = []
    for i, chunk in enumerate(CHUNKS, start=1):
        path = tmp_path / "parts" / f"part{i:02}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(chunk)
        paths.append(path)
    return paths


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".part"))


def test_assembles_in_order_and_verifies(parts: list[Path], tmp_path: Path) -> None:
    target = tmp_path / "cache" / MODEL_FILE_NAME
    assert assemble(parts, target, expected=SPEC) == target
    assert target.read_bytes() == JOINED
    verify(target, expected=SPEC)
    assert _leftovers(target.parent) == []


def test_reuses_an_assembled_file(parts: list[Path], tmp_path: Path) -> None:
    target = tmp_path / MODEL_FILE_NAME
    assemble(parts, target, expected=SPEC)
    mtime = target.stat().st_mtime_ns
    for part in parts:
        part.unlink()  # reuse must not need the parts any more
    assert assemble(parts, target, expected=SPEC) == target
    assert target.stat().st_mtime_ns == mtime


def test_refuses_a_hash_mismatch_and_leaves_nothing(parts: list[Path], tmp_path: Path) -> None:
    parts[1].write_bytes(b"x" * len(CHUNKS[1]))  # same size, other bytes
    target = tmp_path / MODEL_FILE_NAME
    with pytest.raises(ModelWeightsError, match="sha256"):
        assemble(parts, target, expected=SPEC)
    assert not target.exists()
    assert _leftovers(tmp_path) == []


def test_refuses_a_size_mismatch(parts: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ModelWeightsError, match=r"bytes, expected"):
        assemble(parts[::-1][1:], tmp_path / MODEL_FILE_NAME, expected=SPEC)


def test_parts_in_the_wrong_order_are_refused(parts: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ModelWeightsError, match="sha256"):
        assemble(parts[::-1], tmp_path / MODEL_FILE_NAME, expected=SPEC)


def test_a_corrupted_cached_file_is_reassembled(parts: list[Path], tmp_path: Path) -> None:
    target = tmp_path / MODEL_FILE_NAME
    assemble(parts, target, expected=SPEC)
    target.write_bytes(b"y" * len(JOINED))  # same size; the stamp no longer matches
    assemble(parts, target, expected=SPEC)
    assert target.read_bytes() == JOINED


def test_missing_part_file(parts: list[Path], tmp_path: Path) -> None:
    parts[2].unlink()
    with pytest.raises(ModelWeightsError, match="missing"):
        assemble(parts, tmp_path / MODEL_FILE_NAME, expected=SPEC)


def test_ensure_from_part_packages(
    parts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packages = tmp_path / "site"
    for i, part in enumerate(parts, start=1):
        package = packages / f"fake_weights_part{i}"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"def get_part_path():\n    return {str(part)!r}\n")
    monkeypatch.syspath_prepend(str(packages))
    modules = [f"fake_weights_part{i}" for i in range(1, 4)]
    assert part_paths(modules) == parts
    monkeypatch.setenv("ADVISORCHAIN_CACHE_DIR", str(tmp_path / "cache"))
    path = ensure_local_model(modules=modules, expected=SPEC)
    assert path == tmp_path / "cache" / MODEL_FILE_NAME
    assert path.read_bytes() == JOINED
    for name in modules:
        sys.modules.pop(name, None)


def test_missing_weight_package_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"\[local\]"):
        part_paths(["advisorchain_no_such_weights_part"])
