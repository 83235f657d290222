"""MCP servers' tools as chain `Tool`s: `McpToolset` and what it answers servers with.

Importing this package needs no optional extra; connecting an `McpToolset` needs `mcp`.
Its modules, by concept: `_toolset` (`McpToolset`: connection life, listing, calls),
`_transport` (stdio and streamable HTTP), `_tools` (a server tool as a `Tool`: schema,
arguments, metadata), `_hints` (annotations and the approval policy), `_content` (results
and content as parts), `_catalog` (resources and prompts), `_progress` (progress and the
silence clock), `_server_log` (the server's log messages), `_errors`, `_sampling`,
`_elicitation` (the server's requests) with `_elicitors` (console and deferred answers)
and `_answers` (checking an answer against the requested schema).
"""

from ._catalog import McpPrompt, McpPromptArgument, McpResource
from ._content import ContentLimits, McpCallResult, result_text
from ._elicitation import ElicitationAnswer, ElicitationHandler, ElicitationRequest
from ._elicitors import (
    ConsoleElicitor,
    DeferredElicitation,
    ElicitationNotWaiting,
    InvalidElicitationAnswer,
)
from ._errors import (
    McpConnectionError,
    McpError,
    McpProtocolError,
    McpTaskRequiredError,
    McpTimeoutError,
    McpToolError,
)
from ._hints import ApprovalPolicy, ToolHints, tool_effects, tool_hints
from ._progress import ProgressCallback
from ._sampling import SamplingPolicy, SamplingRequest
from ._server_log import ServerLogLevel, server_logger
from ._tools import ToolFilter
from ._toolset import McpOptions, McpToolset

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
