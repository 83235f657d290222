"""Tool search in a durable chain: the embeddings of an `EmbeddingIndex` are steps.

A `ToolSearchAdvisor` runs as workflow code; its index's embedding functions call out (an
embeddings API, a local model in a thread) and its `EmbeddingCache` reads a file, so on
the workflow side they are replaced, and on the worker side they are registered:

- workflow side, `durable_search(advisor, embedder_for, keys)`: the advisor rebuilt with
  the same settings over `durable_index(...)`, a copy of its index in which each
  `EmbeddingIndex` (alone, a `HybridIndex`'s part or a `SplitQueryIndex`'s inner one)
  embeds through `embedder_for(key)` (the seam's step `advisorchain.embeddings.embed`),
  without a cache; every other index is kept as it is (keyword, BM25 and regex indexes do
  no I/O). Its caches (built indexes, query vectors, proactive rankings) are its own, so
  a replay makes the same steps whatever other runs did.
- worker side, `search_embedders(advisors)`: the embedding functions those keys name, the
  documents' behind the index's `EmbeddingCache` (`CachedEmbedder`), so a catalog is
  embedded once per worker file, not once per conversation.

Keys: the `n`-th `EmbeddingIndex` met walking the advisors in order (each index depth
first, parts in order) embeds documents under `embedder_key(n)` and queries under
`embedder_key(n, queries=True)`; both sides walk the same chain the same way.

Examples an index asks a source for (`ExampleWriter`: a model call) would be I/O in
workflow code: an index with examples that are not a mapping is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from ..advisors.tool_search import (
    EmbeddingFunction,
    EmbeddingIndex,
    HybridIndex,
    SplitQueryIndex,
    ToolIndex,
    ToolSearchAdvisor,
)
from ..core.advisor import Advisor
from ..core.errors import ChainConfigurationError

EmbedderFor = Callable[[str], EmbeddingFunction]
"""The workflow side's embedding function for a registry key."""


def embedder_key(n: int, *, queries: bool = False) -> str:
    """The registry key of the `n`-th embedding index's documents (or queries) embedder."""
    key = "embeddings" if n == 0 else f"embeddings-{n}"
    return f"{key}-queries" if queries else key


def embedding_indexes(index: ToolIndex) -> Iterator[EmbeddingIndex]:
    """The `EmbeddingIndex`es of `index`, depth first, in order."""
    if isinstance(index, EmbeddingIndex):
        yield index
    elif isinstance(index, HybridIndex):
        for part in index.indexes:
            yield from embedding_indexes(part)
    elif isinstance(index, SplitQueryIndex):
        yield from embedding_indexes(index.index)


def durable_index(index: ToolIndex, embedder_for: EmbedderFor, keys: Iterator[int]) -> ToolIndex:
    """`index` with each `EmbeddingIndex` embedding through `embedder_for` (see the module),
    numbered from `keys`; `ChainConfigurationError` for examples that are not a mapping."""
    examples = getattr(index, "examples", None)
    if examples is not None and not isinstance(examples, Mapping):
        raise ChainConfigurationError(
            f"{index!r} asks {examples!r} for examples, which would run in workflow code: "
            "give a durable chain's tool search its examples as a mapping"
        )
    if isinstance(index, EmbeddingIndex):
        n = next(keys)
        return EmbeddingIndex(
            embedder_for(embedder_key(n)),
            batch_size=index.batch_size,
            query_cache=index.query_cache,
            query_embed=embedder_for(embedder_key(n, queries=True)),
            examples=index.examples,
            examples_weight=index.examples_weight,
        )
    if isinstance(index, HybridIndex):
        parts = [durable_index(part, embedder_for, keys) for part in index.indexes]
        return HybridIndex(*parts, weights=index.weights, rrf_k=index.rrf_k,
                           depth=index.depth, agreement=index.agreement)  # fmt: skip
    if isinstance(index, SplitQueryIndex):
        inner = durable_index(index.index, embedder_for, keys)
        return SplitQueryIndex(inner, depth=index.depth, rrf_k=index.rrf_k,
                               whole_weight=index.whole_weight)  # fmt: skip
    return index


def durable_search(
    advisor: ToolSearchAdvisor, embedder_for: EmbedderFor, keys: Iterator[int]
) -> ToolSearchAdvisor:
    """`advisor` rebuilt with its settings over `durable_index` of its index. A subclass
    holding an embedding index is refused (it could not be rebuilt as itself)."""
    template = advisor.indexes.template
    if type(advisor) is not ToolSearchAdvisor:
        if next(embedding_indexes(template), None) is not None:
            raise ChainConfigurationError(
                f"{type(advisor).__name__} searches with embeddings, which would run in "
                "workflow code: a durable chain rebuilds only ToolSearchAdvisor itself"
            )
        return advisor
    return ToolSearchAdvisor(
        durable_index(template, embedder_for, keys),
        max_results=advisor.max_results,
        min_tools=advisor.min_tools,
        pinned=advisor.pinned,
        search_tool_name=advisor.search_tool.name,
        cache_size=advisor.indexes.size,
        keep=advisor.keep,
        max_found=advisor.max_found,
        max_queries=advisor.max_queries,
        native=advisor.native,
        proactive=advisor.proactive,
    )


class CachedEmbedder:
    """An index's document embeddings on a worker: `index.vectors_of`, so texts embedded
    before are read from the index's cache and the others embedded in batches and cached;
    the vectors come back normalized, as the cache keeps them."""

    def __init__(self, index: EmbeddingIndex) -> None:
        self.index = index

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        known = await self.index.vectors_of(texts)
        return [known[t] for t in texts]


def search_embedders(advisors: Sequence[Advisor]) -> dict[str, EmbeddingFunction]:
    """The embedding functions of the `ToolSearchAdvisor`s among `advisors`, by key (see
    the module): documents through the index's cache when it has one, queries through
    its `query_embed` (or `embed`)."""
    found: dict[str, EmbeddingFunction] = {}
    searches = [a for a in advisors if type(a) is ToolSearchAdvisor]
    indexes = (i for a in searches for i in embedding_indexes(a.indexes.template))
    for n, index in enumerate(indexes):
        documents = index.embed if index.cache is None else CachedEmbedder(index)
        found[embedder_key(n)] = documents
        found[embedder_key(n, queries=True)] = index.query_embed or index.embed
    return found


__all__ = [
    "CachedEmbedder",
    "EmbedderFor",
    "durable_index",
    "durable_search",
    "embedder_key",
    "embedding_indexes",
    "search_embedders",
]
