"""advisorchain: `Chain([ToolCallingAdvisor()])` around a `ScriptedChatModel` function.

Per round: the chain's request goes to the scripted model, which returns `ToolCall`s
(pydantic models); the loop parses and validates the arguments (pydantic model built
from the tool signature), runs the calls concurrently (a task group for two calls),
converts the results to `ToolMessage`s and appends them to an immutable request copy.

The `links` variant is `[LoggingAdvisor, TracingAdvisor, ApprovalAdvisor,
ToolCallingAdvisor, ToolSearchAdvisor]`: logging at INFO into a `NullHandler`, tracing
with no OpenTelemetry SDK configured (the no-op tracer), approval by a
`CallbackApprover` that approves every call, run inline since it never blocks (both tools are marked
`requires_approval`, so every call is asked about), and tool search inside the loop
(with two tools, below its threshold: it passes the request through). Those advisors
come from other branches: when they are missing, `build` raises `Unavailable`.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from advisorchain import (
    Advisor,
    Chain,
    ChatRequest,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    tool,
)
from advisorchain.core.messages import UserMessage
from advisorchain.providers import ScriptedChatModel

from .. import scenario
from .errors import Unavailable, bench_logger

NAME = "advisorchain"


def version() -> str:
    """The installed advisorchain version."""
    return importlib.metadata.version("advisorchain")


def reply(request: ChatRequest) -> list[ToolCall] | str:
    """The scripted model: pick the reply from the tool results after the last user message."""
    scenario.mark()
    messages = request.messages
    results = sum(1 for m in messages[request.last_user_index + 1 :] if isinstance(m, ToolMessage))
    step = scenario.script(results)
    if isinstance(step, str):
        return step
    return [ToolCall.from_arguments(name, args, id=call_id) for call_id, name, args in step]


def make_tools(
    kind: str, *, requires_approval: bool = False, read_only: bool = False
) -> list[Tool]:
    """`get_weather` and `get_time` as async tools, or as sync tools in worker threads
    (`sync`), or as sync tools declared non-blocking (`inline`); `read_only` declares them so
    (for the retry and cache links)."""
    options: dict[str, Any] = {"requires_approval": requires_approval}
    if read_only:
        options["read_only"] = True
    if kind == "async":

        @tool(name="get_weather", description=scenario.WEATHER_DOC, **options)
        async def get_weather(city: str) -> str:
            return scenario.weather(city)

        @tool(name="get_time", description=scenario.TIME_DOC, **options)
        async def get_time(city: str) -> str:
            return scenario.local_time(city)

        return [get_weather, get_time]
    inline = kind == "inline"

    @tool(name="get_weather", description=scenario.WEATHER_DOC, run_inline=inline, **options)
    def get_weather_sync(city: str) -> str:
        return scenario.weather(city)

    @tool(name="get_time", description=scenario.TIME_DOC, run_inline=inline, **options)
    def get_time_sync(city: str) -> str:
        return scenario.local_time(city)

    return [get_weather_sync, get_time_sync]


def links() -> tuple[list[Advisor], list[Advisor]]:
    """The links outside the tool loop (logging, tracing, auto-approval) and inside it
    (tool search, which must sit after the `ToolCallingAdvisor`)."""
    try:
        from advisorchain.advisors import (
            ApprovalAdvisor,
            Approve,
            CallbackApprover,
            LoggingAdvisor,
            ToolSearchAdvisor,
            TracingAdvisor,
        )
    except ImportError as exc:
        raise Unavailable(
            f"links variant needs LoggingAdvisor, TracingAdvisor, ToolSearchAdvisor, "
            f"ApprovalAdvisor and CallbackApprover ({exc})"
        ) from None

    def approve_all(request: Any) -> list[Any]:
        return [Approve() for _ in request.calls]

    try:
        outside = [
            LoggingAdvisor(bench_logger("advisorchain")),
            TracingAdvisor(),  # no tracer provider configured: OpenTelemetry's no-op tracer
            ApprovalAdvisor(CallbackApprover(approve_all, run_inline=True)),
        ]
        inside: list[Advisor] = [
            ToolSearchAdvisor()
        ]  # 2 tools: below its threshold, it passes through
    except TypeError as exc:
        raise Unavailable(f"links variant: an advisor's constructor changed ({exc})") from None
    return outside, inside


def build_chain(variant: str, tool_kind: str = "async", model: Any = None) -> Chain:
    """The chain for `variant`, around `model` (default: the scenario's scripted model)."""
    outside, inside = links() if variant == "links" else ([], [])
    advisors = [*outside, ToolCallingAdvisor(), *inside]
    return Chain(
        advisors,
        model=model or ScriptedChatModel(reply),
        tools=make_tools(tool_kind, requires_approval=variant == "links"),
    )


async def build(variant: str, tool_kind: str = "async") -> scenario.Turn:
    """A turn function for `variant`."""
    model = ScriptedChatModel(reply)
    chain = build_chain(variant, tool_kind, model)
    prompt = (UserMessage(content=scenario.PROMPT),)

    async def turn() -> str:
        response = await chain.call(prompt)
        model.requests.clear()  # the scripted model keeps every request: do not let it grow
        return response.text

    return turn
