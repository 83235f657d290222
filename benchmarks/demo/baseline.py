"""The demo's chain as it was before the small-model work (issue 12), kept to compare.

Everything here is the original code path, copied unchanged in behaviour: the old system
prompt and tool descriptions, `ToolResultsAsText` and `AnswerAfterRounds` (then private
to the demo), tool search listing found tools in catalog order, catalog stubs answering
"done", and llama.cpp dropping the tool definitions on the answering call.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from advisorchain.advisors import (
    ApprovalAdvisor,
    Approver,
    LoggingAdvisor,
    ToolCallingAdvisor,
    ToolSearchAdvisor,
)
from advisorchain.core.advisor import Advisor, CallNext, StreamNext
from advisorchain.core.chain import Chain
from advisorchain.core.context import ToolContext
from advisorchain.core.events import StreamEvent
from advisorchain.core.messages import AssistantMessage, Message, ToolMessage, UserMessage
from advisorchain.core.model import ChatModel
from advisorchain.core.options import ChatOptions
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse
from advisorchain.core.tools import Tool
from advisorchain.demo.tools import OrderTools

SYSTEM_PROMPT = (
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant. You are the order "
    "assistant of an online shop: call the tools to look up the customer's orders, never guess."
)
DESCRIPTIONS = {
    "get_order_status": (
        "Look up the status, items, total and delivery date of one of the customer's orders."
    ),
    "get_customer_orders": "List the customer's orders, optionally only those with one status.",
    "get_customer_contact": "The customer's contact details on file: name, email, phone.",
}


class ToolResultsAsText(Advisor):
    """The demo's original rewrite: each tool round as one `Results:` user message."""

    def _rewritten(self, request: ChatRequest) -> ChatRequest:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return request
        messages: list[Message] = []
        results: list[str] = []
        for message in request.messages:
            if isinstance(message, AssistantMessage) and message.tool_calls:
                continue
            if isinstance(message, ToolMessage):
                failed = " (failed)" if message.is_error else ""
                results.append(f"{message.name}{failed}: {message.content}")
                continue
            if results:
                messages.append(_results_message(results))
                results = []
            messages.append(message)
        if results:
            messages.append(_results_message(results))
        return request.with_messages(tuple(messages))

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(self._rewritten(request))

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        async for event in next(self._rewritten(request)):
            yield event


def _results_message(results: list[str]) -> UserMessage:
    return UserMessage(
        content="Results:\n"
        + "\n".join(results)
        + "\nUse these results to answer my question in one or two plain sentences."
    )


class AnswerAfterRounds(Advisor):
    """The demo's original round bound: `tool_choice="none"` after `max_rounds` rounds."""

    def __init__(self, max_rounds: int = 3) -> None:
        self.max_rounds = max_rounds

    def _adjusted(self, request: ChatRequest) -> ChatRequest:
        rounds = sum(
            1
            for m in request.messages[request.last_user_index + 1 :]
            if isinstance(m, AssistantMessage) and m.tool_calls
        )
        return request.with_options(tool_choice="none") if rounds >= self.max_rounds else request

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(self._adjusted(request))

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        async for event in next(self._adjusted(request)):
            yield event


class CatalogOrderToolSearch(ToolSearchAdvisor):
    """Tool search as it was: the tools shown in catalog order, found ones in between."""

    def narrow(self, request: ChatRequest) -> ChatRequest:
        narrowed = super().narrow(request)
        order = {t.name: i for i, t in enumerate(request.tools)}
        shown = sorted(narrowed.tools, key=lambda t: (t is not self.search_tool, order[t.name]))
        return narrowed.with_tools(tuple(shown))


def _described(tool: Tool, description: str) -> Tool:
    copy = Tool.__new__(Tool)
    copy.__dict__.update(tool.__dict__)
    parameters = dict(tool.definition.parameters)
    properties = dict(parameters.get("properties", {}))
    if "order_id" in properties:
        properties["order_id"] = ORDER_ID
        parameters["properties"] = properties
    copy.definition = dataclasses.replace(
        tool.definition, description=description, parameters=parameters
    )
    return copy


ORDER_ID = {"type": "string", "description": "The order id, like A-1001"}
ORDER = ("get_order_status", "get_customer_orders", "get_customer_contact")


def read_tools(tools: OrderTools) -> list[Tool]:
    """The read tools in their original order, descriptions and order-id description."""
    by_name = {t.name: t for t in tools.read_tools}
    return [_described(by_name[name], DESCRIPTIONS[name]) for name in ORDER]


def cancellation_tools(tools: OrderTools) -> list[Tool]:
    """The cancellation tools with their original order-id description."""
    return [_described(t, t.description) for t in tools.cancellation_tools]


def stub_catalog(catalog: Sequence[Tool]) -> list[Tool]:
    """The catalog with its original stubs: every tool answers "done"."""

    def handler(name: str) -> Any:
        def handle(arguments: Mapping[str, Any], context: ToolContext) -> str:
            shown = ", ".join(f"{k}={v!r}" for k, v in sorted(arguments.items()))
            return f"{name}({shown}): done. (The demo shop has no data behind this tool.)"

        return handle

    return [
        Tool(t.name, t.description, t.definition.parameters, handler(t.name), run_inline=True)
        for t in catalog
    ]


def build_chain(
    model: ChatModel,
    *,
    tools: OrderTools,
    approver: Approver,
    catalog: Sequence[Tool],
    options: ChatOptions,
) -> Chain:
    """The original small-model chain of the demo (one tool round per turn)."""
    pinned = [t.name for t in (*tools.read_tools, *tools.cancellation_tools)]
    advisors: list[Advisor] = [
        LoggingAdvisor(logging.getLogger("advisorchain.demo")),
        ToolCallingAdvisor(max_calls_per_tool=3, max_calls=12),
        ApprovalAdvisor(approver),
        AnswerAfterRounds(1),
        CatalogOrderToolSearch(pinned=pinned),
        ToolResultsAsText(),
    ]
    return Chain(
        advisors,
        model=model,
        tools=[*read_tools(tools), *stub_catalog(catalog)],
        options=options,
    )
