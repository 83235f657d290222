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
    "ConsoleApprover",
    "Defer",
    "DeferredApprover",
    "InMemoryApprovalStore",
    "InvalidApprovalDecisions",
    "LoggingAdvisor",
    "PendingApproval",
    "PostgresApprovalStore",
    "Reject",
    "SQLiteApprovalStore",
    "ToolCallingAdvisor",
    "TracingAdvisor",
]
