"""Chat memory: the advisor that loads and saves a conversation, and its stores."""

from .advisor import ConversationIdError, MemoryAdvisor, trim_history
from .postgres_store import PostgresChatMemoryStore
from .sqlite_store import SQLiteChatMemoryStore
from .store import (
    ChatMemoryStore,
    ChatMemoryStoreError,
    CompactionBoundary,
    CompactionBoundaryStore,
    InMemoryChatMemoryStore,
)

__all__ = [
    "ChatMemoryStore",
    "ChatMemoryStoreError",
    "CompactionBoundary",
    "CompactionBoundaryStore",
    "ConversationIdError",
    "InMemoryChatMemoryStore",
    "MemoryAdvisor",
    "PostgresChatMemoryStore",
    "SQLiteChatMemoryStore",
    "trim_history",
]
