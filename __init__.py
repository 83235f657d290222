"""advisorchain: LLM tool calling as a composable async chain of advisors.

chain = Chain([ToolCallingAdvisor()], model=model, tools=[get_weather])
response = await chain.call("What's the weather in Paris?")

The root exports the names an application writes: the chain and its advisors, requests,
responses, messages, stream events, tools and the errors to catch. Stores, approvers,
indexes and the other parts of the named advisors are in `advisorchain.advisors`;
chat models and their errors in `advisorchain.providers`. Modules under `core` are the
implementation: import from these three packages.
"""

from .advisors import (
    ApprovalAdvisor,
    Approve,
    LoggingAdvisor,
    MemoryAdvisor,
    Reject,
    ToolCallingAdvisor,
    ToolSearchAdvisor,
    TracingAdvisor,
    chain_tool,
)
from .core.advisor import Advisor, CallNext, Placement, StreamNext, ToolNext, advisor
from .core.chain import Chain
from .core.context import ToolContext
from .core.deferred import DeferredCall, Result
from .core.errors import (
    AdvisorChainError,
    ChainConfigurationError,
    InvalidDecisions,
    StreamInterruptedError,
    ToolCallLimitExceeded,
    ToolExecutionError,
    ToolIdleTimeoutError,
)
from .core.events import (
    AnswerDiscarded,
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
)
from .core.exports import publish
from .core.invocation import ToolInvocation, ToolResult
from .core.manager import ToolCallingManager
from .core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    dump_messages,
    load_messages,
)
from .core.model import ChatModel
from .core.options import ChatOptions
from .core.parts import DocumentPart, ImagePart, ReasoningPart, TextPart
from .core.prompt import InvalidPromptError, from_openai_messages
from .core.request import ChatRequest
from .core.response import ChatResponse
from .core.sync import SyncInAsyncError
from .core.tools import Tool, ToolDefinition, tool, tools_from
from .core.usage import Usage
from .providers.errors import ProviderError

__version__ = "0.3.0.dev0"

__all__ = [
    "Advisor",
    "AdvisorChainError",
    "AnswerDiscarded",
    "ApprovalAdvisor",
    "Approve",
    "AssistantMessage",
    "CallNext",
    "Chain",
    "ChainConfigurationError",
    "ChatModel",
    "ChatOptions",
    "ChatRequest",
    "ChatResponse",
    "DeferredCall",
    "DocumentPart",
    "ImagePart",
    "InvalidDecisions",
    "InvalidPromptError",
    "LoggingAdvisor",
    "MemoryAdvisor",
    "Message",
    "Placement",
    "ProviderError",
    "ReasoningDelta",
    "ReasoningPart",
    "Reject",
    "ResponseCompleted",
    "Result",
    "StreamEvent",
    "StreamInterruptedError",
    "StreamNext",
    "SyncInAsyncError",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallLimitExceeded",
    "ToolCallStarted",
    "ToolCallingAdvisor",
    "ToolCallingManager",
    "ToolContext",
    "ToolDefinition",
    "ToolExecutionError",
    "ToolIdleTimeoutError",
    "ToolInvocation",
    "ToolMessage",
    "ToolNext",
    "ToolProgress",
    "ToolResult",
    "ToolSearchAdvisor",
    "TracingAdvisor",
    "Usage",
    "UserMessage",
    "__version__",
    "advisor",
    "chain_tool",
    "dump_messages",
    "from_openai_messages",
    "load_messages",
    "tool",
    "tools_from",
]

publish(globals())
del publish
