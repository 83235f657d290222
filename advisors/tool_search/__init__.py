"""Tool search: progressive disclosure of large tool catalogs, and the indexes behind it."""

from .advisor import ToolSearchAdvisor
from .embedding import EmbeddingFunction, EmbeddingIndex, minilm_embedder
from .hybrid import HybridIndex
from .index import QueryRejected, ToolIndex
from .keyword import KeywordIndex
from .regex import RegexIndex

__all__ = [
    "EmbeddingFunction",
    "EmbeddingIndex",
    "HybridIndex",
    "KeywordIndex",
    "QueryRejected",
    "RegexIndex",
    "ToolIndex",
    "ToolSearchAdvisor",
    "minilm_embedder",
]
