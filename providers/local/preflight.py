"""A preflight for the local model: evaluate a real prompt in a subprocess before trusting it.

A llama.cpp compiled for instructions the CPU does not run (AVX-512 or AMX on a machine that
advertises them but does not enable them) loads fine and dies with SIGILL on the first
batched prompt, killing whatever process loaded it. `preflight()` runs that first prompt in
a child process instead: it loads the model, evaluates a prompt of at least
`PROMPT_TOKENS` tokens with the configured threads and generates one token. If the child
dies by a signal, `PreflightError` says which signal, what it means and the command that
rebuilds llama.cpp portably. A passed preflight is stamped (model file, llama-cpp-python
build, threads), so it runs once per combination.

Control flow of `ensure_preflight(model_path, n_threads)`: stamp present -> return; else run
the child; exit 0 -> write the stamp; a signal or a non-zero exit -> `PreflightError`.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ...core.errors import AdvisorChainError
from .build import PORTABLE_CMAKE_ARGS, rebuild_command
from .weights import default_cache_dir

PROMPT_TOKENS = 96
"""Tokens in the preflight's prompt: more than one batch row, like a real chat prompt."""

TIMEOUT_SECONDS = 300.0
"""How long the child may take (loading and a 96-token prompt take ~2 s on 2 cores)."""

_CHILD = r"""
import sys
from llama_cpp import Llama
path, threads, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = {"n_ctx": 512, "verbose": False}
if threads != "default":
    options["n_threads"] = int(threads)
llm = Llama(model_path=path, **options)
words = ("Check the order status, the carrier and the delivery date for the customer. " * 40)
tokens = llm.tokenize(words.encode())[:count]
llm.eval(tokens)
llm.sample()
print(len(tokens))
"""


class PreflightError(AdvisorChainError):
    """The local model's llama.cpp failed its preflight (died by a signal, or failed)."""


def child_command(model_path: Path, n_threads: int | None) -> list[str]:
    """The command of the preflight child for this model and thread count."""
    threads = "default" if n_threads is None else str(n_threads)
    return [sys.executable, "-c", _CHILD, str(model_path), threads, str(PROMPT_TOKENS)]


def preflight(
    model_path: Path,
    n_threads: int | None = None,
    *,
    command: Sequence[str] | None = None,
    timeout: float = TIMEOUT_SECONDS,
) -> None:
    """Run the preflight child (or `command`, for tests); raise `PreflightError` if it fails."""
    argv = list(command) if command is not None else child_command(model_path, n_threads)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, errors="replace"
        )
    except subprocess.TimeoutExpired:
        raise PreflightError(
            f"the local model's preflight did not finish in {timeout:.0f} s "
            f"(a {PROMPT_TOKENS}-token prompt); the machine may be overloaded"
        ) from None
    if done.returncode < 0:
        raise PreflightError(_signal_message(-done.returncode))
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise PreflightError(f"the local model's preflight failed (exit {done.returncode}): {last}")


def _signal_message(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    if number == signal.SIGILL:
        cause = (
            "llama.cpp was compiled for CPU instructions this machine does not run "
            "(e.g. -march=native with AVX-512/AMX that the CPU or VM advertises but does not "
            f"enable); the portable build uses {_feature_summary()}"
        )
    else:
        cause = "llama.cpp crashed while evaluating a prompt"
    return (
        f"the local model died with {name} in its preflight ({PROMPT_TOKENS}-token prompt): "
        f"{cause}. Rebuild it: {rebuild_command()}"
    )


def _feature_summary() -> str:
    enabled = [f[7:-3] for f in PORTABLE_CMAKE_ARGS.split() if f.startswith("-DGGML_") and
               f.endswith("=ON")]  # fmt: skip
    return "/".join(enabled) + " only"


def _stamp_path(model_path: Path, n_threads: int | None, cache_dir: Path | None) -> Path:
    stat = model_path.stat()
    identity = {
        "model": str(model_path.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "llama": _llama_build_identity(),
        "threads": n_threads,
        "prompt_tokens": PROMPT_TOKENS,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
    return (cache_dir or default_cache_dir()) / "preflight" / f"{digest}.ok"


def _llama_build_identity() -> str:
    """The installed llama-cpp-python's version and its shared libraries' sizes and times."""
    # Located, not imported: importing it would load the very libraries under test.
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    spec = find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return "missing"
    try:
        release = version("llama-cpp-python")
    except PackageNotFoundError:
        release = "unknown"
    folder = Path(spec.origin).parent
    libs = sorted(
        f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
        for p in folder.rglob("*.so*")
        if p.is_file()
    )
    return release + ";" + ",".join(libs)


def ensure_preflight(
    model_path: Path, n_threads: int | None = None, *, cache_dir: Path | None = None
) -> None:
    """Run the preflight once per model file, llama.cpp build and thread count."""
    if os.environ.get("ADVISORCHAIN_SKIP_PREFLIGHT") == "1":
        return
    stamp = _stamp_path(model_path, n_threads, cache_dir)
    if stamp.is_file():
        return
    preflight(model_path, n_threads)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text("ok\n")


__all__ = [
    "PROMPT_TOKENS",
    "PreflightError",
    "child_command",
    "ensure_preflight",
    "preflight",
]
