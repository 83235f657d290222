"""PydanticAI: an `Agent` around a `FunctionModel`.

Per round: the agent graph builds a `ModelRequest`, calls the `FunctionModel` function,
which returns a `ModelResponse` with `ToolCallPart`s (JSON argument text, as a provider
would send); the agent validates each call's arguments against the tool's pydantic
schema, runs the tools concurrently and appends a `ModelRequest` of `ToolReturnPart`s.
Tool search is auto-injected by PydanticAI and idle here (no deferred tools).

The `links` variant adds the `Instrumentation` capability (OpenTelemetry spans, no SDK
configured: the no-op tracer) and one capability whose `wrap_model_request` logs each
model call and whose `wrap_tool_execute` logs and auto-approves each tool call.
"""

from __future__ import annotations

import importlib.metadata
import json
from typing import Any

from .. import scenario
from .errors import Unavailable, bench_logger

NAME = "pydantic_ai"


def version() -> str:
    """Installed pydantic-ai-slim version."""
    return f"pydantic-ai-slim {importlib.metadata.version('pydantic-ai-slim')}"


async def build(variant: str, tool_kind: str = "async") -> scenario.Turn:
    """A turn function for `variant`."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.capabilities import AbstractCapability, Instrumentation
        from pydantic_ai.messages import (
            ModelMessage,
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
            UserPromptPart,
        )
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError as exc:
        raise Unavailable(
            f"pydantic-ai-slim is not installed ({exc}): pip install -e '.[bench]'"
        ) from None

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        scenario.mark()
        results = 0
        for m in reversed(messages):
            if isinstance(m, ModelRequest):
                if any(isinstance(p, UserPromptPart) for p in m.parts):
                    break
                results += sum(1 for p in m.parts if isinstance(p, ToolReturnPart))
        step = scenario.script(results)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(
            parts=[
                ToolCallPart(name, json.dumps(args), tool_call_id=call_id)
                for call_id, name, args in step
            ]
        )

    if tool_kind == "async":

        async def get_weather(city: str) -> str:
            """Current weather in a city."""
            return scenario.weather(city)

        async def get_time(city: str) -> str:
            """Local time in a city."""
            return scenario.local_time(city)

        tools: list[Any] = [get_weather, get_time]
    else:  # sync tools: PydanticAI runs them in worker threads

        def get_weather_sync(city: str) -> str:
            """Current weather in a city."""
            return scenario.weather(city)

        def get_time_sync(city: str) -> str:
            """Local time in a city."""
            return scenario.local_time(city)

        get_weather_sync.__name__ = "get_weather"
        get_time_sync.__name__ = "get_time"
        tools = [get_weather_sync, get_time_sync]

    capabilities: list[Any] = []
    if variant == "links":
        logger = bench_logger("pydantic_ai")

        class LogAndApprove(AbstractCapability[Any]):
            async def wrap_model_request(
                self, ctx: Any, *, request_context: Any, handler: Any
            ) -> Any:
                response = await handler(request_context)
                logger.info("model call")
                return response

            async def wrap_tool_execute(
                self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
            ) -> Any:
                if call.tool_name not in ("get_weather", "get_time"):
                    raise AssertionError("never happens: every call is approved")
                result = await handler(args)
                logger.info("tool call: %s", call.tool_name)
                return result

        capabilities = [Instrumentation(), LogAndApprove()]
    elif variant != "bare":
        raise Unavailable(f"unknown variant {variant!r}")

    agent = Agent(FunctionModel(reply), tools=tools, capabilities=capabilities or None)

    async def turn() -> str:
        result = await agent.run(scenario.PROMPT)
        text: str = result.output
        return text

    return turn
