"""LangChain v1: `create_agent` (a LangGraph graph) around a scripted `BaseChatModel`.

Per round: the graph's model node calls the scripted chat model's `_agenerate` (no
thread hop: the async path is implemented directly), which returns an `AIMessage` with
`tool_calls`; the graph routes to the tool node, which sends each call to a `ToolNode`
task (LangGraph `Send`), validates the arguments with the tool's pydantic schema, runs
the tools concurrently and appends `ToolMessage`s to the graph state; then back to the
model node. `bind_tools` returns the model itself (nothing to format for a fake).

The `links` variant adds one `AgentMiddleware` with `wrap_model_call` (a log record per
model call) and `wrap_tool_call` (a log record and an auto-approval check per tool
call): LangChain's closest equivalent of logging + approval; it has no tracing without
LangSmith and no built-in tool search without an LLM.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .. import scenario
from .errors import Unavailable, bench_logger

NAME = "langchain"


def version() -> str:
    """Installed versions of langchain, langchain-core and langgraph."""
    names = ("langchain", "langchain-core", "langgraph")
    return ", ".join(f"{n} {importlib.metadata.version(n)}" for n in names)


async def build(variant: str, tool_kind: str = "async") -> scenario.Turn:
    """A turn function for `variant`."""
    try:
        from langchain.agents import create_agent
        from langchain.agents.middleware import AgentMiddleware
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.tools import StructuredTool
    except ImportError as exc:
        raise Unavailable(
            f"langchain is not installed ({exc}): pip install -e '.[bench]'"
        ) from None

    class ScriptedChat(BaseChatModel):
        """Answers from `scenario.script`, counting tool messages after the last human one."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self

        def _reply(self, messages: list[BaseMessage]) -> ChatResult:
            scenario.mark()
            results = 0
            for m in reversed(messages):
                if isinstance(m, HumanMessage):
                    break
                if isinstance(m, ToolMessage):
                    results += 1
            step = scenario.script(results)
            if isinstance(step, str):
                message = AIMessage(content=step)
            else:
                message = AIMessage(
                    content="",
                    tool_calls=[
                        {"id": call_id, "name": name, "args": args, "type": "tool_call"}
                        for call_id, name, args in step
                    ],
                )
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return self._reply(messages)

        async def _agenerate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return self._reply(messages)

    def get_weather(city: str) -> str:
        return scenario.weather(city)

    def get_time(city: str) -> str:
        return scenario.local_time(city)

    async def aget_weather(city: str) -> str:
        return scenario.weather(city)

    async def aget_time(city: str) -> str:
        return scenario.local_time(city)

    if tool_kind == "async":
        tools = [
            StructuredTool.from_function(
                coroutine=aget_weather, name="get_weather", description=scenario.WEATHER_DOC
            ),
            StructuredTool.from_function(
                coroutine=aget_time, name="get_time", description=scenario.TIME_DOC
            ),
        ]
    else:  # sync tools: LangChain runs them in its executor on the async path
        tools = [
            StructuredTool.from_function(
                get_weather, name="get_weather", description=scenario.WEATHER_DOC
            ),
            StructuredTool.from_function(get_time, name="get_time", description=scenario.TIME_DOC),
        ]

    middleware: list[Any] = []
    if variant == "links":
        logger = bench_logger("langchain")

        class LogAndApprove(AgentMiddleware):
            async def awrap_model_call(
                self, request: Any, handler: Callable[[Any], Awaitable[Any]]
            ) -> Any:
                response = await handler(request)
                logger.info("model call: %d messages", len(request.messages))
                return response

            async def awrap_tool_call(
                self, request: Any, handler: Callable[[Any], Awaitable[Any]]
            ) -> Any:
                approved = request.tool_call["name"] in ("get_weather", "get_time")
                if not approved:
                    raise AssertionError("never happens: every call is approved")
                result = await handler(request)
                logger.info("tool call: %s", request.tool_call["name"])
                return result

        middleware.append(LogAndApprove())
    elif variant != "bare":
        raise Unavailable(f"unknown variant {variant!r}")

    agent = create_agent(ScriptedChat(), tools=tools, middleware=middleware)
    prompt = {"messages": [{"role": "user", "content": scenario.PROMPT}]}

    async def turn() -> str:
        state = await agent.ainvoke(prompt)
        text: str = state["messages"][-1].content
        return text

    return turn
