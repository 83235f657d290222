"""The errors of an MCP toolset, and how a failure is described in their messages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.errors import AdvisorChainError, ServerReportedError
from ...core.scrub import safe_str

if TYPE_CHECKING:
    from ._content import McpCallResult


class McpError(AdvisorChainError):
    """Base class of the errors of an MCP toolset."""


class McpConnectionError(McpError):
    """The MCP server cannot be reached: it failed to start, died, or closed the connection."""


class McpProtocolError(McpError, ServerReportedError):
    """The server answered a request with a protocol error (unknown tool, bad params, ...).

    When the server sent it (a JSON-RPC error), `server_text` is the message the model
    reads, paths kept; when the SDK refused the server's answer here, it is `None` and the
    message is redacted like any local exception's.
    """

    def __init__(self, message: str, *, server_text: str | None = None) -> None:
        super().__init__(message)
        self.server_text = server_text


class McpToolError(McpError, ServerReportedError):
    """The server's tool ran and reported a failure (`isError`); the message is its text.

    `result` is the whole result (parts, structured content, the raw `CallToolResult`).
    `server_text` (what the model reads) is the message, paths kept: they are the server's.
    """

    def __init__(
        self,
        message: str,
        result: McpCallResult | None = None,
        *,
        server_text: str | None = None,
    ) -> None:
        super().__init__(message)
        self.result = result
        self.server_text = message if server_text is None else server_text


class McpTaskRequiredError(McpProtocolError):
    """The tool can only run as an MCP task (`taskSupport: "required"`), which the
    installed MCP SDK does not support."""


class McpTimeoutError(McpError):
    """The server sent no answer (and, for a tool call, no progress) in time.

    Not a `TimeoutError`: the tool loop reports it with its own message (how long the
    server stayed silent), not as the tool's overall timeout."""


def describe(exc: BaseException) -> str:
    """`Type: message` of a failure (the one failure inside a group), secrets redacted."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return describe(exc.exceptions[0])
    message = safe_str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


__all__ = [
    "McpConnectionError",
    "McpError",
    "McpProtocolError",
    "McpTaskRequiredError",
    "McpTimeoutError",
    "McpToolError",
    "describe",
]
