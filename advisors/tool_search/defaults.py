"""`default_index()`: the best index the installed extras allow."""

from __future__ import annotations

from .bm25 import BM25Index
from .embedding import embeddings_available, minilm_index
from .examples import Examples
from .hybrid import Agreement, HybridIndex
from .index import ToolIndex
from .keyword import KeywordIndex

__all__ = [
    "AGREEMENT",
    "BM25_LIST_WEIGHT",
    "NAME_LIST_WEIGHT",
    "NAME_WEIGHTS",
    "default_index",
    "hybrid_index",
]

NAME_WEIGHTS = (1.0, 0.0, 0.0)
"""`KeywordIndex` weights that rank by a tool's name words alone."""
NAME_LIST_WEIGHT = 0.25
"""The weight of the name-words ranking in `hybrid_index`'s fusion."""
BM25_LIST_WEIGHT = 1.0
"""The weight of the plain BM25 ranking (`BM25Index`) in `hybrid_index`'s fusion."""
AGREEMENT = Agreement(top=5, full=0.3, anchors=(0, 2, 3))
"""`hybrid_index`'s per-query weighting: the embedding ranking counts fully when at least
2 of its first 5 names are among the three lexical rankings' first 5, two thirds with
one, and not at all with none (`benchmarks/tool_search/fusion.py`)."""


def hybrid_index(embedding: ToolIndex, *, examples: Examples | None = None) -> HybridIndex:
    """Keyword, `embedding`, name-words and plain BM25 rankings fused: the default's
    composition.

    `HybridIndex(KeywordIndex(), embedding, KeywordIndex(weights=NAME_WEIGHTS),
    BM25Index(), weights=(1.0, 1.0, NAME_LIST_WEIGHT, BM25_LIST_WEIGHT),
    agreement=AGREEMENT)`: reciprocal rank fusion (`rrf_k=5`) of BM25 over all fields
    (stemmed, field-weighted), the embedding ranking, a BM25 ranking of the name words
    alone (lengths and idf of all fields) at a quarter weight, and plain BM25 over the
    whole text (unstemmed); per query, the embedding ranking's weight shrinks when its
    first 5 names share fewer than 2 with the three lexical rankings' first 5, to nothing
    when they share none (`Agreement`), so an embedding that ranks look-alike tools
    cannot outvote the words of the request. The name list's weight was chosen on half
    of the BFCL queries (`benchmarks/tool_search/rank_variants.py`), the BM25 list's and
    the agreement on the tuning halves of six catalogs (`benchmarks/tool_search/fusion.py`),
    by the smallest gain over plain BM25 among them (the agreement among the points that
    stay above plain BM25 even with a wrong embedding ranking).

    With `examples` (a mapping of tool names to example requests, or an `ExampleSource`
    such as `ExampleWriter`), the keyword index reads them as a fourth field and the
    embedding mixes them into each tool's vector (`embedding.with_examples(examples)`,
    so `embedding` must have that method: `TypeError` otherwise); the name-words
    and plain BM25 rankings do not read them. Each index asks the source once per build; an
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
        BM25Index(),
        weights=(1.0, 1.0, NAME_LIST_WEIGHT, BM25_LIST_WEIGHT),
        agreement=AGREEMENT,
    )


def default_index(*, examples: Examples | None = None) -> ToolIndex:
    """The index `ToolSearchAdvisor()` uses when given none (there without examples).

    With the `embeddings` extra installed: `hybrid_index(minilm_index())`, keyword, local
    MiniLM, name-words and plain BM25 rankings fused (the embeddings of definitions are kept in the
    persistent `EmbeddingCache` at `default_cache_path()`, so a restart does not embed
    the catalog again). Without it: `KeywordIndex()`. The check imports nothing heavy;
    the model loads on the first build. `examples` go to `hybrid_index`, or to the
    `KeywordIndex` without the extra.
    """
    if embeddings_available():
        return hybrid_index(minilm_index(), examples=examples)
    return KeywordIndex(examples=examples)
