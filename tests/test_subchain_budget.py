"""The parent's `BudgetAdvisor` bounds a chain called as a tool while it runs: each model
call of the child counts against the parent turn's budget as it happens."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatResponse,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    Usage,
    UserMessage,
    chain_tool,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    Approve,
    BudgetAdvisor,
    BudgetExceeded,
    DeferredApprover,
    InMemoryApprovalStore,
    InMemoryBudgetStore,
)
from advisorchain.providers import ScriptedChatModel


def _call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=call_id)


def _costing(reply: str | ToolCall, tokens: int) -> ChatResponse:
    """A scripted reply that used exactly `tokens` input tokens."""
    if isinstance(reply, ToolCall):
        message = AssistantMessage(tool_calls=(reply,))
        return ChatResponse(message, finish_reason="tool_calls", usage=Usage(tokens, 0))
    return ChatResponse(AssistantMessage(content=reply), usage=Usage(tokens, 0))


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"{topic}: 42"


def _child(script: list[Any]) -> tuple[Chain, ScriptedChatModel]:
    model = ScriptedChatModel(script)
    return Chain([ToolCallingAdvisor()], model=model, tools=[lookup]), model


def _busy_child() -> tuple[Chain, ScriptedChatModel]:
    """A child that would make four model calls."""
    return _child(
        [_call("lookup", f"k{i}", topic=f"t{i}") for i in range(3)] + ["child done"],
    )


async def _run(chain: Chain, streamed: bool, **kw: Any) -> ChatResponse:
    if not streamed:
        return await chain.call("research it", **kw)
    events = [e async for e in chain.stream("research it", **kw)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response


@pytest.mark.anyio
@pytest.mark.parametrize("placement", ["before", "after"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_childs_model_calls_count_against_the_parents_limit(
    placement: str, streamed: bool
) -> None:
    child, child_model = _busy_child()
    budget = BudgetAdvisor(max_model_calls=3)
    links: list[Any] = [budget, ToolCallingAdvisor()]
    if placement == "after":
        links.reverse()
    parent_model = ScriptedChatModel([_call("research", "c1", task="go"), "never"])
    parent = Chain(links, model=parent_model, tools=[chain_tool(child, "research", "R.")])

    with pytest.raises(BudgetExceeded) as caught:
        await _run(parent, streamed)

    # The parent's first call and two of the child's: the child's third is refused.
    assert len(child_model.requests) == 2 and len(parent_model.requests) == 1
    assert caught.value.limit == "model_calls"
    # The parent's transcript is valid: the call is answered, with the child's refusal.
    *_, asked, answered = caught.value.messages
    assert isinstance(asked, AssistantMessage) and asked.tool_calls[0].id == "c1"
    assert isinstance(answered, ToolMessage) and answered.tool_call_id == "c1"
    assert answered.is_error and "BudgetExceeded" in answered.text


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_childs_tokens_count_as_they_are_spent_and_the_parent_wraps_up(
    streamed: bool,
) -> None:
    child, child_model = _child(
        [
            _costing(_call("lookup", "k1", topic="a"), 100),
            _costing(_call("lookup", "k2", topic="b"), 100),
            _costing("child done", 100),
        ]
    )
    budget = BudgetAdvisor(max_input_tokens=150, on_exceed="report")
    parent_model = ScriptedChatModel(
        [_costing(_call("research", "c1", task="go"), 10), _costing("Partial answer.", 10)]
    )
    parent = Chain(
        [ToolCallingAdvisor(), budget],
        model=parent_model,
        tools=[chain_tool(child, "research", "R.")],
    )

    response = await _run(parent, streamed)

    # 10 (parent) + 100 + 100 (child) goes over 150: the child's third call is refused.
    assert len(child_model.requests) == 2
    result = next(m for m in response.messages if isinstance(m, ToolMessage))
    assert result.is_error and "input tokens" in result.text
    # The parent's next call is its wrap-up: told the budget is used up, no tools.
    assert len(parent_model.requests) == 2
    wrap_up = parent_model.requests[1]
    assert wrap_up.options.tool_choice == "none"
    assert "budget" in str(wrap_up.messages[-1].content)
    assert response.text == "Partial answer."


@pytest.mark.anyio
async def test_the_childs_spend_reaches_the_parents_conversation_totals() -> None:
    child, _ = _child([_costing("child done", 40)])
    store = InMemoryBudgetStore()
    budget = BudgetAdvisor(store=store, max_conversation_tokens=1000)
    parent_model = ScriptedChatModel(
        [_costing(_call("research", "c1", task="go"), 5), _costing("ok", 5)]
    )
    parent = Chain(
        [ToolCallingAdvisor(), budget],
        model=parent_model,
        tools=[chain_tool(child, "research", "R.")],
    )
    await parent.call("go", conversation_id="conv-1")
    spent = await store.spent("conv-1")
    assert spent.usage.input_tokens == 50


@pytest.mark.anyio
async def test_a_child_inside_the_budget_runs_unhindered_and_a_plain_tool_is_untouched() -> None:
    child, child_model = _busy_child()
    parent_model = ScriptedChatModel(
        [[_call("research", "c1", task="go"), _call("lookup", "c2", topic="x")], "done"]
    )
    parent = Chain(
        [BudgetAdvisor(max_model_calls=6), ToolCallingAdvisor()],
        model=parent_model,
        tools=[chain_tool(child, "research", "R."), lookup],
    )
    response = await parent.call("go")
    assert len(child_model.requests) == 4 and response.text == "done"
    results = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert [m.content for m in results] == ["child done", "x: 42"]


@pytest.mark.anyio
async def test_a_resumed_child_spends_from_the_resumed_parent_turns_budget() -> None:
    store = InMemoryApprovalStore()

    @tool(requires_approval=True)
    def publish(page: str) -> str:
        """Publish a page."""
        return f"{page} published"

    def parent(parent_script: list[Any], child_script: list[Any]) -> tuple[Chain, Any]:
        child_model = ScriptedChatModel(child_script)
        child = Chain(
            [ToolCallingAdvisor(), ApprovalAdvisor(DeferredApprover(), store=store)],
            model=child_model,
            tools=[publish, lookup],
        )
        chain = Chain(
            [
                ToolCallingAdvisor(),
                ApprovalAdvisor(DeferredApprover(), store=store),
                BudgetAdvisor(max_model_calls=2),
            ],
            model=ScriptedChatModel(parent_script),
            tools=[chain_tool(child, "editor", "Edits pages.")],
        )
        return chain, child_model

    first, _ = parent(
        [_call("editor", "c1", task="publish")], [_call("publish", "k1", page="home")]
    )
    deferred = await first.call("publish home")
    assert deferred.finish_reason == "deferred"
    transcript = [UserMessage(content="publish home"), *deferred.messages]
    # Resumed, the child would make three more model calls; the turn allows two in all.
    second, child_model = parent(
        ["never"], [_call("lookup", f"k{i}", topic="t") for i in (2, 3)] + ["published"]
    )
    with pytest.raises(BudgetExceeded) as caught:
        await second.call(transcript, decisions={"c1": {"k1": Approve()}})
    assert len(child_model.requests) == 2
    assert caught.value.limit == "model_calls"
