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
from .memory_stores import (
    ChatMemoryStore,
    ChatMemoryStoreError,
    InMemoryChatMemoryStore,
    SQLiteChatMemoryStore,
)
from .tool_calling import ToolCallingAdvisor
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
    "InMemoryApprovalStore",
    "InMemoryChatMemoryStore",
    "InvalidApprovalDecisions",
    "LoggingAdvisor",
    "MemoryAdvisor",
    "PendingApproval",
    "PostgresApprovalStore",
    "Reject",
    "SQLiteApprovalStore",
    "SQLiteChatMemoryStore",
    "ToolCallingAdvisor",
    "TracingAdvisor",
    "trim_history",
]
