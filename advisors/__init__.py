"""The named advisors: links of a chain that each own one concern."""

from .memory import ConversationIdError, MemoryAdvisor, trim_history
from .memory_stores import (
    ChatMemoryStore,
    ChatMemoryStoreError,
    InMemoryChatMemoryStore,
    SQLiteChatMemoryStore,
)
from .tool_calling import ToolCallingAdvisor

__all__ = [
    "ChatMemoryStore",
    "ChatMemoryStoreError",
    "ConversationIdError",
    "InMemoryChatMemoryStore",
    "MemoryAdvisor",
    "SQLiteChatMemoryStore",
    "ToolCallingAdvisor",
    "trim_history",
]
