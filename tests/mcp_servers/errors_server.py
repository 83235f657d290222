"""An MCP server (SDK's `MCPServer`, stdio) whose tools fail the ways servers do: an
`isError` result about its own files, a JSON-RPC error, and an error text that echoes a
value the client gave it and carries the server's traceback."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent


def build_server() -> MCPServer:
    server = MCPServer("errors")

    @server.tool()
    def read_file(path: str) -> str:
        """Read one of the server's files."""
        raise ToolError(f"file not found: {path}")

    @server.tool()
    def checkout(path: str) -> str:
        """Check a path out of the server's repository (a JSON-RPC error)."""
        raise MCPError(
            code=INVALID_PARAMS, message=f"{path} is outside the allowed repository '/srv/repo'"
        )

    @server.tool()
    def leaky() -> CallToolResult:
        """An error text that echoes the client's token and a server traceback."""
        token = os.environ.get("SERVER_TOKEN", "")
        text = (
            f"login with token {token} failed in /srv/app/auth.py\n"
            "Traceback (most recent call last):\n"
            '  File "/srv/app/auth.py", line 3, in login\n'
            "KeyError: 'user'"
        )
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    return server


if __name__ == "__main__":
    build_server().run("stdio")
