"""The named advisors: links of a chain that each own one concern, and their parts
(approvers, approval and memory stores, tool-search indexes)."""

from ..core.errors import TurnReplayError
from ..core.exports import publish
from ..core.turn import Proceed, StreamProceed, TurnAdvisor
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
    InvalidApprovalRecord,
    PostgresApprovalStore,
    Reject,
    SQLiteApprovalStore,
    StandingRule,
)
from .budget import (
    BudgetAdvisor,
    BudgetExceeded,
    BudgetStore,
    ConversationSpend,
    InMemoryBudgetStore,
    ModelPrice,
)
from .compaction import (
    ClearToolResults,
    CompactionAdvisor,
    CompactionBoundary,
    CompactionBoundaryStore,
    CompactionError,
    NativeCompaction,
)
from .guardrails import GuardrailAdvisor, GuardrailTripped, model_judge
from .logging import LoggingAdvisor
from .memory import (
    ChatMemoryStore,
    ChatMemoryStoreError,
    ConversationIdError,
    InMemoryChatMemoryStore,
    MemoryAdvisor,
    PostgresChatMemoryStore,
    SQLiteChatMemoryStore,
    trim_history,
)
from .redaction import RedactionAdvisor, RedactionBlocked, RedactionRule
from .small_model import SmallModelAdvisor
from .structured_output import StructuredOutputAdvisor, StructuredOutputError
from .subchain import SubchainError, chain_tool
from .text_transform import Span, TextRewriter, TextTransformAdvisor
from .tool_cache import ToolResultCacheAdvisor
from .tool_calling import ToolCallingAdvisor
from .tool_retry import ExponentialBackoff, ToolRetryAdvisor
from .tool_search import (
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    ProactiveSearch,
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
    "BudgetAdvisor",
    "BudgetExceeded",
    "BudgetStore",
    "CallbackApprover",
    "ChatMemoryStore",
    "ChatMemoryStoreError",
    "ClearToolResults",
    "CompactionAdvisor",
    "CompactionBoundary",
    "CompactionBoundaryStore",
    "CompactionError",
    "ConsoleApprover",
    "ConversationIdError",
    "ConversationSpend",
    "Defer",
    "DeferredApprover",
    "EmbeddingIndex",
    "ExponentialBackoff",
    "GuardrailAdvisor",
    "GuardrailTripped",
    "HybridIndex",
    "InMemoryApprovalStore",
    "InMemoryBudgetStore",
    "InMemoryChatMemoryStore",
    "InvalidApprovalRecord",
    "KeywordIndex",
    "LoggingAdvisor",
    "MemoryAdvisor",
    "ModelPrice",
    "NativeCompaction",
    "PostgresApprovalStore",
    "PostgresChatMemoryStore",
    "ProactiveSearch",
    "Proceed",
    "RedactionAdvisor",
    "RedactionBlocked",
    "RedactionRule",
    "RegexIndex",
    "Reject",
    "SQLiteApprovalStore",
    "SQLiteChatMemoryStore",
    "SmallModelAdvisor",
    "Span",
    "StandingRule",
    "StreamProceed",
    "StructuredOutputAdvisor",
    "StructuredOutputError",
    "SubchainError",
    "TextRewriter",
    "TextTransformAdvisor",
    "ToolCallingAdvisor",
    "ToolIndex",
    "ToolResultCacheAdvisor",
    "ToolRetryAdvisor",
    "ToolSearchAdvisor",
    "TracingAdvisor",
    "TurnAdvisor",
    "TurnReplayError",
    "chain_tool",
    "model_judge",
    "trim_history",
]

publish(globals())
del publish
