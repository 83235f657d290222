"""Human approval of tool calls: inline (terminal, callback) or deferred and durable."""

from ...core.errors import ApprovalNotFound
from ...core.resumption import ResumedCall, Resumption
from ...core.suspension import PendingApproval, Suspension
from .advisor import ApprovalAdvisor, Policy
from .approvers import Approver, CallbackApprover, ConsoleApprover, DeferredApprover
from .postgres_store import PostgresApprovalStore
from .sqlite_store import SQLiteApprovalStore
from .store import ApprovalStore, InMemoryApprovalStore
from .types import (
    ApprovalAlreadyResolved,
    ApprovalCall,
    ApprovalRequest,
    Approve,
    AuditRecord,
    Decision,
    Decisions,
    Defer,
    InvalidApprovalDecisions,
    InvalidApprovalRecord,
    PendingCall,
    PendingRecord,
    Reject,
    StandingRule,
    StoredResult,
    arguments_fingerprint,
)

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
    "Decision",
    "Decisions",
    "Defer",
    "DeferredApprover",
    "InMemoryApprovalStore",
    "InvalidApprovalDecisions",
    "InvalidApprovalRecord",
    "PendingApproval",
    "PendingCall",
    "PendingRecord",
    "Policy",
    "PostgresApprovalStore",
    "Reject",
    "ResumedCall",
    "Resumption",
    "SQLiteApprovalStore",
    "StandingRule",
    "StoredResult",
    "Suspension",
    "arguments_fingerprint",
]
