"""Chains and helpers the UI protocol tests share: a refund chain whose refund waits for
a deferred approval, served by both protocol apps."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from advisorchain import (
    Chain,
    ToolCall,
    ToolCallingAdvisor,
    ToolContext,
    ToolMessage,
    chain_tool,
    tool,
)
from advisorchain.advisors import ApprovalAdvisor, DeferredApprover, InMemoryApprovalStore
from advisorchain.core.request import ChatRequest
from advisorchain.providers import Reply, ScriptedChatModel
from advisorchain.providers.scripted import ReplyFunction

__all__ = [
    "REFUND_SCRIPT",
    "billing_chain",
    "billing_tools",
    "refund_reply",
    "SECRET",
    "post_sse",
    "refund_chain",
    "refunds_run",
    "seen_context",
    "server_tools",
]

SECRET = "sk-tenant-secret-7f3a"
"""A tool-context value that must never reach a client."""

seen_context: list[Mapping[str, Any]] = []

refunds_run: list[tuple[str, int]] = []
"""Every refund the tool ran: (order id, amount)."""


@tool
def lookup(order_id: str, context: ToolContext) -> str:
    """Look an order up."""
    seen_context.append(dict(context))
    return json.dumps({"order_id": order_id, "status": "shipped"})


@tool(requires_approval=True)
def refund(order_id: str, amount: int) -> str:
    """Refund an order."""
    refunds_run.append((order_id, amount))
    return f"refunded {amount} EUR for order {order_id}"


def server_tools() -> list[Any]:
    return [lookup, refund]


REFUND_SCRIPT: Sequence[Reply] = (
    ToolCall.from_arguments("lookup", {"order_id": "7"}, id="call_look"),
    ToolCall.from_arguments("refund", {"order_id": "7", "amount": 12}, id="call_refund"),
    "Order 7 is refunded: 12 EUR.",
)


def refund_reply(request: ChatRequest) -> Reply:
    """The refund script as a function of the transcript, for a server that runs many
    turns: look the order up, ask to refund it, then say what happened."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage) and last.name == "lookup":
        return REFUND_SCRIPT[1]
    if isinstance(last, ToolMessage):
        return "Order 7 is refunded: 12 EUR." if "refunded" in last.text else "Not refunded."
    return REFUND_SCRIPT[0]


def refund_chain(
    script: Sequence[Reply] | ReplyFunction = REFUND_SCRIPT,
) -> tuple[Chain, ScriptedChatModel]:
    model = ScriptedChatModel(script if callable(script) else list(script))
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore())],
        model=model,
    )
    return chain, model


async def post_sse(
    app: Any, body: Any, headers: Mapping[str, str] | None = None
) -> tuple[httpx.Response, list[Any]]:
    """POST `body` to the ASGI `app`; the response and its SSE `data:` payloads."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        response = await client.post("/", json=body, headers=dict(headers or {}))
    events: list[Any] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return response, events


def _billing_reply(request: ChatRequest) -> Reply:
    """The sub-agent's model: refund order 7 (which waits for approval), then say how it
    went."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return "Refunded 12 EUR." if "refunded" in last.text else "Could not refund."
    return REFUND_SCRIPT[1]


def _desk_reply(request: ChatRequest) -> Reply:
    """The served chain's model: hand the refund to the billing sub-agent, then report
    its answer."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return f"Billing says: {last.text}"
    return ToolCall.from_arguments(
        "billing", {"task": "Refund 12 EUR for order 7"}, id="call_billing"
    )


def billing_tools() -> list[Any]:
    """The served chain's tools: the billing sub-agent, whose refund needs approval."""
    billing = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore())],
        model=ScriptedChatModel(_billing_reply),
        tools=[refund],
    )
    return [chain_tool(billing, "billing", "The billing department: refunds and invoices.")]


def billing_chain() -> Chain:
    """A chain whose model asks the billing sub-agent (`billing_tools`) to refund."""
    return Chain([ToolCallingAdvisor()], model=ScriptedChatModel(_desk_reply))
