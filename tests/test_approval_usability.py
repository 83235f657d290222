"""Approvals a user can use from the docs alone (issue 14 item 8): prompts one at a time,
one spelling of the tool name, a flat pending shape."""

from __future__ import annotations

import io
import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, tool
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalCall,
    ApprovalRequest,
    Approve,
    ConsoleApprover,
    DeferredApprover,
    InMemoryApprovalStore,
)
from advisorchain.providers import ScriptedChatModel


def one_call(call_id: str) -> ApprovalRequest:
    return ApprovalRequest(calls=(ApprovalCall(id=call_id, name="t", arguments={}),))


@pytest.mark.anyio
async def test_the_console_approver_never_prompts_twice_at_once() -> None:
    """Two `decide` calls at once (two turns sharing a console): the second prompt only
    appears once the first was answered, so "a" can only answer the prompt shown."""
    lock = threading.Lock()
    active: list[int] = []
    overlapped = threading.Event()
    first_entered = threading.Event()

    def read() -> str:
        with lock:
            active.append(1)
            if len(active) > 1:
                overlapped.set()
        first_entered.set()
        # hold the first prompt open until a second one shows up, or long enough for it
        # to have shown up if nothing stopped it
        overlapped.wait(1.0)
        with lock:
            active.pop()
        return "a"

    output = io.StringIO()
    console = ConsoleApprover(input_fn=read, output=output)
    answers: dict[str, Any] = {}

    async def decide(call_id: str) -> None:
        answers[call_id] = await console.decide(one_call(call_id))

    async with anyio.create_task_group() as group:
        group.start_soon(decide, "c1")
        await anyio.to_thread.run_sync(first_entered.wait, 10)
        group.start_soon(decide, "c2")
    assert not overlapped.is_set()
    assert answers == {"c1": [Approve(by="console")], "c2": [Approve(by="console")]}
    text = output.getvalue()
    assert text.count("approve (a)") == 2
    assert text.index("[1/1] t") < text.index("approve (a)") < text.rindex("[1/1] t")


def test_an_approval_call_spells_the_tool_name_as_a_tool_call_does() -> None:
    call = ApprovalCall(id="c1", name="transfer", arguments={"to": "bob"})
    model_call = ToolCall.from_arguments("transfer", {"to": "bob"}, id="c1")
    assert (call.id, call.name) == (model_call.id, model_call.name)
    assert (call.call_id, call.tool_name) == ("c1", "transfer")  # the 0.1 names, deprecated
    assert call.description == "" and dict(call.details) == {}


@tool(requires_approval=True)
def transfer(to: str, amount: int) -> str:
    """Send money."""
    return f"sent {amount} to {to}"


@pytest.mark.anyio
async def test_a_pending_approval_has_a_flat_shape() -> None:
    store = InMemoryApprovalStore()
    model = ScriptedChatModel([ToolCall.from_arguments("transfer", {"to": "bob", "amount": 5})])
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(DeferredApprover(), store=store)],
        model=model,
        tools=[transfer],
    )
    response = await chain.call("pay bob")
    (waiting,) = response.deferred
    assert dict(waiting.metadata["arguments"]) == {"to": "bob", "amount": 5}
    record = await store.get(waiting.metadata["approval_id"])
    assert record is not None
    assert [(c.id, c.name, dict(c.arguments)) for c in record.calls] == [
        (waiting.id, "transfer", {"to": "bob", "amount": 5})
    ]


@pytest.mark.anyio
async def test_the_console_can_always_allow_a_tool_for_the_conversation() -> None:
    answers = iter(["aa"])
    console = ConsoleApprover(input_fn=lambda: next(answers), output=io.StringIO(), user="ops")
    store = InMemoryApprovalStore()
    approval = ApprovalAdvisor(console, store=store)
    calls = [
        ToolCall.from_arguments("transfer", {"to": "bob", "amount": 5}, id="c1"),
        ToolCall.from_arguments("transfer", {"to": "eve", "amount": 7}, id="c2"),
    ]
    model = ScriptedChatModel([calls[:1], calls[1:], "done"])
    chain = Chain([ToolCallingAdvisor(), approval], model=model, tools=[transfer])
    response = await chain.call("pay", conversation_id="conv")
    assert response.text == "done"  # the second round was not asked (no answer left)
    (rule,) = await approval.rules("conv")
    assert (rule.name, rule.created_by, rule.arguments) == ("transfer", "ops", None)
