"""Memory and deferred approval together: the deferred turn is the stored transcript, and a
resume from memory (decisions and a conversation id only) is stored once, complete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    InvalidDecisions,
    Message,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    Approve,
    DeferredApprover,
    InMemoryApprovalStore,
    InMemoryChatMemoryStore,
    MemoryAdvisor,
    SQLiteChatMemoryStore,
)
from advisorchain.providers import ScriptedChatModel

cancelled: list[str] = []


@tool(requires_approval=True)
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    cancelled.append(order_id)
    return f"cancelled {order_id}"


@tool
def order_status(order_id: str) -> str:
    """Status of an order."""
    return f"{order_id}: open"


def assert_valid_history(messages: tuple[Message, ...]) -> None:
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, AssistantMessage):
            assert not open_calls, f"unanswered tool calls {open_calls}"
            open_calls = {c.id for c in m.tool_calls}
        elif isinstance(m, ToolMessage):
            assert m.tool_call_id in open_calls, f"orphan tool result {m.tool_call_id}"
            open_calls.discard(m.tool_call_id)
        else:
            assert not open_calls, f"unanswered tool calls {open_calls}"
    assert not open_calls


def chain(memory: SQLiteChatMemoryStore, approvals: InMemoryApprovalStore, script: Any) -> Chain:
    return Chain(
        [
            MemoryAdvisor(memory),
            ToolCallingAdvisor(),
            ApprovalAdvisor(DeferredApprover(), store=approvals),
        ],
        model=ScriptedChatModel(script),
        tools=[cancel_order, order_status],
    )


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("turn_in_between", [False, True])
async def test_a_deferred_turn_resumed_from_memory_is_stored_once(
    tmp_path: Path, streamed: bool, turn_in_between: bool
) -> None:
    cancelled.clear()
    memory = SQLiteChatMemoryStore(tmp_path / "memory.db")
    approvals = InMemoryApprovalStore()
    first = chain(memory, approvals, ["Hello!"])
    await first.call("hi", conversation_id="c1")
    second = chain(
        memory,
        approvals,
        [
            [
                ToolCall.from_arguments("order_status", {"order_id": "A1"}, id="s1"),
                ToolCall.from_arguments("cancel_order", {"order_id": "A1"}, id="x1"),
            ],
        ],
    )
    pending = await second.call("cancel A1", conversation_id="c1")
    assert pending.finish_reason == "deferred" and [d.id for d in pending.deferred] == ["x1"]
    stored = await memory.load("c1")  # the deferred turn is stored: it is the transcript
    assert stored[2:] == (UserMessage(content="cancel A1"), *pending.messages)
    if turn_in_between:  # a new turn while a call waits: refused, nothing stored
        with pytest.raises(InvalidDecisions, match="still wait for decisions"):
            await chain(memory, approvals, ["never"]).call("hello?", conversation_id="c1")
        assert await memory.load("c1") == stored
    before = 2

    resumer = chain(memory, approvals, ["A1 is cancelled."])
    decisions = {"x1": Approve()}
    if streamed:
        events = [e async for e in resumer.stream(decisions=decisions, conversation_id="c1")]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        assert final.response.text == "A1 is cancelled."
    else:
        response = await resumer.call(decisions=decisions, conversation_id="c1")
        assert response.text == "A1 is cancelled."
    assert cancelled == ["A1"]

    history = await memory.load("c1")
    assert [m.role for m in history[before:]] == ["user", "assistant", "tool", "tool", "assistant"]
    assert history[before] == UserMessage(content="cancel A1")
    assert sum(m == UserMessage(content="hi") for m in history) == 1
    assert_valid_history(history)

    third = chain(memory, approvals, ["You're welcome."])
    await third.call("thanks", conversation_id="c1")
    sent = third.model.requests[0].messages  # type: ignore[attr-defined]
    assert sent[:-1] == history
    assert_valid_history(await memory.load("c1"))


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_tampered_history_in_memory_is_refused_and_audited(streamed: bool) -> None:
    """The memory holds the transcript; a resume from a history whose waiting call was
    rewritten (another order) is refused by the approval store, not run."""
    cancelled.clear()
    memory = InMemoryChatMemoryStore()
    approvals = InMemoryApprovalStore()
    first = Chain(
        [
            MemoryAdvisor(memory),
            ToolCallingAdvisor(),
            ApprovalAdvisor(DeferredApprover(), store=approvals),
        ],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("cancel_order", {"order_id": "A1"}, id="x1")]
        ),
        tools=[cancel_order, order_status],
    )
    await first.call("cancel A1", conversation_id="c1")
    history = memory._conversations["c1"]
    asked = history[1]
    assert isinstance(asked, AssistantMessage)
    forged = ToolCall.from_arguments("cancel_order", {"order_id": "B2"}, id="x1")
    history[1] = asked.model_copy(update={"tool_calls": (forged,)})

    resumer = Chain(
        [
            MemoryAdvisor(memory),
            ToolCallingAdvisor(),
            ApprovalAdvisor(DeferredApprover(), store=approvals),
        ],
        model=ScriptedChatModel(["Not cancelled."]),
        tools=[cancel_order, order_status],
    )
    if streamed:
        events = [
            e async for e in resumer.stream(decisions={"x1": Approve()}, conversation_id="c1")
        ]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
    else:
        response = await resumer.call(decisions={"x1": Approve()}, conversation_id="c1")
    assert cancelled == []
    refused = response.messages[0]
    assert isinstance(refused, ToolMessage) and refused.is_error and "differs" in refused.text
    (audit,) = await approvals.audit()
    assert (audit.call_id, audit.decision, audit.decided_by) == ("x1", "rejected", "advisorchain")
    assert_valid_history(await memory.load("c1"))
