"""MCP servers' tools as chain `Tool`s: `McpToolset` and what it answers servers with.

Importing this package needs no optional extra; connecting an `McpToolset` needs `mcp`.
"""

from ._content import ContentLimits, McpCallResult, result_text
from ._elicitors import (
    ConsoleElicitor,
    DeferredElicitation,
    ElicitationNotWaiting,
    InvalidElicitationAnswer,
)
from ._elicitation import ElicitationAnswer, ElicitationHandler, ElicitationRequest
from ._sampling import SamplingPolicy, SamplingRequest
from ._toolset import (
    ApprovalPolicy,
    McpConnectionError,
    McpError,
    McpOptions,
    McpPrompt,
    McpPromptArgument,
    McpProtocolError,
    McpResource,
    McpTaskRequiredError,
    McpTimeoutError,
    McpToolError,
    McpToolset,
    ProgressCallback,
    ServerLogLevel,
    ToolFilter,
    ToolHints,
    server_logger,
    tool_effects,
    tool_hints,
)

__all__ = [
    "ApprovalPolicy",
    "ConsoleElicitor",
    "ContentLimits",
    "DeferredElicitation",
    "ElicitationAnswer",
    "ElicitationHandler",
    "ElicitationNotWaiting",
    "ElicitationRequest",
    "InvalidElicitationAnswer",
    "McpCallResult",
    "McpConnectionError",
    "McpError",
    "McpOptions",
    "McpPrompt",
    "McpPromptArgument",
    "McpProtocolError",
    "McpResource",
    "McpTaskRequiredError",
    "McpTimeoutError",
    "McpToolError",
    "McpToolset",
    "ProgressCallback",
    "SamplingPolicy",
    "SamplingRequest",
    "ServerLogLevel",
    "ToolFilter",
    "ToolHints",
    "result_text",
    "server_logger",
    "tool_effects",
    "tool_hints",
]
