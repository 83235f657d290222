"""Toolsets: tools that come from outside the program, such as MCP servers.

Importing this package needs no optional extra; connecting an `McpToolset` needs `mcp`.
"""

from ..core.exports import publish
from .mcp import (
    ApprovalPolicy,
    ConsoleElicitor,
    ContentLimits,
    DeferredElicitation,
    ElicitationAnswer,
    ElicitationHandler,
    ElicitationNotWaiting,
    ElicitationRequest,
    InvalidElicitationAnswer,
    McpCallResult,
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
    SamplingPolicy,
    SamplingRequest,
    ToolFilter,
    ToolHints,
    result_text,
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
    "SamplingPolicy",
    "SamplingRequest",
    "ToolFilter",
    "ToolHints",
    "result_text",
]

publish(globals())
del publish
