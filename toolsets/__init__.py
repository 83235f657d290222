"""Toolsets: tools that come from outside the program, such as MCP servers.

Importing this package needs no optional extra; connecting an `McpToolset` needs `mcp`.
"""

from .mcp import (
    ApprovalPolicy,
    McpConnectionError,
    McpError,
    McpProtocolError,
    McpToolError,
    McpToolset,
    ToolFilter,
    result_text,
)

__all__ = [
    "ApprovalPolicy",
    "McpConnectionError",
    "McpError",
    "McpProtocolError",
    "McpToolError",
    "McpToolset",
    "ToolFilter",
    "result_text",
]
