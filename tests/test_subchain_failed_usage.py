"""Issue 32 item 7: a sub-agent that fails still spent its model calls: the parent's
`response.usage` counts them as the parent's `BudgetAdvisor` does (the two agree), on
`call` and `stream`, whether the child raised, hit its own limit, or was cut off by
the tool's timeout."""

from __future__ import annotations

import anyio
import pytest

from advisorchain import (
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    Usage,
    chain_tool,
    tool,
)
from advisorchain.advisors import BudgetAdvisor, InMemoryBudgetStore
from advisorchain.providers import ScriptedChatModel


@tool
def look() -> str:
    """Looks something up."""
    return "looked " * 20


def child_call() -> ToolCall:
    return ToolCall.from_arguments("look", {}, id="k1")


def failing_child() -> Chain:
    """Spends one model call, then its model fails."""
    model = ScriptedChatModel([child_call(), RuntimeError("the child's model is down")])
    return Chain([ToolCallingAdvisor()], model=model, tools=[look])


def limited_child() -> Chain:
    """Spends one model call, then asks for more tools than it may."""
    model = ScriptedChatModel([child_call(), [child_call(), child_call()]])
    return Chain([ToolCallingAdvisor(max_calls=2, on_limit="raise")], model=model, tools=[look])


def slow_child() -> Chain:
    """Spends one model call, then its next one never comes back."""

    async def reply(request: ChatRequest) -> ToolCall | str:
        if len(request.messages) <= 1:
            return child_call()
        await anyio.sleep(30)
        return "too late"

    return Chain([ToolCallingAdvisor()], model=ScriptedChatModel(reply), tools=[look])


async def run(chain: Chain, streaming: bool) -> ChatResponse:
    if not streaming:
        return await chain.call("go", conversation_id="c1")
    events = [e async for e in chain.stream("go", conversation_id="c1")]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response


def tokens(usage: Usage) -> tuple[int, int, int]:
    return usage.input_tokens, usage.output_tokens, usage.requests


@pytest.mark.issue32(7)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("child", ["raises", "over its limit", "times out"])
async def test_a_failed_sub_agents_usage_is_in_the_parents(streaming: bool, child: str) -> None:
    sub = {"raises": failing_child, "over its limit": limited_child, "times out": slow_child}
    helper = chain_tool(
        sub[child](), "helper", "A helper.", timeout=0.5 if child == "times out" else None
    )
    store = InMemoryBudgetStore()
    parent_model = ScriptedChatModel(
        [ToolCall.from_arguments("helper", {"task": "look"}, id="h1"), "Done."]
    )
    parent = Chain(
        [BudgetAdvisor(max_total_tokens=1_000_000, store=store), ToolCallingAdvisor()],
        model=parent_model,
        tools=[helper],
    )
    response = await run(parent, streaming)
    [result] = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert result.is_error
    counted = (await store.spent("c1")).usage
    assert tokens(response.usage) == tokens(counted)
    # the parent's two calls and the child's that answered (two when it is over its limit)
    assert response.usage.requests == (4 if child == "over its limit" else 3)


@pytest.mark.issue32(7)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_chain_run_inside_a_plain_tool_counts_as_the_budget_counts_it(
    streaming: bool,
) -> None:
    inner = Chain([ToolCallingAdvisor()], model=ScriptedChatModel(["a summary " * 10]))

    @tool
    async def summarize(text: str) -> str:
        """Summarizes a text with another model."""
        return (await inner.call(text)).text

    store = InMemoryBudgetStore()
    parent = Chain(
        [BudgetAdvisor(max_total_tokens=1_000_000, store=store), ToolCallingAdvisor()],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("summarize", {"text": "long " * 50}, id="s1"), "Done."]
        ),
        tools=[summarize],
    )
    response = await run(parent, streaming)
    counted = (await store.spent("c1")).usage
    assert tokens(response.usage) == tokens(counted)
    assert response.usage.requests == 3
