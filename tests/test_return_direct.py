"""Decision 7: return-direct needs every call of the round to succeed."""

from __future__ import annotations

import pytest

from advisorchain import (
    Advisor,
    Chain,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    tool,
)
from advisorchain.core.manager import ToolRound
from advisorchain.providers import ScriptedChatModel


@tool(return_direct=True)
def order_link(order_id: str) -> str:
    """A link to the order page."""
    return f"https://shop.example/orders/{order_id}"


class BreakerAdvisor(Advisor):
    """A circuit breaker: answers calls for `order_id="down"` with an error at once.

    Its result keeps the tool's `return_direct` flag, as a hook that copies the tool's
    metadata does: only the "no call failed" rule stops that error from becoming the answer.
    """

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        if invocation.arguments.get("order_id") == "down":
            return ToolResult(
                content="Error: the order service is down",
                outcome="error",
                return_direct=invocation.tool.return_direct,
            )
        return await next(invocation)


def _round_script() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            [
                ToolCall.from_arguments("order_link", {"order_id": "1"}, id="a"),
                ToolCall.from_arguments("order_link", {"order_id": "down"}, id="b"),
            ],
            "Order 1 is at https://shop.example/orders/1; the other link is unavailable.",
        ]
    )


def test_a_failed_return_direct_result_makes_the_round_not_direct() -> None:
    calls = (
        ToolCall.from_arguments("order_link", {"order_id": "1"}, id="a"),
        ToolCall.from_arguments("order_link", {"order_id": "2"}, id="b"),
    )
    ok = ToolResult(content="https://shop.example/orders/1", return_direct=True)
    failed = ToolResult(content="Error: down", outcome="error", return_direct=True)
    messages = tuple(r.to_message(c) for r, c in zip((ok, failed), calls, strict=True))
    assert not ToolRound(calls, (ok, failed), messages, (0.0, 0.0)).return_direct
    both_ok = (ok, ok)
    messages = tuple(r.to_message(c) for r, c in zip(both_ok, calls, strict=True))
    assert ToolRound(calls, both_ok, messages, (0.0, 0.0)).return_direct


@pytest.mark.anyio
async def test_return_direct_with_one_failed_call_goes_back_to_the_model_call() -> None:
    model = _round_script()
    chain = Chain([ToolCallingAdvisor(), BreakerAdvisor()], model=model, tools=[order_link])
    response = await chain.call("links for orders 1 and down")
    assert response.finish_reason == "stop"
    assert response.text.startswith("Order 1 is at")
    assert len(model.requests) == 2
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.is_error) for m in results] == [("a", False), ("b", True)]


@pytest.mark.anyio
async def test_return_direct_with_one_failed_call_goes_back_to_the_model_stream() -> None:
    model = _round_script()
    chain = Chain([ToolCallingAdvisor(), BreakerAdvisor()], model=model, tools=[order_link])
    events = [e async for e in chain.stream("links for orders 1 and down")]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.finish_reason == "stop"
    assert final.response.text.startswith("Order 1 is at")
    assert len(model.requests) == 2
