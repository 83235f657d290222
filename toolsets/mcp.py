"""`McpToolset`: the tools of an MCP server (stdio or streamable HTTP) as chain `Tool`s.

Needs the optional extra `mcp` (`pip install 'mcp>=2.3,<3'`, or `pip install '.[mcp]'` in a
clone): the official MCP Python SDK, imported only when a toolset connects.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeAlias, TypedDict, TypeVar, Unpack
from urllib.parse import urlsplit

import anyio

from ..core._extras import install_hint
from ..core._progress import bound_reporter
from ..core._scrub import long_values, safe_str, scrub_error_text
from ..core.context import ToolContext
from ..core.errors import (
    AdvisorChainError,
    ChainConfigurationError,
    ServerReportedError,
    ToolDefinitionError,
)
from ..core.messages import AssistantMessage, UserMessage
from ..core.tools import Tool, ToolDefinition
from ._mcp_content import (
    ContentLimits,
    McpCallResult,
    ResultPart,
    convert_contents,
    convert_prompt,
    convert_result,
    result_text,
)
from ._mcp_sampling import (
    ElicitationHandler,
    SamplingPolicy,
    elicitation_callback,
    sampling_callback,
)

if TYPE_CHECKING:
    import httpx2
    from mcp import ClientSession
    from mcp.client.session import IncomingMessage
    from mcp.client.stdio import StdioServerParameters
    from mcp_types import CallToolResult, LoggingMessageNotificationParams
    from mcp_types import Tool as McpTool

logger = logging.getLogger("advisorchain.mcp")

ToolFilter: TypeAlias = Callable[[ToolDefinition], bool]
"""Decides from a server tool's definition (its own name, unprefixed) whether to keep it."""

ApprovalPolicy: TypeAlias = (
    bool | Literal["destructive"] | Collection[str] | Callable[[ToolDefinition], bool]
)
"""Which tools need approval: all (`True`), none (`False`), those the server marks
`destructiveHint: true` (`"destructive"`, the default), server tool names, or a predicate."""

_Connector: TypeAlias = Callable[[], AbstractAsyncContextManager[Any]]


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


@dataclass(frozen=True, slots=True)
class ToolHints:
    """A server tool's annotations, each `True` only when the server says exactly `true`."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False
    task_required: bool = False


@dataclass(frozen=True, slots=True)
class McpResource:
    """A resource a server lists: its URI, name, description and media type."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class McpPromptArgument:
    """An argument of a server's prompt."""

    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, slots=True)
class McpPrompt:
    """A prompt (template) a server lists, with its arguments."""

    name: str
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = ()


class McpTimeoutError(McpError):
    """The server sent no answer (and, for a tool call, no progress) in time.

    Not a `TimeoutError`: the tool loop reports it with its own message (how long the
    server stayed silent), not as the tool's overall timeout."""


class McpOptions(TypedDict, total=False):
    """The options `McpToolset.stdio` and `McpToolset.http` pass on (see `McpToolset`)."""

    name: str
    prefix: str
    filter: ToolFilter | None
    requires_approval: ApprovalPolicy
    context_arguments: Mapping[str, str] | None
    timeout: float | None
    connect_timeout: float | None
    max_call_time: float | None
    limits: ContentLimits | None
    log_level: ServerLogLevel | None
    sampling: SamplingPolicy | None
    elicitation: ElicitationHandler | None


ServerLogLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""An MCP (syslog) log level."""

_LOG_LEVELS: Mapping[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_MAX_LOG_CHARS = 2000
_MAX_PROGRESS_MESSAGE = 1000
_MAX_SERVER_TEXT = 2000
_MAX_TOOLS = 10_000
server_logger = logging.getLogger("advisorchain.mcp.server")
"""Where the servers' log messages go (`notifications/message`), at the mapped level."""


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError("McpToolset needs the MCP SDK: " + install_hint("mcp")) from exc


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
    - `requires_approval`: which tools get `requires_approval=True` for an
      `ApprovalAdvisor`: `"destructive"` (default: those whose annotations say
      `destructiveHint: true`), `True` (all), `False` (none: overrides the hints),
      server tool names, or a predicate on the definition. A tool that needs approval
      by this choice of the app (not by the server's `destructiveHint`) ignores the
      server's `readOnlyHint` and `idempotentHint`: they cannot lift that approval
      (`ApprovalAdvisor(auto_approve_read_only=True)`) nor have it cached or retried.
    - `context_arguments`: `{server argument: tool-context key}`; for each tool that
      declares such an argument, it is removed from the schema the model sees and filled
      from the `ToolContext` at call time (a model-sent value is replaced; a missing
      context value is an error result). Tools that do not declare it never receive it,
      and no other `ToolContext` value is ever sent to the server.
    - `connect_timeout`: seconds for the server to answer `initialize` (default 30; an
      `npx`-launched server needs a few).
    - `timeout`: seconds to wait for each later answer; for a tool call, seconds without
      an answer or a progress notification (progress counts as activity).
    - `max_call_time`: seconds a tool call may take in all, progress or not (the tool's
      `timeout` for the tool loop); default none.
    - `limits`: caps on one result (`ContentLimits`: blocks, text, bytes).
    - `log_level`: ask the server to send its log messages from this level on.
    - `sampling`: a `SamplingPolicy` lets the server ask a model of yours for
      completions (capped, optionally approved by a human); without it the client does
      not offer sampling.
    - `elicitation`: an `ElicitationHandler` answers the server's questions to the user
      (an accepted answer is checked against the requested schema): a callback,
      `ConsoleElicitor()` (a terminal), or `DeferredElicitation()` (the question defers the
      call until a resume answers it with `Result(...)` or `Reject(...)`); without it the
      client does not offer elicitation.

    Effects: a tool whose annotations say `readOnlyHint: true` is `read_only`, one that
    says `idempotentHint: true` is `idempotent` (`tool_hints`), so the result cache, the
    retry link and `FallbackModel` treat them as such; `destructiveHint: true` makes it
    need approval (above) and wins over `readOnlyHint`. `openWorldHint` is kept in
    `ToolHints` only and changes nothing. The hints are the server's word, so they may
    add caution, never remove it: pass `requires_approval=True` for a server you do not
    trust, and its hints then change nothing but what needs approval.

    Results: each call's value (`ToolResult.value`) is an `McpCallResult`: the parts the
    model reads (text, PNG/JPEG/GIF/WebP images, PDFs; a bracketed note for audio,
    other binary content and resource links), the structured content (which the SDK
    validates against the tool's `outputSchema`: a mismatch is an error result), and the
    raw `CallToolResult`. A result with `isError` raises `McpToolError` with its text
    (and the whole result), a protocol error `McpProtocolError`, a silent server
    `McpTimeoutError`, and a dead one `McpConnectionError`, inside the tool's handler:
    the tool loop reports each to the model as an error result and the turn goes on
    (with `on_tool_error="raise"` it stops with `ToolExecutionError`, whose cause is that
    error). What the server reported (`McpToolError`, and `McpProtocolError` from a
    JSON-RPC error) reaches the model with its paths (they are the server's), bounded,
    without tracebacks and scrubbed of the `env`/`headers` values given to the server and
    of secret-looking environment values; local failures are path-redacted as any
    exception. Once the connection is lost, every later call and `tools()` raise
    `McpConnectionError` at once.

    While `stream()` runs, each call sends a progress token; the server's progress
    notifications arrive as `ToolProgress` events with the call's id. The server's log
    messages go to the `advisorchain.mcp.server` logger at the mapped level. Cancelling
    a turn cancels its calls: the SDK sends `notifications/cancelled` to the server. A
    tool that requires MCP tasks (`taskSupport: "required"`) answers with
    `McpTaskRequiredError`: the installed SDK cannot run task-augmented calls.
    """

    def __init__(
        self,
        connect: _Connector,
        *,
        name: str,
        prefix: str = "",
        filter: ToolFilter | None = None,
        requires_approval: ApprovalPolicy = "destructive",
        context_arguments: Mapping[str, str] | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = 30.0,
        max_call_time: float | None = None,
        limits: ContentLimits | None = None,
        log_level: ServerLogLevel | None = None,
        sampling: SamplingPolicy | None = None,
        elicitation: ElicitationHandler | None = None,
    ) -> None:
        if isinstance(requires_approval, str) and requires_approval != "destructive":
            raise ChainConfigurationError(
                "requires_approval takes True, False, 'destructive', a collection of tool "
                "names or a predicate"
            )
        self.name = name
        self.prefix = prefix
        self.filter = filter
        self.requires_approval = requires_approval
        self.context_arguments: Mapping[str, str] = dict(context_arguments or {})
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_call_time = max_call_time
        self.limits = limits or ContentLimits()
        self.log_level = log_level
        self.sampling = sampling
        self.elicitation = elicitation
        self._connect = connect
        self._stack: AsyncExitStack | None = None
        self._session: ClientSession | None = None
        self._lost: str | None = None
        self._stale = True
        self._tools: tuple[Tool, ...] = ()
        self._by_definition: dict[tuple[Any, ...], Tool] = {}
        self._hints: dict[str, ToolHints] = {}
        self._list_lock: anyio.Lock | None = None
        self._changed: anyio.Event | None = None
        self._resources: tuple[McpResource, ...] | None = None
        self._prompts: tuple[McpPrompt, ...] | None = None
        self._running: dict[str, int] = {}
        """The chain tool calls running on this connection (call id -> how many)."""
        self._given_values: tuple[str, ...] = ()
        """Values this process gives the server (env, headers): never shown to the model."""

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
        **options: Unpack[McpOptions],
    ) -> McpToolset:
        """A toolset over a server started as a subprocess, speaking MCP on stdin/stdout.

        `env` is added to a minimal default environment (the SDK's: no secrets of this
        process); the server's stderr goes to `errlog` (default: this process's stderr).
        `name` (default: the command's file name) is how errors and tool metadata refer
        to the server. The other options are `McpToolset`'s.
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

        options.setdefault("name", os.path.basename(command))
        toolset = cls(connect, **options)
        toolset._given_values = _long_values(env)
        return toolset

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        **options: Unpack[McpOptions],
    ) -> McpToolset:
        """A toolset over a streamable-HTTP MCP endpoint (`http://host:port/mcp`).

        `headers` (e.g. `Authorization`) go with every request and are never shown in
        reprs or errors; or pass a configured `httpx2.AsyncClient` (the SDK's HTTP
        client) as `http_client`, which the toolset then does not close (with your own
        client, an unreachable server fails as the SDK makes it fail: its transport task
        group raises out of the `async with` block). `name` defaults to the URL without
        credentials or query. The other options are `McpToolset`'s.
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
        options.setdefault("name", f"{parts.scheme}://{parts.hostname}{port}{parts.path}")
        toolset = cls(connect, **options)
        toolset._given_values = _long_values(fixed_headers)
        if parts.password:
            toolset._given_values += (parts.password,)
        return toolset

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
        """Start the transport and the MCP session (`async with` calls it).

        Raises `McpConnectionError` when the server cannot be started or reached, or does
        not answer `initialize` within `connect_timeout` seconds.
        """
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
                message_handler=self._on_message,
                logging_callback=self._on_log,
                sampling_callback=(
                    sampling_callback(self.sampling, self.name) if self.sampling else None
                ),
                elicitation_callback=(
                    elicitation_callback(self.elicitation, self.name, self._running_call)
                    if self.elicitation
                    else None
                ),
            )
            await stack.enter_async_context(session)
            # The session's tasks run in its own task group: only these requests are timed.
            with anyio.fail_after(self.connect_timeout):
                await session.initialize()
                await self._set_log_level(session)
        except Exception as exc:
            try:
                await stack.aclose()
            except Exception:  # the original failure is the one to report
                logger.debug("closing a failed MCP connection raised", exc_info=True)
            why = _describe(exc)
            if isinstance(exc, TimeoutError):
                why = f"no answer to initialize within {self.connect_timeout:g} s"
            raise McpConnectionError(f"cannot connect to MCP server {self.name!r}: {why}") from exc
        self._stack = stack
        self._session = session
        self._lost = None
        self._stale = True
        self._list_lock = anyio.Lock()
        self._changed = anyio.Event()

    async def _set_log_level(self, session: ClientSession) -> None:
        capabilities = session.server_capabilities
        if self.log_level is None or capabilities is None or capabilities.logging is None:
            return
        await session.set_logging_level(self.log_level)

    async def aclose(self) -> None:
        """End the session and stop the transport (the subprocess, for stdio)."""
        stack, self._stack, self._session = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def _on_message(self, message: IncomingMessage) -> None:
        from mcp_types import (
            PromptListChangedNotification,
            ResourceListChangedNotification,
            ToolListChangedNotification,
        )

        if isinstance(message, ToolListChangedNotification):
            self._stale = True
            if self._changed is not None:
                self._changed.set()
            self._changed = anyio.Event()
        elif isinstance(message, ResourceListChangedNotification):
            self._resources = None
        elif isinstance(message, PromptListChangedNotification):
            self._prompts = None
        elif isinstance(message, Exception):
            logger.warning("MCP server %r: transport error: %s", self.name, _describe(message))

    async def _on_log(self, params: LoggingMessageNotificationParams) -> None:
        level = _LOG_LEVELS.get(str(params.level), logging.INFO)
        if not server_logger.isEnabledFor(level):
            return
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        if len(data) > _MAX_LOG_CHARS:
            data = data[:_MAX_LOG_CHARS] + "..."
        source = f" ({str(params.logger)[:100]})" if params.logger else ""
        server_logger.log(level, "MCP server %r%s: %s", self.name, source, data)

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
        tools: list[McpTool] = await self._paginate("tools/list", session.list_tools, "tools")
        return tools

    async def _paginate(self, what: str, list_page: Callable[..., Any], field: str) -> list[Any]:
        from mcp_types import PaginatedRequestParams

        listed: list[Any] = []
        cursor: str | None = None
        for _ in range(1000):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._request(what, list_page(params=params))
            listed.extend(getattr(page, field))
            if len(listed) > _MAX_TOOLS:
                raise McpProtocolError(
                    f"MCP server {self.name!r} lists more than {_MAX_TOOLS} items in {what}"
                )
            cursor = page.next_cursor
            if not cursor:
                return listed
        raise McpProtocolError(f"MCP server {self.name!r} keeps paginating {what}")

    def _build(self, listed: Sequence[McpTool]) -> list[Tool]:
        tools: list[Tool] = []
        kept: dict[tuple[Any, ...], Tool] = {}
        hints_by_name: dict[str, ToolHints] = {}
        for info in listed:
            schema = dict(info.input_schema or {"type": "object", "properties": {}})
            definition = ToolDefinition(info.name, info.description or "", schema)
            if self.filter is not None and not self.filter(definition):
                continue
            hints = tool_hints(info)
            output_schema = getattr(info, "output_schema", None)
            key = (info.name, definition.fingerprint(), hints, json.dumps(output_schema))
            existing = self._by_definition.get(key)
            if existing is None:
                try:
                    existing = self._make_tool(definition, hints, output_schema)
                except ToolDefinitionError as exc:
                    logger.warning("MCP server %r: skipping tool: %s", self.name, exc)
                    continue
            kept[key] = existing
            hints_by_name[info.name] = hints
            tools.append(existing)
        self._by_definition = kept
        self._hints = hints_by_name
        return tools

    def _make_tool(
        self,
        definition: ToolDefinition,
        hints: ToolHints = ToolHints(),
        output_schema: Mapping[str, Any] | None = None,
    ) -> Tool:
        server_name = definition.name
        declared = definition.parameters.get("properties") or {}
        mapped = {a: k for a, k in self.context_arguments.items() if a in declared}
        schema = _hide_arguments(definition.parameters, mapped)

        async def handler(arguments: dict[str, Any], context: ToolContext) -> McpCallResult:
            call_id = context.call_id
            self._running[call_id] = self._running.get(call_id, 0) + 1
            try:
                return await self.call_result(
                    server_name,
                    _with_context(arguments, context, mapped),
                    on_progress=bound_reporter(call_id),
                )
            finally:
                if self._running[call_id] == 1:
                    del self._running[call_id]
                else:
                    self._running[call_id] -= 1

        metadata: dict[str, Any] = {
            "mcp_server": self.name,
            "mcp_tool": server_name,
            "reports_progress": True,
        }
        if hints.destructive:
            metadata["mcp_destructive"] = True
        if output_schema is not None:
            metadata["mcp_output_schema"] = output_schema
        needs_approval = self._needs_approval(definition, hints)
        # Approval the app imposed (not the server's destructiveHint) is not the server's
        # to lift: its read-only and idempotent hints, which would let it be approved
        # without asking, served from a cache, retried or fallen back over, are ignored.
        trusted = not needs_approval or self.requires_approval == "destructive"
        return Tool(
            self.prefix + server_name,
            definition.description,
            schema,
            handler,
            requires_approval=needs_approval,
            result_converter=_for_model,
            timeout=self.max_call_time,
            metadata=metadata,
            read_only=trusted and hints.read_only,
            idempotent=trusted and hints.idempotent,
        )

    def _needs_approval(self, definition: ToolDefinition, hints: ToolHints) -> bool:
        policy = self.requires_approval
        if isinstance(policy, bool):
            return policy
        if policy == "destructive":
            return hints.destructive
        if callable(policy):
            return bool(policy(definition))
        if isinstance(policy, str):
            raise ChainConfigurationError("requires_approval takes a collection of tool names")
        return definition.name in policy

    # -- resources and prompts ------------------------------------------------------------------

    async def resources(self) -> list[McpResource]:
        """The server's resources (`resources/list`), cached until the server sends
        `notifications/resources/list_changed`."""
        session = self._live_session()
        if self._resources is None:
            listed = await self._paginate("resources/list", session.list_resources, "resources")
            self._resources = tuple(
                McpResource(
                    uri=str(r.uri),
                    name=str(r.name),
                    description=_short(r.description),
                    mime_type=r.mime_type,
                )
                for r in listed
            )
        return list(self._resources)

    async def read_resource(self, uri: str) -> tuple[ResultPart, ...]:
        """The contents of the resource `uri` (`resources/read`) as parts, within `limits`:
        text as text, images and PDFs as parts, other binaries as a note."""
        session = self._live_session()
        result = await self._request(f"resources/read {uri!r}", session.read_resource(uri))
        return convert_contents(result.contents, self.limits)

    async def prompts(self) -> list[McpPrompt]:
        """The server's prompts (`prompts/list`), cached until the server sends
        `notifications/prompts/list_changed`."""
        session = self._live_session()
        if self._prompts is None:
            listed = await self._paginate("prompts/list", session.list_prompts, "prompts")
            self._prompts = tuple(
                McpPrompt(
                    name=str(p.name),
                    description=_short(p.description),
                    arguments=tuple(
                        McpPromptArgument(
                            name=str(a.name),
                            description=_short(a.description),
                            required=a.required is True,
                        )
                        for a in p.arguments or ()
                    ),
                )
                for p in listed
            )
        return list(self._prompts)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[UserMessage | AssistantMessage]:
        """The prompt `name` filled with `arguments` (`prompts/get`), as chat messages to
        put into a request (user messages keep images; assistant messages are text)."""
        session = self._live_session()
        result = await self._request(
            f"prompts/get {name!r}", session.get_prompt(name, dict(arguments or {}))
        )
        return convert_prompt(result.messages, self.limits)

    def resource_tools(self) -> list[Tool]:
        """Two tools that let the model browse the server's resources:
        `{prefix}list_resources` and `{prefix}read_resource(uri)` (both read-only)."""

        async def list_resources(arguments: dict[str, Any], context: ToolContext) -> str:
            listed = await self.resources()
            lines = [
                f"{r.uri}"
                + (f" ({r.name})" if r.name else "")
                + (f": {r.description}" if r.description else "")
                for r in listed
            ]
            return "\n".join(lines) or "No resources."

        async def read(arguments: dict[str, Any], context: ToolContext) -> tuple[ResultPart, ...]:
            return await self.read_resource(str(arguments["uri"]))

        metadata = {"mcp_server": self.name}
        return [
            Tool(
                f"{self.prefix}list_resources",
                f"List the resources of the MCP server {self.name!r} (URI, name, description).",
                {"type": "object", "properties": {}},
                list_resources,
                metadata=metadata,
                read_only=True,
                idempotent=True,
                timeout=self.max_call_time,
            ),
            Tool(
                f"{self.prefix}read_resource",
                f"Read one resource of the MCP server {self.name!r} by its URI.",
                {
                    "type": "object",
                    "properties": {"uri": {"type": "string", "description": "The resource URI."}},
                    "required": ["uri"],
                },
                read,
                metadata=metadata,
                read_only=True,
                idempotent=True,
                timeout=self.max_call_time,
            ),
        ]

    # -- calls ----------------------------------------------------------------------------------

    async def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Call the server's tool `name` (unprefixed) and return the text of its result.

        Raises as `call_result` does.
        """
        return (await self.call_result(name, arguments)).text

    async def call_result(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        on_progress: ProgressCallback | None = None,
    ) -> McpCallResult:
        """Call the server's tool `name` (unprefixed) and return its whole result.

        Every call sends a progress token; `on_progress(progress, total, message)`
        receives the server's progress notifications for it, and each one restarts the
        `timeout` clock. Raises `McpToolError` for an `isError` result,
        `McpTimeoutError` when the server stays silent, `McpTaskRequiredError` for a tool
        that only runs as an MCP task, `McpProtocolError` for a protocol error,
        `McpConnectionError` when the server is gone.
        """
        hints = self._hints.get(name)
        if hints is not None and hints.task_required:
            raise McpTaskRequiredError(
                f"the MCP tool {name!r} of {self.name!r} runs only as an MCP task "
                f'(taskSupport: "required"), and the installed mcp SDK '
                f"({_sdk_version()}) cannot make task-augmented calls"
            )
        session = self._live_session()
        timeout = self.timeout
        with anyio.CancelScope() as clock:
            if timeout is not None:
                clock.deadline = anyio.current_time() + timeout

            async def notified(progress: float, total: float | None, message: str | None) -> None:
                if timeout is not None:
                    clock.deadline = anyio.current_time() + timeout
                if on_progress is not None:
                    text = str(message)[:_MAX_PROGRESS_MESSAGE] if message is not None else None
                    on_progress(float(progress), None if total is None else float(total), text)

            raw: CallToolResult = await self._request(
                f"tools/call {name!r}",
                session.call_tool(
                    name,
                    dict(arguments),
                    progress_callback=notified,
                ),
            )
        if clock.cancelled_caught:
            raise McpTimeoutError(
                f"MCP server {self.name!r} sent neither an answer nor progress for the "
                f"tool {name!r} within {timeout:g} s"
            )
        result = convert_result(raw, self.limits)
        if result.is_error:
            message = self._server_text(result.text or f"the MCP tool {name!r} reported an error")
            raise McpToolError(message, result)
        return result

    def _live_session(self) -> ClientSession:
        if self._lost is not None:
            raise McpConnectionError(self._lost)
        if self._session is None:
            raise McpConnectionError(
                f"MCP toolset {self.name!r} is not connected: use 'async with' or connect()"
            )
        return self._session

    async def _request(self, what: str, request: Awaitable[_T]) -> _T:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            if what.startswith("tools/call") or self.timeout is None:
                return await request
            with anyio.fail_after(self.timeout):
                return await request
        except TimeoutError as exc:
            raise McpTimeoutError(
                f"MCP server {self.name!r} did not answer {what} within {self.timeout:g} s"
            ) from exc
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._connection_lost(exc) from exc
            message = self._server_text(
                f"MCP server {self.name!r} failed {what}: {exc.message} (code {exc.code})"
            )
            raise McpProtocolError(message, server_text=message) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise self._connection_lost(exc) from exc
        except (RuntimeError, ValueError) as exc:
            # The SDK's answers to results it cannot use (input required, claimed, invalid,
            # structured content that does not match the output schema).
            raise McpProtocolError(
                f"MCP server {self.name!r} failed {what}: {_describe(exc)}"
            ) from exc

    def _running_call(self) -> str | None:
        """The id of the one chain tool call running on this connection, if just one is."""
        if len(self._running) == 1:
            ((call_id, count),) = self._running.items()
            if count == 1:
                return call_id
        return None

    def _server_text(self, text: str) -> str:
        """A server's error text as the model may read it: bounded and scrubbed as a
        local tool's error is (`core._scrub.scrub_error_text`: no traceback, secrets,
        credentials), with the values this process gave the server (`env`, `headers`)
        replaced too; its paths are kept (they are the server's)."""
        return scrub_error_text(
            str(text)[:_MAX_SERVER_TEXT], secrets=self._given_values, keep_paths=True
        )

    def _connection_lost(self, exc: BaseException) -> McpConnectionError:
        self._lost = f"the connection to MCP server {self.name!r} was lost ({_describe(exc)})"
        return McpConnectionError(self._lost)


ProgressCallback: TypeAlias = Callable[[float, "float | None", "str | None"], None]
"""`(progress, total, message)` for each progress notification of one call."""

_T = TypeVar("_T")


def _long_values(values: Mapping[str, str] | None) -> tuple[str, ...]:
    """The values (and their words: `Bearer <token>`) long enough to be worth scrubbing."""
    return long_values((values or {}).values())


def _short(text: str | None, limit: int = 2000) -> str | None:
    return None if text is None else str(text)[:limit]


def _for_model(value: Any) -> str | Sequence[ResultPart]:
    if isinstance(value, McpCallResult):
        return value.for_model()
    return str(value)


def _sdk_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"mcp {version('mcp')}"
    except PackageNotFoundError:
        return "mcp"


def tool_hints(info: McpTool) -> ToolHints:
    """The annotations of a server tool (`readOnlyHint`, `destructiveHint`,
    `idempotentHint`, `openWorldHint`) and whether it requires MCP tasks.

    A hint that is absent or not exactly `true` is `False` (the MCP default of
    `destructiveHint` is true, but almost no server sets it: pass `requires_approval=True`
    for servers you do not trust). Hints may add caution, never remove it: a tool that
    says both `readOnlyHint: true` and `destructiveHint: true` is destructive, not
    read-only.
    """
    annotations = getattr(info, "annotations", None)
    execution = getattr(info, "execution", None)
    task_required = getattr(execution, "task_support", None) == "required"
    if annotations is None:
        return ToolHints(task_required=task_required)
    destructive = getattr(annotations, "destructive_hint", None) is True
    return ToolHints(
        read_only=not destructive and getattr(annotations, "read_only_hint", None) is True,
        destructive=destructive,
        idempotent=getattr(annotations, "idempotent_hint", None) is True,
        open_world=getattr(annotations, "open_world_hint", None) is True,
        task_required=task_required,
    )


def tool_effects(info: McpTool) -> tuple[bool, bool]:
    """`(read_only, idempotent)` from a server tool's annotations (see `tool_hints`)."""
    hints = tool_hints(info)
    return hints.read_only, hints.idempotent


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
    message = safe_str(exc).strip()
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
    "ContentLimits",
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
    "ServerLogLevel",
    "ToolFilter",
    "ToolHints",
    "result_text",
    "server_logger",
    "tool_effects",
    "tool_hints",
]
