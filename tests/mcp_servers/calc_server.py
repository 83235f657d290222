"""A small MCP server written with the SDK's own server API (`MCPServer`, formerly FastMCP).

Run as a script it speaks MCP on stdio; the HTTP tests import `build_server()` and serve
its streamable-HTTP app with uvicorn.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build_server() -> MCPServer:
    """A fresh server with a calculator, a failing tool, and tools that change the list.

    `CALC_EXTRA_TOOLS=N` in the environment adds N tools `constant_000`... (a big catalog).
    """
    server = MCPServer("calc")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        if b == 0:
            raise ToolError("cannot divide by zero")
        return a / b

    @server.tool()
    def whoami(tenant_id: str, question: str, ctx: Context) -> str:
        """Answer for a tenant; returns the raw arguments the server received."""
        assert ctx.request_context.params is not None
        return json.dumps(ctx.request_context.params.get("arguments"), sort_keys=True)

    @server.tool()
    def echo_arguments(text: str, ctx: Context) -> str:
        """Return the raw arguments the server received."""
        assert ctx.request_context.params is not None
        return json.dumps(ctx.request_context.params.get("arguments"), sort_keys=True)

    @server.tool()
    def header_value(name: str, ctx: Context) -> str:
        """The value of an HTTP request header the server received ('' if none)."""
        return (ctx.headers or {}).get(name.lower(), "")

    @server.tool()
    def reject(reason: str) -> str:
        """Answer with a JSON-RPC error instead of a result."""
        raise MCPError(-32602, f"rejected: {reason}")

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add a 'double' tool and tell the client the tool list changed."""
        server.add_tool(_double, name="double", description="Double a number.")
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool()
    def crash() -> str:
        """End the server process at once."""
        sys.stderr.flush()
        os._exit(3)

    for i in range(int(os.environ.get("CALC_EXTRA_TOOLS", "0"))):
        server.add_tool(
            _constant(i), name=f"constant_{i:03d}", description=f"Return the number {i}."
        )
    return server


def _constant(i: int) -> Callable[[], int]:
    def constant() -> int:
        return i

    return constant


def _double(x: int) -> int:
    return 2 * x


if __name__ == "__main__":
    build_server().run("stdio")
