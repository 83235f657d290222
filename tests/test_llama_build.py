"""The portable llama-cpp-python build: its cache key, its flags, and the cache lookup."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from advisorchain.providers.local import build as llama_build

ROOT = Path(__file__).resolve().parent.parent


def _key(**changes: str) -> str:
    values = {
        "version": "0.3.36",
        "flags": llama_build.PORTABLE_CMAKE_ARGS,
        "python_tag": "cp311",
        "platform_tag": "linux-x86_64-x86_64",
        "compiler": "gcc (Debian 12.2.0-14) 12.2.0",
    }
    values.update(changes)
    return llama_build.build_key(**values)


def test_key_is_stable_for_the_same_inputs() -> None:
    assert _key() == _key()
    assert _key().startswith("llama-cpp-python-0.3.36-")


@pytest.mark.parametrize(
    "change",
    [
        {"version": "0.3.37"},
        {"flags": "-DGGML_NATIVE=ON"},
        {"flags": llama_build.PORTABLE_CMAKE_ARGS + " -DGGML_AVX512=ON"},
        {"python_tag": "cp312"},
        {"platform_tag": "linux-aarch64-aarch64"},
        {"compiler": "clang version 14"},
    ],
)
def test_key_changes_with_everything_that_changes_the_binary(change: dict[str, str]) -> None:
    assert _key(**change) != _key()


def test_key_ignores_whitespace_in_flags() -> None:
    spaced = "  " + llama_build.PORTABLE_CMAKE_ARGS.replace(" ", "   ") + " "
    assert _key(flags=spaced) == _key()


def test_portable_flags_never_build_for_the_build_machine() -> None:
    flags = llama_build.PORTABLE_CMAKE_ARGS.split()
    assert "-DGGML_NATIVE=OFF" in flags
    assert "-DGGML_AVX2=ON" in flags
    for feature in ("AVX512", "AMX_TILE", "AMX_INT8", "AMX_BF16"):
        assert f"-DGGML_{feature}=OFF" in flags
    assert not any("march=native" in f for f in flags)


def test_flags_from_the_environment_change_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(llama_build.FLAGS_ENV, raising=False)
    portable = llama_build.build_key(compiler="cc")
    monkeypatch.setenv(llama_build.FLAGS_ENV, "-DGGML_NATIVE=ON")
    assert llama_build.cmake_args() == "-DGGML_NATIVE=ON"
    assert llama_build.build_key(compiler="cc") != portable


def test_cached_wheel_is_found_only_under_its_own_key(tmp_path: Path) -> None:
    key = _key()
    assert llama_build.cached_wheel(key, tmp_path) is None
    folder = tmp_path / "wheels" / key
    folder.mkdir(parents=True)
    wheel = folder / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"")
    assert llama_build.cached_wheel(key, tmp_path) == wheel
    assert llama_build.cached_wheel(_key(flags="-DGGML_NATIVE=ON"), tmp_path) is None


def test_pyproject_pins_the_version_the_build_uses() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    local = project["project"]["optional-dependencies"]["local"]
    pin = next(d for d in local if d.startswith("llama-cpp-python"))
    assert pin == f"llama-cpp-python[server]=={llama_build.LLAMA_CPP_PYTHON_VERSION}"


def test_the_makefile_installs_llama_from_the_keyed_cache() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "providers/local/build.py install" in makefile
    assert "CMAKE_ARGS" not in makefile.replace("ADVISORCHAIN_LLAMA_CMAKE_ARGS", "")
