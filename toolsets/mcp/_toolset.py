"""`McpToolset`: the tools of an MCP server (stdio or streamable HTTP) as chain `Tool`s.

Needs the optional extra `mcp` (`pip install 'mcp>=2.3,<3'`, or `pip install '.[mcp]'` in a
clone): the official MCP Python SDK, imported only when a toolset connects.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO, TypedDict, TypeVar, Unpack

import anyio

from ...core.context import ToolContext
from ...core.errors import ToolDefinitionError
from ...core.messages import AssistantMessage, UserMessage
from ...core.progress import bound_reporter
from ...core.scrub import scrub_error_text
from ...core.tools import Tool, ToolDefinition
from ._catalog import McpPrompt, McpResource, browsing_tools, prompt_of, resource_of
from ._content import (
    ContentLimits,
    McpCallResult,
    ResultPart,
    convert_contents,
    convert_prompt,
    convert_result,
)
from ._elicitation import ElicitationHandler, elicitation_callback
from ._errors import (
    McpConnectionError,
    McpError,
    McpProtocolError,
    McpTaskRequiredError,
    McpTimeoutError,
    McpToolError,
    describe,
)
from ._hints import (
    ApprovalPolicy,
    ToolHints,
    check_policy,
    needs_approval,
    tool_hints,
    trusted_effects,
)
from ._progress import ProgressCallback, RunningCalls, progress_listener, silence_deadline
from ._sampling import SamplingPolicy, sampling_callback
from ._server_log import ServerLogLevel, log_server_message
from ._tools import (
    ToolFilter,
    context_mapping,
    for_model,
    hide_arguments,
    tool_metadata,
    with_context,
)
from ._transport import (
    Connector,
    given_values,
    http_connector,
    http_name,
    require_mcp,
    sdk_version,
    stdio_connector,
)

if TYPE_CHECKING:
    import httpx2
    from mcp import ClientSession
    from mcp.client.session import IncomingMessage
    from mcp_types import CallToolResult, LoggingMessageNotificationParams
    from mcp_types import Tool as McpTool

logger = logging.getLogger("advisorchain.mcp")

_MAX_SERVER_TEXT = 2000
_MAX_LISTED = 10_000
_MAX_PAGES = 1000
_T = TypeVar("_T")


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
        connect: Connector,
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
        check_policy(requires_approval)
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
        self._running = RunningCalls()
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
        connect = stdio_connector(command, args, env, cwd, errlog)
        options.setdefault("name", os.path.basename(command))
        toolset = cls(connect, **options)
        toolset._given_values = given_values(env)
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
        connect = http_connector(url, headers or {}, http_client)
        options.setdefault("name", http_name(url))
        toolset = cls(connect, **options)
        toolset._given_values = given_values(headers, url=url)
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
        require_mcp()
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
                    elicitation_callback(self.elicitation, self.name, self._running.only)
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
            why = describe(exc)
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
            logger.warning("MCP server %r: transport error: %s", self.name, describe(message))

    async def _on_log(self, params: LoggingMessageNotificationParams) -> None:
        log_server_message(self.name, params)

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
        for _ in range(_MAX_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._request(what, list_page(params=params))
            listed.extend(getattr(page, field))
            if len(listed) > _MAX_LISTED:
                raise McpProtocolError(
                    f"MCP server {self.name!r} lists more than {_MAX_LISTED} items in {what}"
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
        mapped = context_mapping(definition, self.context_arguments)

        async def handler(arguments: dict[str, Any], context: ToolContext) -> McpCallResult:
            with self._running.running(context.call_id):
                return await self.call_result(
                    server_name,
                    with_context(arguments, context, mapped),
                    on_progress=bound_reporter(context.call_id),
                )

        needed = needs_approval(self.requires_approval, definition, hints)
        read_only, idempotent = trusted_effects(self.requires_approval, needed, hints)
        return Tool(
            self.prefix + server_name,
            definition.description,
            hide_arguments(definition.parameters, mapped),
            handler,
            requires_approval=needed,
            result_converter=for_model,
            timeout=self.max_call_time,
            metadata=tool_metadata(self.name, server_name, hints, output_schema),
            read_only=read_only,
            idempotent=idempotent,
        )

    # -- resources and prompts ------------------------------------------------------------------

    async def resources(self) -> list[McpResource]:
        """The server's resources (`resources/list`), cached until the server sends
        `notifications/resources/list_changed`."""
        session = self._live_session()
        if self._resources is None:
            listed = await self._paginate("resources/list", session.list_resources, "resources")
            self._resources = tuple(resource_of(r) for r in listed)
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
            self._prompts = tuple(prompt_of(p) for p in listed)
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
        return browsing_tools(
            self.name, self.prefix, self.max_call_time, self.resources, self.read_resource
        )

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
                f"({sdk_version()}) cannot make task-augmented calls"
            )
        session = self._live_session()
        timeout = self.timeout
        with anyio.CancelScope(deadline=silence_deadline(timeout)) as clock:
            raw: CallToolResult = await self._request(
                f"tools/call {name!r}",
                session.call_tool(
                    name,
                    dict(arguments),
                    progress_callback=progress_listener(clock, timeout, on_progress),
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
                f"MCP server {self.name!r} failed {what}: {describe(exc)}"
            ) from exc

    def _server_text(self, text: str) -> str:
        """A server's error text as the model may read it: bounded and scrubbed as a
        local tool's error is (`core.scrub.scrub_error_text`: no traceback, secrets,
        credentials), with the values this process gave the server (`env`, `headers`)
        replaced too; its paths are kept (they are the server's)."""
        return scrub_error_text(
            str(text)[:_MAX_SERVER_TEXT], secrets=self._given_values, keep_paths=True
        )

    def _connection_lost(self, exc: BaseException) -> McpConnectionError:
        self._lost = f"the connection to MCP server {self.name!r} was lost ({describe(exc)})"
        return McpConnectionError(self._lost)


__all__ = ["McpOptions", "McpToolset"]
