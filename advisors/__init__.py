"""The named advisors: links of a chain that each own one concern."""

from .approval import (
    ApprovalAdvisor,
    ApprovalAlreadyResolved,
    ApprovalCall,
    ApprovalNotFound,
    ApprovalRequest,
    ApprovalStore,
    Approve,
    Approver,
    AuditRecord,
    CallbackApprover,
    ConsoleApprover,
    Defer,
    DeferredApprover,
    InMemoryApprovalStore,
    InvalidApprovalDecisions,
    PendingApproval,
    PostgresApprovalStore,
    Reject,
    SQLiteApprovalStore,
)
from .logging import LoggingAdvisor
from .memory import ConversationIdError, MemoryAdvisor, trim_history
from .memory_postgres import PostgresChatMemoryStore
from .memory_stores import (
    ChatMemoryStore,
    ChatMemoryStoreError,
    InMemoryChatMemoryStore,
    SQLiteChatMemoryStore,
)
from .small_model import SmallModelAdvisor
from .tool_calling import ToolCallingAdvisor
from .tool_search import (
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    RegexIndex,
    ToolIndex,
    ToolSearchAdvisor,
)
from .tracing import TracingAdvisor

__all__ = [
    "ApprovalAdvisor",
    "ApprovalAlreadyResolved",
    "ApprovalCall",
    "ApprovalNotFound",
    "ApprovalRequest",
    "ApprovalStore",
    "Approve",
    "Approver",
    "AuditRecord",
    "CallbackApprover",
    "ChatMemoryStore",
    "ChatMemoryStoreError",
    "ConsoleApprover",
    "ConversationIdError",
    "Defer",
    "DeferredApprover",
    "EmbeddingIndex",
    "HybridIndex",
    "InMemoryApprovalStore",
    "InMemoryChatMemoryStore",
    "InvalidApprovalDecisions",
    "KeywordIndex",
    "LoggingAdvisor",
    "MemoryAdvisor",
    "PendingApproval",
    "PostgresApprovalStore",
    "PostgresChatMemoryStore",
    "RegexIndex",
    "Reject",
    "SQLiteApprovalStore",
    "SQLiteChatMemoryStore",
    "SmallModelAdvisor",
    "ToolCallingAdvisor",
    "ToolIndex",
    "ToolSearchAdvisor",
    "TracingAdvisor",
    "trim_history",
]
