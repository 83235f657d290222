"""`McpToolset`: the tools of an MCP server (stdio or streamable HTTP) as chain `Tool`s.

Needs the optional extra `mcp` (`pip install 'advisorchain[mcp]'`): the official MCP
Python SDK, imported only when a toolset connects.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias
from urllib.parse import urlsplit

import anyio

from ..core.context import ToolContext
from ..core.errors import AdvisorChainError, ChainConfigurationError, ToolDefinitionError
from ..core.tools import Tool, ToolDefinition

if TYPE_CHECKING:
    import httpx2
    from mcp import ClientSession
    from mcp.client.session import IncomingMessage
    from mcp.client.stdio import StdioServerParameters
    from mcp_types import CallToolResult
    from mcp_types import Tool as McpTool

logger = logging.getLogger("advisorchain.mcp")

ToolFilter: TypeAlias = Callable[[ToolDefinition], bool]
"""Decides from a server tool's definition (its own name, unprefixed) whether to keep it."""

ApprovalPolicy: TypeAlias = bool | Collection[str] | Callable[[ToolDefinition], bool]
"""Which tools need approval: all (`True`), none, server tool names, or a predicate."""

_Connector: TypeAlias = Callable[[], AbstractAsyncContextManager[Any]]


class McpError(AdvisorChainError):
    """Base class of the errors of an MCP toolset."""


class McpConnectionError(McpError):
    """The MCP server cannot be reached: it failed to start, died, or closed the connection."""


class McpProtocolError(McpError):
    """The server answered a request with a protocol error (unknown tool, bad params, ...)."""


class McpToolError(McpError):
    """The server's tool ran and reported a failure (`isError`); the message is its text."""


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "McpToolset needs the MCP SDK: install the 'mcp' extra "
            "(pip install 'advisorchain[mcp]')"
        ) from exc


