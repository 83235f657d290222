"""advisorchain: `Chain([ToolCallingAdvisor()])` around a `ScriptedChatModel` function.

Per round: the chain's request goes to the scripted model, which returns `ToolCall`s
(pydantic models); the loop parses and validates the arguments (pydantic model built
from the tool signature), runs the calls concurrently (a task group for two calls),
converts the results to `ToolMessage`s and appends them to an immutable request copy.

The `links` variant adds, in this order, `LoggingAdvisor`, `TracingAdvisor` (no
OpenTelemetry SDK configured: the no-op tracer), `ToolSearchAdvisor` and an
`ApprovalAdvisor` whose `CallbackApprover` approves everything; both tools are marked
`requires_approval`. Those advisors come from other branches: when they are missing,
`build` raises `Unavailable`.
"""

from __future__ import annotations

import importlib.metadata
import logging
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
from .errors import Unavailable

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


def make_tools(kind: scenario.ToolKind, *, requires_approval: bool = False) -> list[Tool]:
    """`get_weather` and `get_time` as async tools, or as sync tools in worker threads
    (`sync`), or as sync tools declared non-blocking (`inline`)."""
    options: dict[str, Any] = {"requires_approval": requires_approval}
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


def links() -> list[Advisor]:
    """Logging, tracing, tool search and auto-approval links, in chain order."""
    try:
        from advisorchain.advisors import (  # type: ignore[attr-defined]
            ApprovalAdvisor,
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
    logger = logging.getLogger("benchmarks.advisorchain")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False

    def approve_all(*args: Any, **kwargs: Any) -> bool:
        return True

    try:
        return [
            LoggingAdvisor(logger=logger),
            TracingAdvisor(),
            ToolSearchAdvisor(),
            ApprovalAdvisor(CallbackApprover(approve_all)),
        ]
    except TypeError as exc:
        raise Unavailable(f"links variant: an advisor's constructor changed ({exc})") from None


def build_chain(
    variant: str, tool_kind: scenario.ToolKind | str = "async", model: Any = None
) -> Chain:
    """The chain for `variant`, around `model` (default: the scenario's scripted model)."""
    advisors: list[Advisor] = links() if variant == "links" else []
    advisors.append(ToolCallingAdvisor())
    return Chain(
        advisors,
        model=model or ScriptedChatModel(reply),
        tools=make_tools(tool_kind, requires_approval=variant == "links"),  # type: ignore[arg-type]
    )


async def build(variant: str, tool_kind: scenario.ToolKind | str = "async") -> scenario.Turn:
    """A turn function for `variant`."""
    model = ScriptedChatModel(reply)
    chain = build_chain(variant, tool_kind, model)
    prompt = (UserMessage(content=scenario.PROMPT),)

    async def turn() -> str:
        response = await chain.call(prompt)
        model.requests.clear()  # the scripted model keeps every request: do not let it grow
        return response.text

    return turn
