"""OpenAI Agents SDK: `Runner.run` of an `Agent` around a scripted `Model`.

Per round: the runner turns the input items into a model call; the scripted `Model`'s
`get_response` returns `ResponseFunctionToolCall` items (JSON argument text); the runner
parses and validates the arguments (the tool's pydantic schema, strict mode), runs the
function tools concurrently, and appends `function_call_output` items. Tracing is
disabled in the bare variant (`set_tracing_disabled(True)`).

The `links` variant enables tracing with no trace processor (spans are built, nothing is
exported), adds `RunHooks` that log each model call and tool call, and a tool input
guardrail on each tool that allows every call (auto-approval).
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import AsyncIterator
from typing import Any

from .. import scenario
from .errors import Unavailable, bench_logger

NAME = "openai_agents"


def version() -> str:
    """Installed openai-agents version."""
    return f"openai-agents {importlib.metadata.version('openai-agents')}"


async def build(variant: str, tool_kind: str = "async") -> scenario.Turn:
    """A turn function for `variant`."""
    try:
        from agents import (
            Agent,
            Model,
            ModelResponse,
            RunHooks,
            Runner,
            ToolGuardrailFunctionOutput,
            Usage,
            function_tool,
            set_trace_processors,
            set_tracing_disabled,
            tool_input_guardrail,
        )
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )
    except ImportError as exc:
        raise Unavailable(
            f"openai-agents is not installed ({exc}): pip install -e '.[bench]'"
        ) from None

    class ScriptedModel(Model):
        """Answers from `scenario.script`, counting `function_call_output` input items."""

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> Any:
            scenario.mark()
            results = 0
            if not isinstance(input, str):
                for item in input:
                    if isinstance(item, dict) and item.get("type") == "function_call_output":
                        results += 1
            step = scenario.script(results)
            output: list[Any]
            if isinstance(step, str):
                output = [
                    ResponseOutputMessage(
                        id="msg_1",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[ResponseOutputText(type="output_text", text=step, annotations=[])],
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        id=f"fc_{call_id}",
                        call_id=call_id,
                        type="function_call",
                        name=name,
                        arguments=json.dumps(args),
                    )
                    for call_id, name, args in step
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError("the overhead benchmark does not stream")

    guardrails: list[Any] = []
    hooks: Any = None
    if variant == "links":
        set_tracing_disabled(False)
        set_trace_processors([])
        logger = bench_logger("openai_agents")

        @tool_input_guardrail
        def approve_all(data: Any) -> Any:
            return ToolGuardrailFunctionOutput.allow()

        class LogHooks(RunHooks[Any]):
            async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
                logger.info("model call")

            async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
                logger.info("tool call: %s", tool.name)

        guardrails = [approve_all]
        hooks = LogHooks()
    elif variant == "bare":
        set_tracing_disabled(True)
    else:
        raise Unavailable(f"unknown variant {variant!r}")

    if tool_kind == "async":

        async def get_weather(city: str) -> str:
            return scenario.weather(city)

        async def get_time(city: str) -> str:
            return scenario.local_time(city)

        functions: list[Any] = [get_weather, get_time]
    else:  # sync tools: the SDK runs them with asyncio.to_thread

        def get_weather_sync(city: str) -> str:
            return scenario.weather(city)

        def get_time_sync(city: str) -> str:
            return scenario.local_time(city)

        functions = [get_weather_sync, get_time_sync]
    tools = [
        function_tool(
            fn,
            name_override=name,
            description_override=doc,
            tool_input_guardrails=guardrails or None,
        )
        for fn, name, doc in zip(
            functions,
            ("get_weather", "get_time"),
            (scenario.WEATHER_DOC, scenario.TIME_DOC),
            strict=True,
        )
    ]
    agent = Agent(name="bench", instructions=None, model=ScriptedModel(), tools=tools)

    tracing_disabled = variant == "bare"

    async def turn() -> str:
        set_tracing_disabled(tracing_disabled)  # a global switch: keep each variant's own
        result = await Runner.run(agent, scenario.PROMPT, hooks=hooks)
        text: str = result.final_output
        return text

    return turn
