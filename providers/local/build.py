"""A portable llama-cpp-python, built once per build key and installed from that cache.

llama-cpp-python compiles llama.cpp on install. Its default build passes `-march=native`
(`GGML_NATIVE=ON`), which compiles in every instruction set the build machine's cpuid
advertises: a virtual machine that advertises AMX without enabling it then dies with SIGILL
on the first batched prompt. This module builds with `GGML_NATIVE=OFF` and an explicit
AVX2 feature set (`PORTABLE_CMAKE_ARGS`), which runs on any x86-64 CPU with AVX2.

pip's own wheel cache is keyed by the sdist, not by `CMAKE_ARGS`, so a native wheel sitting
there would be installed again whatever the flags. The wheel is therefore built with
`--no-cache-dir` and kept under `<cache>/wheels/<key>/`, where the key hashes everything
that changes the binary: the llama-cpp-python version, the CMake flags, the Python tag, the
platform and the compiler. A second clone on the same machine installs from there.

Control flow of `python providers/local/build.py install --python VENV_PYTHON`:
compute the key; if `<cache>/wheels/<key>/` holds a wheel, install it; otherwise build it
into a temporary folder, move it into place atomically, then install it. Runs before the
package is installed, so it uses the standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
"""The llama-cpp-python release the `local` extra pins (pyproject says the same)."""

PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF "
    "-DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF"
)
"""CMake flags of the portable build: AVX2/FMA/F16C/BMI2, nothing the CPU must enable at run
time (no AVX-512, no AMX), no multimodal helper library."""

FLAGS_ENV = "ADVISORCHAIN_LLAMA_CMAKE_ARGS"
"""Set to replace `PORTABLE_CMAKE_ARGS` (the key changes with it, so nothing stale is reused)."""


def cmake_args() -> str:
    """The CMake flags in force: `$ADVISORCHAIN_LLAMA_CMAKE_ARGS`, else the portable set."""
    return os.environ.get(FLAGS_ENV, "").strip() or PORTABLE_CMAKE_ARGS


def compiler_id() -> str:
    """The first line of `$CC --version` (`cc` by default), or "unknown"."""
    compiler = os.environ.get("CC", "cc")
    try:
        out = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


def build_key(
    *,
    version: str = LLAMA_CPP_PYTHON_VERSION,
    flags: str | None = None,
    python_tag: str | None = None,
    platform_tag: str | None = None,
    compiler: str | None = None,
) -> str:
    """The cache key of a build: a hash of everything that changes the compiled binary."""
    parts = [
        f"llama-cpp-python=={version}",
        " ".join((flags if flags is not None else cmake_args()).split()),
        python_tag or f"cp{sys.version_info.major}{sys.version_info.minor}",
        platform_tag or f"{sysconfig.get_platform()}-{platform.machine()}",
        compiler if compiler is not None else compiler_id(),
    ]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return f"llama-cpp-python-{version}-{digest}"


def default_cache_dir() -> Path:
    """`$ADVISORCHAIN_CACHE_DIR`, else `$XDG_CACHE_HOME/advisorchain` or `~/.cache/advisorchain`.

    The same rule as `weights.default_cache_dir` (restated: this file runs stand-alone).
    """
    explicit = os.environ.get("ADVISORCHAIN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "advisorchain"


def cached_wheel(key: str, cache_dir: Path | None = None) -> Path | None:
    """The wheel stored under `key`, or None."""
    folder = (cache_dir or default_cache_dir()) / "wheels" / key
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    return wheels[0] if wheels else None


def build_wheel(python: str, key: str, cache_dir: Path | None = None) -> Path:
    """Compile llama-cpp-python with `cmake_args()` (never from pip's cache) into the cache."""
    folder = (cache_dir or default_cache_dir()) / "wheels" / key
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder.parent))
    staging.chmod(0o755)
    env = dict(os.environ, CMAKE_ARGS=cmake_args())
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    try:
        subprocess.run(
            [
                python, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps",
                "--no-binary", "llama-cpp-python", "-w", str(staging),
                f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
            ],
            env=env,
            check=True,
        )  # fmt: skip
        (staging / "BUILD_FLAGS").write_text(cmake_args() + "\n")
        try:
            os.replace(staging, folder)
        except OSError:  # another build finished first: keep its wheel
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    wheel = cached_wheel(key, cache_dir)
    if wheel is None:
        raise RuntimeError(f"the build left no wheel in {folder}")
    return wheel


@contextlib.contextmanager
def _build_lock(cache_dir: Path | None) -> Iterator[None]:
    """One build per machine at a time: a second clone waits, then finds the wheel cached."""
    folder = (cache_dir or default_cache_dir()) / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_wheel(python: str, cache_dir: Path | None = None) -> Path:
    """The cached wheel of the current build key, compiled first if there is none."""
    key = build_key()
    with _build_lock(cache_dir):
        wheel = cached_wheel(key, cache_dir)
        if wheel is not None:
            print(f"llama-cpp-python: cached build {key}", flush=True)
            return wheel
        print(f"llama-cpp-python: compiling {key} (about 6 minutes on 2 cores, once)", flush=True)
        return build_wheel(python, key, cache_dir)


def install(python: str, cache_dir: Path | None = None) -> Path:
    """Install llama-cpp-python[server] into `python`'s environment from the keyed cache."""
    wheel = ensure_wheel(python, cache_dir)
    subprocess.run(
        [python, "-m", "pip", "install", "-q", f"llama-cpp-python[server] @ {wheel.as_uri()}"],
        check=True,
    )
    return wheel


def rebuild_command() -> str:
    """The command a user runs to rebuild the local model's llama.cpp portably."""
    return "make local-llama   (or: python providers/local/build.py install --force)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install", help="install the cached build (building it first if need be)")
    inst.add_argument("--python", default=sys.executable, help="the environment's interpreter")
    inst.add_argument("--force", action="store_true", help="drop the cached wheel and rebuild")
    sub.add_parser("key", help="print the build key")
    args = parser.parse_args(argv)
    if args.command == "key":
        print(build_key())
        return 0
    if args.force:
        shutil.rmtree(default_cache_dir() / "wheels" / build_key(), ignore_errors=True)
    install(args.python)
    return 0


__all__ = [
    "FLAGS_ENV",
    "LLAMA_CPP_PYTHON_VERSION",
    "PORTABLE_CMAKE_ARGS",
    "build_key",
    "build_wheel",
    "cached_wheel",
    "cmake_args",
    "compiler_id",
    "default_cache_dir",
    "ensure_wheel",
    "install",
    "main",
    "rebuild_command",
]


if __name__ == "__main__":
    raise SystemExit(main())
