"""The named advisors: links of a chain that each own one concern."""

from .tool_calling import ToolCallingAdvisor
from .tool_search import (
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    RegexIndex,
    ToolIndex,
    ToolSearchAdvisor,
)

__all__ = [
    "EmbeddingIndex",
    "HybridIndex",
    "KeywordIndex",
    "RegexIndex",
    "ToolCallingAdvisor",
    "ToolIndex",
    "ToolSearchAdvisor",
]
