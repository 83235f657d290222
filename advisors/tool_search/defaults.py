"""`default_index()`: the best index the installed extras allow."""

from __future__ import annotations

from .embedding import embeddings_available, minilm_index
from .examples import Examples
from .hybrid import HybridIndex
from .index import ToolIndex
from .keyword import KeywordIndex

NAME_WEIGHTS = (1.0, 0.0, 0.0)
"""`KeywordIndex` weights that rank by a tool's name words alone."""
NAME_LIST_WEIGHT = 0.25
"""The weight of the name-words ranking in `hybrid_index`'s fusion."""


def hybrid_index(embedding: ToolIndex, *, examples: Examples | None = None) -> HybridIndex:
    """Keyword, `embedding` and name-words rankings fused: the default's composition.

    `HybridIndex(KeywordIndex(), embedding, KeywordIndex(weights=NAME_WEIGHTS),
    weights=(1.0, 1.0, NAME_LIST_WEIGHT))`: reciprocal rank fusion (`rrf_k=5`) of BM25
    over all fields, the embedding ranking, and a BM25 ranking of the name words alone
    (lengths and idf of all fields), at a quarter weight. The name list's weight was
    chosen on half of the BFCL queries (`benchmarks/tool_search/rank_variants.py`); it
    lifts tools whose name the request spells, mostly on requests needing several tools.

    With `examples` (a mapping of tool names to example requests, or an `ExampleSource`
    such as `ExampleWriter`), the keyword index reads them as a fourth field and the
    embedding mixes them into each tool's vector (`embedding.with_examples(examples)`,
    so `embedding` must have that method: `TypeError` otherwise); the name-words
    ranking does not read them. Each index asks the source once per build; an
    `ExampleWriter` answers the second from its memory.
    """
    keyword = KeywordIndex()
    if examples is not None:
        with_examples = getattr(embedding, "with_examples", None)
        if not callable(with_examples):
            raise TypeError(f"{embedding!r} cannot read examples (it has no with_examples)")
        keyword = keyword.with_examples(examples)
        embedding = with_examples(examples)
    return HybridIndex(
        keyword,
        embedding,
        KeywordIndex(weights=NAME_WEIGHTS),
        weights=(1.0, 1.0, NAME_LIST_WEIGHT),
    )


def default_index(*, examples: Examples | None = None) -> ToolIndex:
    """The index `ToolSearchAdvisor()` uses when given none (there without examples).

    With the `embeddings` extra installed: `hybrid_index(minilm_index())`, keyword, local
    MiniLM and name-words rankings fused (the embeddings of definitions are kept in the
    persistent `EmbeddingCache` at `default_cache_path()`, so a restart does not embed
    the catalog again). Without it: `KeywordIndex()`. The check imports nothing heavy;
    the model loads on the first build. `examples` go to `hybrid_index`, or to the
    `KeywordIndex` without the extra.
    """
    if embeddings_available():
        return hybrid_index(minilm_index(), examples=examples)
    return KeywordIndex(examples=examples)
