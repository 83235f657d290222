"""How a toolset reaches its server: the SDK's stdio and streamable-HTTP transports.

Each `*_connector` checks its arguments and returns a `Connector`: a callable that opens
the transport (an async context manager of the read and write streams) when the toolset
connects. The MCP SDK is imported only then, or when `require_mcp` checks it is there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias
from urllib.parse import urlsplit

from ...core.errors import ChainConfigurationError
from ...core.extras import install_hint
from ...core.scrub import long_values
from ._errors import describe

if TYPE_CHECKING:
    import httpx2

Connector: TypeAlias = Callable[[], AbstractAsyncContextManager[Any]]
"""Opens a transport: an async context manager of the `(read, write)` streams."""


def require_mcp() -> None:
    """Raise `ImportError` saying what to install when the MCP SDK is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError("McpToolset needs the MCP SDK: " + install_hint("mcp")) from exc


def sdk_version() -> str:
    """`mcp <version>` of the installed SDK, for messages."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"mcp {version('mcp')}"
    except PackageNotFoundError:
        return "mcp"


def given_values(values: Mapping[str, str] | None, *, url: str | None = None) -> tuple[str, ...]:
    """The values given to a server (and their words: `Bearer <token>`) long enough to be
    worth scrubbing from what the model reads, and the password in its `url`."""
    found = long_values((values or {}).values())
    password = urlsplit(url).password if url is not None else None
    return (*found, password) if password else found


def stdio_connector(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    errlog: TextIO | None,
) -> Connector:
    """A server started as a subprocess, speaking MCP on stdin/stdout (the SDK's minimal
    environment plus `env`; its stderr to `errlog`, default this process's stderr)."""
    require_mcp()
    from mcp.client.stdio import StdioServerParameters, stdio_client

    parameters: StdioServerParameters = StdioServerParameters(
        command=command,
        args=list(args),
        env=dict(env) if env is not None else None,
        cwd=os.fspath(cwd) if cwd is not None else None,
    )

    def connect() -> AbstractAsyncContextManager[Any]:
        return stdio_client(parameters, errlog=errlog or sys.stderr)

    return connect


def http_connector(
    url: str, headers: Mapping[str, str], http_client: httpx2.AsyncClient | None
) -> Connector:
    """A streamable-HTTP endpoint, over `http_client` or a client of its own that sends
    `headers`. Raises `ChainConfigurationError` for a URL that is not http(s)."""
    require_mcp()
    from mcp.client.streamable_http import streamable_http_client

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ChainConfigurationError("an MCP server URL must be http(s)://host[:port]/path")
    fixed_headers = dict(headers)

    def connect() -> AbstractAsyncContextManager[Any]:
        if http_client is not None:
            return streamable_http_client(url, http_client=http_client)
        return _http_transport(url, fixed_headers)

    return connect


def http_name(url: str) -> str:
    """A server's name from its URL: without credentials, query or fragment."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The streamable-HTTP transport over an HTTP client it opens and closes itself.

    The SDK lets a failed connection escape its transport's task group, which would
    cancel the caller's whole `async with` block; the client's transport turns such
    failures into a JSON-RPC "connection closed" error for the one request instead.
    """
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import CONNECTION_CLOSED

    class Unreachable(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            try:
                return await self.inner.handle_async_request(request)
            except httpx2.TransportError as exc:
                error = {"code": CONNECTION_CLOSED, "message": f"unreachable ({describe(exc)})"}
                return httpx2.Response(
                    503,
                    json={"jsonrpc": "2.0", "id": None, "error": error},
                    request=request,
                )

        async def aclose(self) -> None:
            await self.inner.aclose()

    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: reads wait for events
    client = httpx2.AsyncClient(headers=headers, timeout=timeout, transport=Unreachable())
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


__all__ = [
    "Connector",
    "given_values",
    "http_connector",
    "http_name",
    "require_mcp",
    "sdk_version",
    "stdio_connector",
]
