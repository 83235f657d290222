"""advisorchain: LLM tool calling as a composable async chain of advisors.

chain = Chain([ToolCallingAdvisor()], model=model, tools=[get_weather])
response = await chain.call("What's the weather in Paris?")
"""

from .advisors import (
    ChatMemoryStore,
    ConversationIdError,
    InMemoryChatMemoryStore,
    LoggingAdvisor,
    MemoryAdvisor,
    PostgresChatMemoryStore,
    SQLiteChatMemoryStore,
    ToolCallingAdvisor,
    TracingAdvisor,
)
from .core.advisor import Advisor, CallNext, StreamNext, ToolHook, ToolNext, advisor
from .core.assembly import StreamAssembler
from .core.chain import Chain, Prompt
from .core.context import ToolContext
from .core.errors import (
    AdvisorChainError,
    ApprovalNotFound,
    ChainConfigurationError,
    ScriptExhaustedError,
    StreamInterruptedError,
    ToolCallLimitExceeded,
    ToolDefinitionError,
    ToolExecutionError,
)
from .core.events import (
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from .core.invocation import ToolInvocation, ToolOutcome, ToolResult
from .core.manager import ToolCallingManager, ToolRound, describe_exception
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
from .core.options import ChatOptions, ToolChoice
from .core.parts import ContentPart, DocumentPart, ImagePart, ReasoningPart, TextPart
from .core.request import ChatRequest
from .core.response import ChatResponse, FinishReason, PendingApproval
from .core.text_tool_calls import TextToolCallModel, parse_text_tool_calls
from .core.tools import (
    InvalidToolArguments,
    ResultConverter,
    Tool,
    ToolContent,
    ToolDefinition,
    default_result_converter,
    tool,
    tools_from,
)
from .core.usage import Usage
from .providers.errors import (
    AuthenticationError,
    BadRequestError,
    InvalidResponseError,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
)

__version__ = "0.1.0"

__all__ = [
    "Advisor",
    "AdvisorChainError",
    "ApprovalNotFound",
    "AssistantMessage",
    "AuthenticationError",
    "BadRequestError",
    "CallNext",
    "Chain",
    "ChainConfigurationError",
    "ChatMemoryStore",
    "ChatModel",
    "ChatOptions",
    "ChatRequest",
    "ChatResponse",
    "ContentPart",
    "ConversationIdError",
    "DocumentPart",
    "FinishReason",
    "ImagePart",
    "InMemoryChatMemoryStore",
    "InvalidResponseError",
    "InvalidToolArguments",
    "LoggingAdvisor",
    "MemoryAdvisor",
    "Message",
    "PendingApproval",
    "PostgresChatMemoryStore",
    "Prompt",
    "ProviderError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitError",
    "ReasoningDelta",
    "ReasoningPart",
    "ResponseCompleted",
    "ResultConverter",
    "SQLiteChatMemoryStore",
    "ScriptExhaustedError",
    "StreamAssembler",
    "StreamEvent",
    "StreamInterruptedError",
    "StreamNext",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "TextToolCallModel",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallLimitExceeded",
    "ToolCallStarted",
    "ToolCallingAdvisor",
    "ToolCallingManager",
    "ToolChoice",
    "ToolContent",
    "ToolContext",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolExecutionError",
    "ToolHook",
    "ToolInvocation",
    "ToolMessage",
    "ToolNext",
    "ToolOutcome",
    "ToolResult",
    "ToolRound",
    "TracingAdvisor",
    "Usage",
    "UserMessage",
    "__version__",
    "advisor",
    "default_result_converter",
    "describe_exception",
    "dump_messages",
    "load_messages",
    "parse_text_tool_calls",
    "tool",
    "tools_from",
]
