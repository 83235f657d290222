"""`default_index()`: the best index the installed extras allow."""

from __future__ import annotations

from .embedding import embeddings_available, minilm_index
from .hybrid import HybridIndex
from .index import ToolIndex
from .keyword import KeywordIndex


def default_index() -> ToolIndex:
    """The index `ToolSearchAdvisor()` uses when given none.

    With the `embeddings` extra installed: `HybridIndex(KeywordIndex(), minilm_index())`,
    keyword and local MiniLM rankings fused (the embeddings of definitions are kept in
    the persistent `EmbeddingCache` at `default_cache_path()`, so a restart does not
    embed the catalog again). Without it: `KeywordIndex()`. The check imports nothing
    heavy; the model loads on the first build.
    """
    if embeddings_available():
        return HybridIndex(KeywordIndex(), minilm_index())
    return KeywordIndex()
