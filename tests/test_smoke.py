from __future__ import annotations

import pytest

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, tool
from advisorchain.providers import ScriptedChatModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.anyio
async def test_one_tool_round() -> None:
    model = ScriptedChatModel([ToolCall.from_arguments("add", {"a": 2, "b": 3}), "5"])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[add])
    response = await chain.call("2+3?")
    assert response.text == "5"
    assert model.requests[1].messages[-1].content == "5"