class McpToolset:
    """Connects to one MCP server and exposes its tools as `Tool`s.

    Build it with `McpToolset.stdio(command, args, env=...)` or
    `McpToolset.http(url, headers=...)` and use it as an async context manager, in the
    task that also leaves it:

        async with McpToolset.stdio("python", ["server.py"], prefix="calc_") as toolset:
            chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())

    `tools()` lists the server's tools on first use and caches them; when the server
    sends `notifications/tools/list_changed`, the next `tools()` lists them again (tools
    whose definition did not change stay the same objects). Each tool's definition is the
    server's name (after `prefix`), description and input schema; calling it forwards
    the arguments with `tools/call`.

    - `filter`: keep only the tools for which it returns true (given the server's
      definition, unprefixed name).
    - `requires_approval`: `True`, server tool names, or a predicate on the definition;
      those tools get `requires_approval=True` for an `ApprovalAdvisor`.
    - `context_arguments`: `{server argument: tool-context key}`; for each tool that
      declares such an argument, it is removed from the schema the model sees and filled
      from the `ToolContext` at call time (a model-sent value is replaced; a missing
      context value is an error result). Tools that do not declare it never receive it,
      and no other `ToolContext` value is ever sent to the server.
    - `timeout`: seconds to wait for each server answer (also each tool's `timeout`).

    Effects: a tool whose annotations say `readOnlyHint: true` is `read_only`, one that
    says `idempotentHint: true` is `idempotent` (`tool_effects`), so the result cache and
    the retry link treat them as such. The hints are the server's word: connect only to
    servers you trust with them.

    Results: the text content of the result, joined by newlines (non-text content is
    described in brackets; with no content, the structured content as JSON). A result
    with `isError` raises `McpToolError` with that text, a protocol error raises
    `McpProtocolError`, and a dead server `McpConnectionError`, inside the tool's
    handler: the tool loop reports each to the model as an error result and the turn
    goes on (with `on_tool_error="raise"` it stops with `ToolExecutionError`, whose
    cause is that error). Once the connection is lost, every later call and `tools()`
    raise `McpConnectionError` at once.
    """

    def __init__(
        self,
        connect: _Connector,
        *,
        name: str,
        prefix: str = "",
        filter: ToolFilter | None = None,
        requires_approval: ApprovalPolicy = False,
        context_arguments: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.name = name
        self.prefix = prefix
        self.filter = filter
        self.requires_approval = requires_approval
        self.context_arguments: Mapping[str, str] = dict(context_arguments or {})
        self.timeout = timeout
        self._connect = connect
        self._stack: AsyncExitStack | None = None
        self._session: ClientSession | None = None
        self._lost: str | None = None
        self._stale = True
        self._tools: tuple[Tool, ...] = ()
        self._by_definition: dict[tuple[str, str, bool, bool], Tool] = {}
        self._list_lock: anyio.Lock | None = None
        self._changed: anyio.Event | None = None

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        errlog: TextIO | None = None,
        name: str | None = None,
        prefix: str = "",
        filter: ToolFilter | None = None,
        requires_approval: ApprovalPolicy = False,
        context_arguments: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> McpToolset:
        """A toolset over a server started as a subprocess, speaking MCP on stdin/stdout.

        `env` is added to a minimal default environment (the SDK's); the server's stderr
        goes to `errlog` (default: this process's stderr). `name` (default: the command's
        file name) is how errors and tool metadata refer to the server.
        """
        _require_mcp()
        from mcp.client.stdio import StdioServerParameters, stdio_client

        parameters: StdioServerParameters = StdioServerParameters(
            command=command,
            args=list(args),
            env=dict(env) if env is not None else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
        )

        def connect() -> AbstractAsyncContextManager[Any]:
            return stdio_client(parameters, errlog=errlog or sys.stderr)

        return cls(
            connect,
            name=name or os.path.basename(command),
            prefix=prefix,
            filter=filter,
            requires_approval=requires_approval,
            context_arguments=context_arguments,
            timeout=timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        name: str | None = None,
        prefix: str = "",
        filter: ToolFilter | None = None,
        requires_approval: ApprovalPolicy = False,
        context_arguments: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> McpToolset:
        """A toolset over a streamable-HTTP MCP endpoint (`http://host:port/mcp`).

        `headers` (e.g. `Authorization`) go with every request and are never shown in
        reprs or errors; or pass a configured `httpx2.AsyncClient` (the SDK's HTTP
        client) as `http_client`, which the toolset then does not close (with your own
        client, an unreachable server fails as the SDK makes it fail: its transport task
        group raises out of the `async with` block). `name` defaults to the URL without
        credentials or query.
        """
        _require_mcp()
        from mcp.client.streamable_http import streamable_http_client

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ChainConfigurationError("an MCP server URL must be http(s)://host[:port]/path")
        fixed_headers = dict(headers or {})

        def connect() -> AbstractAsyncContextManager[Any]:
            if http_client is not None:
                return streamable_http_client(url, http_client=http_client)
            return _http_transport(url, fixed_headers)

        port = f":{parts.port}" if parts.port else ""
        return cls(
            connect,
            name=name or f"{parts.scheme}://{parts.hostname}{port}{parts.path}",
            prefix=prefix,
            filter=filter,
            requires_approval=requires_approval,
            context_arguments=context_arguments,
            timeout=timeout,
        )

    def __repr__(self) -> str:
        return f"McpToolset({self.name!r}, prefix={self.prefix!r})"

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> McpToolset:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Start the transport and the MCP session (`async with` calls it)."""
        _require_mcp()
        from mcp import ClientSession

        if self._stack is not None:
            raise McpError(f"MCP toolset {self.name!r} is already connected")
        stack = AsyncExitStack()
        try:
            read, write = await stack.enter_async_context(self._connect())
            session = ClientSession(
                read,
                write,
                read_timeout_seconds=self.timeout,
                message_handler=self._on_message,
            )
            await stack.enter_async_context(session)
            await session.initialize()
        except Exception as exc:
            try:
                await stack.aclose()
            except Exception:  # the original failure is the one to report
                logger.debug("closing a failed MCP connection raised", exc_info=True)
            raise McpConnectionError(
                f"cannot connect to MCP server {self.name!r}: {_describe(exc)}"
            ) from exc
        self._stack = stack
        self._session = session
        self._lost = None
        self._stale = True
        self._list_lock = anyio.Lock()
        self._changed = anyio.Event()

    async def aclose(self) -> None:
        """End the session and stop the transport (the subprocess, for stdio)."""
        stack, self._stack, self._session = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def _on_message(self, message: IncomingMessage) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._stale = True
            if self._changed is not None:
                self._changed.set()
            self._changed = anyio.Event()
        elif isinstance(message, Exception):
            logger.warning("MCP server %r: transport error: %s", self.name, _describe(message))

    async def wait_for_tools_change(self) -> None:
        """Wait for the server's next `tools/list_changed` notification."""
        self._live_session()
        assert self._changed is not None
        await self._changed.wait()

    # -- tools --------------------------------------------------------------------------------

    async def tools(self) -> list[Tool]:
        """The server's tools as `Tool`s: cached, listed again after a change notification."""
        session = self._live_session()
        if not self._stale:
            return list(self._tools)
        assert self._list_lock is not None
        async with self._list_lock:
            if self._stale:
                self._stale = False
                try:
                    listed = await self._list_all(session)
                except BaseException:
                    self._stale = True
                    raise
                self._tools = tuple(self._build(listed))
        return list(self._tools)

    async def refresh(self) -> list[Tool]:
        """List the server's tools again now."""
        self._stale = True
        return await self.tools()

    async def _list_all(self, session: ClientSession) -> list[McpTool]:
        from mcp_types import PaginatedRequestParams

        listed: list[McpTool] = []
        cursor: str | None = None
        for _ in range(1000):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._request("tools/list", session.list_tools(params=params))
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return listed
        raise McpProtocolError(f"MCP server {self.name!r} keeps paginating tools/list")

    def _build(self, listed: Sequence[McpTool]) -> list[Tool]:
        tools: list[Tool] = []
        kept: dict[tuple[str, str, bool, bool], Tool] = {}
        for info in listed:
            schema = dict(info.input_schema or {"type": "object", "properties": {}})
            definition = ToolDefinition(info.name, info.description or "", schema)
            if self.filter is not None and not self.filter(definition):
                continue
            effects = tool_effects(info)
            key = (info.name, definition.fingerprint(), *effects)
            existing = self._by_definition.get(key)
            if existing is None:
                try:
                    existing = self._make_tool(definition, *effects)
                except ToolDefinitionError as exc:
                    logger.warning("MCP server %r: skipping tool: %s", self.name, exc)
                    continue
            kept[key] = existing
            tools.append(existing)
        self._by_definition = kept
        return tools

    def _make_tool(
        self, definition: ToolDefinition, read_only: bool = False, idempotent: bool = False
    ) -> Tool:
        server_name = definition.name
        declared = definition.parameters.get("properties") or {}
        mapped = {a: k for a, k in self.context_arguments.items() if a in declared}
        schema = _hide_arguments(definition.parameters, mapped)

        async def handler(arguments: dict[str, Any], context: ToolContext) -> str:
            return await self.call(server_name, _with_context(arguments, context, mapped))

        return Tool(
            self.prefix + server_name,
            definition.description,
            schema,
            handler,
            requires_approval=self._needs_approval(definition),
            timeout=self.timeout,
            metadata={"mcp_server": self.name, "mcp_tool": server_name},
            read_only=read_only,
            idempotent=idempotent,
        )

    def _needs_approval(self, definition: ToolDefinition) -> bool:
        policy = self.requires_approval
        if isinstance(policy, bool):
            return policy
        if callable(policy):
            return bool(policy(definition))
        if isinstance(policy, str):
            raise ChainConfigurationError("requires_approval takes a collection of tool names")
        return definition.name in policy

    # -- calls ----------------------------------------------------------------------------------

    async def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Call the server's tool `name` (unprefixed) and return its text result.

        Raises `McpToolError` for an `isError` result, `McpProtocolError` for a protocol
        error, `McpConnectionError` when the server is gone.
        """
        session = self._live_session()
        result: CallToolResult = await self._request(
            f"tools/call {name!r}", session.call_tool(name, dict(arguments))
        )
        text = result_text(result)
        if result.is_error:
            raise McpToolError(text or f"the MCP tool {name!r} reported an error")
        return text

    def _live_session(self) -> ClientSession:
        if self._lost is not None:
            raise McpConnectionError(self._lost)
        if self._session is None:
            raise McpConnectionError(
                f"MCP toolset {self.name!r} is not connected: use 'async with' or connect()"
            )
        return self._session

    async def _request(self, what: str, request: Any) -> Any:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            return await request
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._connection_lost(exc) from exc
            raise McpProtocolError(
                f"MCP server {self.name!r} failed {what}: {exc.message} (code {exc.code})"
            ) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise self._connection_lost(exc) from exc
        except (RuntimeError, ValueError) as exc:
            # The SDK's answers to results it cannot use (input required, claimed, invalid).
            raise McpProtocolError(
                f"MCP server {self.name!r} failed {what}: {_describe(exc)}"
            ) from exc

    def _connection_lost(self, exc: BaseException) -> McpConnectionError:
        self._lost = f"the connection to MCP server {self.name!r} was lost ({_describe(exc)})"
        return McpConnectionError(self._lost)


def tool_effects(info: McpTool) -> tuple[bool, bool]:
    """`(read_only, idempotent)` from a server tool's annotations (`readOnlyHint`,
    `idempotentHint`); a hint that is absent or not `true` means `False`."""
    annotations = getattr(info, "annotations", None)
    if annotations is None:
        return False, False
    read_only = getattr(annotations, "read_only_hint", None) is True
    idempotent = getattr(annotations, "idempotent_hint", None) is True
    return read_only, idempotent


def result_text(result: CallToolResult) -> str:
    """The text a model reads for an MCP tool result.

    Text blocks (and text resources) verbatim, other blocks as a bracketed note, joined by
    newlines; with no content at all, the structured content as JSON.
    """
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            if text is not None:
                parts.append(str(text))
            else:
                parts.append(f"[resource {getattr(resource, 'uri', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {getattr(block, 'uri', '')}]")
        else:
            mime = getattr(block, "mime_type", None) or "unknown type"
            parts.append(f"[{kind} content, {mime}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts)


def _with_context(
    arguments: Mapping[str, Any], context: ToolContext, mapped: Mapping[str, str]
) -> dict[str, Any]:
    """The arguments to send: the model's, with the mapped context values put in."""
    forwarded = {k: v for k, v in arguments.items() if k not in mapped}
    for argument, key in mapped.items():
        if key not in context:
            raise McpError(
                f"the tool context has no {key!r} value for the MCP argument {argument!r}"
            )
        forwarded[argument] = context[key]
    return forwarded


def _hide_arguments(schema: Mapping[str, Any], hidden: Collection[str]) -> dict[str, Any]:
    result = dict(schema)
    if not hidden:
        return result
    properties = dict(result.get("properties") or {})
    for name in hidden:
        properties.pop(name, None)
    result["properties"] = properties
    if "required" in result:
        result["required"] = [r for r in result["required"] if r not in hidden]
    return result


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


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
                error = {"code": CONNECTION_CLOSED, "message": f"unreachable ({_describe(exc)})"}
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
    "ApprovalPolicy",
    "McpConnectionError",
    "McpError",
    "McpProtocolError",
    "McpToolError",
    "McpToolset",
    "ToolFilter",
    "result_text",
    "tool_effects",
]
