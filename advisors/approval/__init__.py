"""Human approval of tool calls: inline (terminal, callback) or deferred and durable."""

from .advisor import TRANSCRIPT_CHANGED, ApprovalAdvisor, Policy
from .approvers import Approver, CallbackApprover, ConsoleApprover, DeferredApprover
from .postgres_store import PostgresApprovalStore
from .sqlite_store import SQLiteApprovalStore
from .store import ApprovalStore, InMemoryApprovalStore
from .types import (
    APPROVAL,
    ApprovalAlreadyResolved,
    ApprovalCall,
    ApprovalNotFound,
    ApprovalRequest,
    Approve,
    AuditRecord,
    Decision,
    Decisions,
    Defer,
    InvalidApprovalRecord,
    PendingCall,
    PendingRecord,
    Reject,
    RoundCall,
    StandingRule,
    StoredResult,
    arguments_fingerprint,
)

__all__ = [
    "APPROVAL",
    "TRANSCRIPT_CHANGED",
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
    "Decision",
    "Decisions",
    "Defer",
    "DeferredApprover",
    "InMemoryApprovalStore",
    "InvalidApprovalRecord",
    "PendingCall",
    "PendingRecord",
    "Policy",
    "PostgresApprovalStore",
    "Reject",
    "RoundCall",
    "SQLiteApprovalStore",
    "StandingRule",
    "StoredResult",
    "arguments_fingerprint",
]
