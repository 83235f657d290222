"""Driving the loop by hand with ToolCallingManager, and ScriptedChatModel itself."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    Message,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallingManager,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.providers import ScriptedChatModel, ScriptExhaustedError


@tool
def get_order_status(order_id: str) -> str:
    """Status of an order."""
    return f"{order_id}: shipped"


@tool(return_direct=True)
def order_page(order_id: str) -> str:
    """Link to the order page."""
    return f"/orders/{order_id}"


def call(tool_name: str, id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(tool_name, arguments, id=id)


@pytest.mark.anyio
async def test_manual_loop_with_a_step_between_request_and_execution() -> None:
    model = ScriptedChatModel([call("get_order_status", "1", order_id="A1"), "A1 has shipped."])
    chain = Chain([], model=model, tools=[get_order_status])
    manager = ToolCallingManager()
    messages: list[Message] = [UserMessage(content="Where is A1?")]
    audit: list[str] = []
    while True:
        response = await chain.call(messages)
        if not response.tool_calls:
            break
        audit.extend(c.name for c in response.tool_calls)  # the user's own step
        tool_round = await manager.execute(chain.request(messages), response.message)
        messages += [response.message, *tool_round.messages]
    assert response.text == "A1 has shipped."
    assert audit == ["get_order_status"]
    assert messages[-1] == ToolMessage(
        tool_call_id="1", name="get_order_status", content="A1: shipped"
    )


@pytest.mark.anyio
async def test_manager_reports_return_direct_rounds() -> None:
    manager = ToolCallingManager()
    request = ChatRequest(messages=(UserMessage(content="x"),), tools=(order_page,))
    direct = await manager.execute(
        request, AssistantMessage(tool_calls=(call("order_page", "1", order_id="9"),))
    )
    assert direct.return_direct and direct.direct_answer == "/orders/9"
    assert [r.outcome for r in direct.results] == ["ok"]
    failed = await manager.execute(
        request, AssistantMessage(tool_calls=(call("order_page", "1", wrong=1),))
    )
    assert not failed.return_direct and failed.results[0].outcome == "invalid"


def test_manager_rejects_bad_options() -> None:
    with pytest.raises(ValueError):
        ToolCallingManager(on_limit="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ToolCallingManager(on_tool_error="swallow")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ToolCallingManager(max_concurrency=0)


@pytest.mark.anyio
async def test_scripted_model_replies_records_and_runs_out() -> None:
    model = ScriptedChatModel(["one", AssistantMessage(content="two")])
    chain = Chain([], model=model)
    assert (await chain.call("a")).text == "one"
    assert (await chain.call("b")).text == "two"
    assert [r.messages[-1].content for r in model.requests] == ["a", "b"]
    assert model.remaining == 0
    with pytest.raises(ScriptExhaustedError, match="call #3"):
        await chain.call("c")


@pytest.mark.anyio
async def test_scripted_model_from_a_function() -> None:
    async def script(request: ChatRequest) -> str:
        return f"you said {request.messages[-1].content}"

    assert (await Chain([], model=ScriptedChatModel(script)).call("hi")).text == "you said hi"


@pytest.mark.anyio
async def test_scripted_stream_splits_text_and_arguments() -> None:
    tool_call = call("get_order_status", "7", order_id="ABCDEFGH")
    model = ScriptedChatModel(
        [AssistantMessage(content="checking", tool_calls=(tool_call,))], chunk_size=3
    )
    request = ChatRequest(messages=(UserMessage(content="?"),))
    events = [e async for e in model.stream(request)]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["che", "cki", "ng"]
    assert len(deltas) > 3 and deltas[0].name == "get_order_status" and deltas[1].name is None
    assert "".join(d.arguments for d in deltas) == tool_call.arguments
    final = events[-1].response  # type: ignore[union-attr]
    assert final.tool_calls == (tool_call,) and final.finish_reason == "tool_calls"
    assert final.usage.input_tokens >= 1 and final.usage.requests == 1
