"""Tool search: progressive disclosure of large tool catalogs, and the indexes behind it."""

from ._cache import default_cache_path
from .advisor import ToolSearchAdvisor
from .bm25 import BM25Index
from .defaults import default_index, hybrid_index
from .e5 import e5_available, e5_index
from .embedding import (
    EmbeddingCache,
    EmbeddingFunction,
    EmbeddingIndex,
    embeddings_available,
    minilm_embedder,
    minilm_index,
)
from .examples import (
    ExampleCache,
    ExampleSource,
    ExampleWriter,
    ToolExamples,
    default_examples_path,
)
from .hybrid import Agreement, HybridIndex
from .index import QueryRejected, ToolIndex
from .intents import SplitQueryIndex, split_intents
from .keyword import KeywordIndex
from .proactive import ProactiveSearch
from .regex import RegexIndex

__all__ = [
    "Agreement",
    "BM25Index",
    "EmbeddingCache",
    "EmbeddingFunction",
    "EmbeddingIndex",
    "ExampleCache",
    "ExampleSource",
    "ExampleWriter",
    "HybridIndex",
    "KeywordIndex",
    "ProactiveSearch",
    "QueryRejected",
    "RegexIndex",
    "SplitQueryIndex",
    "ToolIndex",
    "ToolExamples",
    "ToolSearchAdvisor",
    "default_cache_path",
    "default_examples_path",
    "default_index",
    "e5_available",
    "e5_index",
    "embeddings_available",
    "hybrid_index",
    "minilm_embedder",
    "minilm_index",
    "split_intents",
]
