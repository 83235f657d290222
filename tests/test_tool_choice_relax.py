"""A forcing `tool_choice` applies to the first round only, so the loop can end."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import Chain, ChatOptions, ToolCall, ToolCallingAdvisor, UserMessage, tool
from advisorchain.advisors import ApprovalAdvisor, Approve, DeferredApprover, InMemoryApprovalStore
from advisorchain.providers import ScriptedChatModel

from provider_support import get_weather


def weather(id: str) -> ToolCall:
    return ToolCall.from_arguments("get_weather", {"city": "Oslo"}, id=id)


async def choices(path: str, choice: str | None, replies: list[Any], **loop: Any) -> list[Any]:
    """The `tool_choice` each model call received."""
    model = ScriptedChatModel(replies)
    chain = Chain([ToolCallingAdvisor(**loop)], model=model, tools=[get_weather])
    options = ChatOptions(tool_choice=choice)
    if path == "call":
        await chain.call("weather?", options=options)
    else:
        async for _ in chain.stream("weather?", options=options):
            pass
    return [r.options.tool_choice for r in model.requests]


@pytest.fixture(params=["call", "stream"])
def path(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.mark.anyio
@pytest.mark.parametrize("choice", ["get_weather", "required"])
async def test_a_forcing_choice_becomes_auto_after_a_round_with_tools(
    path: str, choice: str
) -> None:
    replies = [weather("c1"), weather("c2"), "Sunny."]
    assert await choices(path, choice, replies) == [choice, "auto", "auto"]


@pytest.mark.anyio
@pytest.mark.parametrize("choice", [None, "auto", "none"])
async def test_other_choices_are_kept(path: str, choice: str | None) -> None:
    replies = [weather("c1"), "Sunny."]
    assert await choices(path, choice, replies) == [choice, choice]


@pytest.mark.anyio
@pytest.mark.parametrize("choice", ["get_weather", "required"])
async def test_reset_tool_choice_false_keeps_forcing(path: str, choice: str) -> None:
    replies = [weather("c1"), weather("c2"), "Sunny."]
    got = await choices(path, choice, replies, reset_tool_choice=False)
    assert got == [choice, choice, choice]


@pytest.mark.anyio
async def test_a_forced_model_that_obeys_forever_stops_at_once(path: str) -> None:
    # a model that always calls the tool it is forced to: it answers once freed
    model = ScriptedChatModel(
        lambda request: weather("c") if request.options.tool_choice != "auto" else "Sunny."
    )
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[get_weather])
    options = ChatOptions(tool_choice="get_weather")
    if path == "call":
        assert (await chain.call("weather?", options=options)).text == "Sunny."
    else:
        async for _ in chain.stream("weather?", options=options):
            pass
    assert len(model.requests) == 2


@pytest.mark.anyio
async def test_a_resumed_turn_is_no_longer_forced() -> None:
    @tool(requires_approval=True)
    def book(city: str) -> str:
        """Book a trip."""
        return f"booked {city}"

    store = InMemoryApprovalStore()
    call = ToolCall.from_arguments("book", {"city": "Oslo"}, id="c1")

    def chain_with(model: ScriptedChatModel) -> Chain:
        approval = ApprovalAdvisor(DeferredApprover(), store=store)
        return Chain([ToolCallingAdvisor(), approval], model=model, tools=[book])

    first = ScriptedChatModel([call])
    response = await chain_with(first).call("book", options=ChatOptions(tool_choice="book"))
    assert response.finish_reason == "deferred"
    later = ScriptedChatModel(["Booked."])
    resumed = await chain_with(later).call(
        [UserMessage(content="book"), *response.messages],
        decisions={"c1": Approve()},
        options=ChatOptions(tool_choice="book"),
    )
    assert resumed.text == "Booked."
    assert [r.options.tool_choice for r in first.requests + later.requests] == ["book", "auto"]
