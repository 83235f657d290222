"""ApprovalAdvisor with inline approvers: approve, edit, reject, fail closed, rounds."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread
import pytest

from advisorchain import (
    Advisor,
    Chain,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolContext,
    ToolMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalCall,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    ConsoleApprover,
    InMemoryApprovalStore,
    Reject,
)
from advisorchain.advisors.approval import Decisions
from advisorchain.providers import ScriptedChatModel


class Bank:
    """Tools with visible side effects."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []
        self.reads = 0

        @tool(requires_approval=True)
        def transfer(to: str, amount: int) -> str:
            """Send money to an account."""
            self.sent.append((to, amount))
            return f"sent {amount} to {to}"

        @tool
        def balance() -> int:
            """The account's balance."""
            self.reads += 1
            return 100

        self.transfer = transfer
        self.balance = balance


def call(name: str, id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=id)


def tool_messages(model: ScriptedChatModel, request: int = 1) -> list[ToolMessage]:
    return [m for m in model.requests[request].messages if isinstance(m, ToolMessage)]


class Recorder:
    """A callback approver that records what it was asked and answers from a function."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Decisions:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        result: Decisions = self.answer(request) if callable(self.answer) else self.answer
        return result


@pytest.fixture(params=["before", "after"])
def placement(request: pytest.FixtureRequest) -> str:
    """Where the ApprovalAdvisor sits: before (outside) or after (inside) the tool loop."""
    value: str = request.param
    return value


def links(advisor: Advisor, placement: str) -> list[Advisor]:
    """The advisor and the tool loop, in the order `placement` names."""
    loop = ToolCallingAdvisor()
    return [advisor, loop] if placement == "before" else [loop, advisor]


def build(
    placement: str, bank: Bank, replies: list[Any], approver: Any, **options: Any
) -> tuple[Chain, ScriptedChatModel]:
    model = ScriptedChatModel(replies)
    advisor = ApprovalAdvisor(approver, **options)
    chain = Chain(links(advisor, placement), model=model, tools=[bank.transfer, bank.balance])
    return chain, model


@pytest.mark.anyio
async def test_approved_call_runs_and_the_approver_sees_it(placement: str) -> None:
    bank = Bank()
    recorder = Recorder(lambda r: [Approve()])
    chain, model = build(
        placement,
        bank,
        [call("transfer", "c1", to="bob", amount=5), "Done."],
        CallbackApprover(recorder),
    )
    response = await chain.call("pay bob 5", conversation_id="conv-1")
    assert response.text == "Done."
    assert bank.sent == [("bob", 5)]
    (request,) = recorder.requests
    assert request.conversation_id == "conv-1"
    (item,) = request.calls
    assert (item.call_id, item.tool_name, dict(item.arguments)) == (
        "c1",
        "transfer",
        {"to": "bob", "amount": 5},
    )
    assert item.description == "Send money to an account."
    assert tool_messages(model)[0].content == "sent 5 to bob"


@pytest.mark.anyio
async def test_calls_that_need_no_approval_do_not_ask(placement: str) -> None:
    bank = Bank()
    recorder = Recorder(lambda r: [Approve()])
    chain, _ = build(placement, bank, [call("balance", "c1"), "100"], CallbackApprover(recorder))
    assert (await chain.call("balance?")).text == "100"
    assert recorder.requests == []
    assert bank.reads == 1


@pytest.mark.anyio
async def test_edited_arguments_are_used_and_validated(placement: str) -> None:
    bank = Bank()
    chain, model = build(
        placement,
        bank,
        [call("transfer", "c1", to="bob", amount=500), "ok"],
        CallbackApprover(lambda r: {"c1": Approve({"to": "bob", "amount": 50}, by="alice")}),
    )
    await chain.call("pay bob 500")
    assert bank.sent == [("bob", 50)]

    bank = Bank()
    chain, model = build(
        placement,
        bank,
        [call("transfer", "c1", to="bob", amount=500), "ok"],
        CallbackApprover(lambda r: {"c1": Approve({"to": "bob", "amount": "lots"})}),
    )
    await chain.call("pay bob 500")
    assert bank.sent == []
    (message,) = tool_messages(model)
    assert message.is_error and "amount" in message.content


@pytest.mark.anyio
async def test_rejected_call_is_not_run_and_the_model_reads_the_reason(placement: str) -> None:
    bank = Bank()
    chain, model = build(
        placement,
        bank,
        [call("transfer", "c1", to="eve", amount=5), "I could not pay eve."],
        CallbackApprover(lambda r: [Reject("eve is not a known payee")]),
    )
    response = await chain.call("pay eve")
    assert bank.sent == []
    (message,) = tool_messages(model)
    assert message.is_error
    assert "eve is not a known payee" in message.content
    assert response.text == "I could not pay eve."


@pytest.mark.anyio
async def test_mixed_parallel_round_asks_once_for_all_calls_that_need_approval(
    placement: str,
) -> None:
    bank = Bank()
    recorder = Recorder(lambda r: {"c1": Approve(), "c3": Reject("too much")})
    chain, model = build(
        placement,
        bank,
        [
            [
                call("transfer", "c1", to="bob", amount=5),
                call("balance", "c2"),
                call("transfer", "c3", to="eve", amount=900),
            ],
            "done",
        ],
        CallbackApprover(recorder),
    )
    await chain.call("go")
    (request,) = recorder.requests
    assert [c.call_id for c in request.calls] == ["c1", "c3"]
    assert bank.sent == [("bob", 5)]
    assert bank.reads == 1
    messages = tool_messages(model)
    assert [m.tool_call_id for m in messages] == ["c1", "c2", "c3"]
    assert [m.is_error for m in messages] == [False, False, True]


@pytest.mark.anyio
async def test_the_round_waits_for_the_decision_while_unapproved_calls_run(
    placement: str,
) -> None:
    bank = Bank()
    balance_done = anyio.Event()

    async def approver(request: ApprovalRequest) -> Decisions:
        await balance_done.wait()  # the call needing no approval finishes meanwhile
        return [Approve()]

    class Watch(ApprovalAdvisor):
        async def call_tool(self, invocation: Any, next: Any) -> Any:
            result = await super().call_tool(invocation, next)
            if invocation.name == "balance":
                balance_done.set()
            return result

    model = ScriptedChatModel(
        [[call("transfer", "c1", to="bob", amount=1), call("balance", "c2")], "ok"]
    )
    chain = Chain(
        links(Watch(CallbackApprover(approver)), placement),
        model=model,
        tools=[bank.transfer, bank.balance],
    )
    with anyio.fail_after(10):
        await chain.call("go")
    assert bank.sent == [("bob", 1)] and bank.reads == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [
        RuntimeError("approver down"),
        lambda r: "yes please",
        lambda r: [Approve(), Approve()],  # one decision too many
        lambda r: {"c1": "approve"},
        lambda r: {"other": Approve()},
        lambda r: [Approve(arguments=["not", "a", "mapping"])],  # type: ignore[arg-type]
    ],
)
async def test_failing_or_malformed_approver_rejects(answer: Any, placement: str) -> None:
    bank = Bank()
    store = InMemoryApprovalStore()
    chain, model = build(
        placement,
        bank,
        [call("transfer", "c1", to="bob", amount=5), "sorry"],
        CallbackApprover(Recorder(answer)),
        store=store,
    )
    await chain.call("pay")
    assert bank.sent == []
    (message,) = tool_messages(model)
    assert message.is_error and "rejected" in message.content
    (record,) = await store.audit()
    assert record.decision == "rejected" and record.decided_by == "advisorchain"
    assert "approver down" not in message.content


@pytest.mark.anyio
async def test_approver_timeout_rejects(placement: str) -> None:
    bank = Bank()

    async def never(request: ApprovalRequest) -> Decisions:
        await anyio.sleep_forever()
        raise AssertionError

    chain, model = build(
        placement,
        bank,
        [call("transfer", "c1", to="bob", amount=5), "sorry"],
        CallbackApprover(never),
        timeout=0.01,
    )
    await chain.call("pay")
    assert bank.sent == []
    (message,) = tool_messages(model)
    assert message.is_error and "no decision within" in message.content


@pytest.mark.anyio
async def test_every_call_gets_exactly_one_result_in_order(placement: str) -> None:
    bank = Bank()
    calls = [call("transfer", f"c{i}", to="bob", amount=i) for i in range(6)] + [
        call("balance", "b"),
        ToolCall(id="bad", name="transfer", arguments="{not json"),
        call("nope", "unknown"),
    ]
    chain, model = build(
        placement,
        bank,
        [calls, "done"],
        CallbackApprover(
            lambda r: [Approve() if i % 2 else Reject("odd") for i in range(len(r.calls))]
        ),
    )
    await chain.call("go")
    ids = [m.tool_call_id for m in tool_messages(model)]
    assert ids == [c.id for c in calls]
    assert sorted(bank.sent) == [("bob", 1), ("bob", 3), ("bob", 5)]


@pytest.mark.anyio
async def test_policy_decides_and_may_show_values_but_not_the_context(placement: str) -> None:
    bank = Bank()
    recorder = Recorder(lambda r: [Approve()])

    def policy(t: Any, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        if t.name == "balance":
            return {"user": context["user"]}
        return False

    chain, _ = build(
        placement,
        bank,
        [[call("transfer", "c1", to="bob", amount=5), call("balance", "c2")], "ok"],
        CallbackApprover(recorder),
        policy=policy,
    )
    await chain.call("go", tool_context={"user": "u-7", "secret": "s3cr3t"})
    (request,) = recorder.requests
    (item,) = request.calls
    assert item.tool_name == "balance" and dict(item.details) == {"user": "u-7"}
    assert "s3cr3t" not in repr(request)
    assert bank.sent == [("bob", 5)]


@pytest.mark.anyio
async def test_audit_records_every_decision(placement: str) -> None:
    bank = Bank()
    store = InMemoryApprovalStore()
    chain, _ = build(
        placement,
        bank,
        [
            [
                call("transfer", "c1", to="bob", amount=5),
                call("transfer", "c2", to="eve", amount=9),
            ],
            "ok",
        ],
        CallbackApprover(lambda r: [Approve({"to": "bob", "amount": 4}, by="alice"), Reject("no")]),
        store=store,
    )
    await chain.call("go", conversation_id="conv")
    edited, rejected = await store.audit()
    assert (edited.call_id, edited.decision, edited.decided_by) == ("c1", "edited", "alice")
    assert dict(edited.arguments) == {"to": "bob", "amount": 5}
    assert dict(edited.edited_arguments or {}) == {"to": "bob", "amount": 4}
    assert (rejected.decision, rejected.reason, rejected.conversation_id) == (
        "rejected",
        "no",
        "conv",
    )
    assert edited.decided_at > 0


@pytest.mark.anyio
async def test_stream_path_reports_rejection(placement: str) -> None:
    bank = Bank()
    chain, _ = build(
        placement,
        bank,
        [call("transfer", "c1", to="bob", amount=5), "ok"],
        CallbackApprover(lambda r: [Reject("not today")]),
    )
    finished = [e async for e in chain.stream("pay") if isinstance(e, ToolCallFinished)]
    assert [e.outcome for e in finished] == ["rejected"]
    assert bank.sent == []


def test_approval_advisor_needs_an_approver() -> None:
    with pytest.raises(TypeError, match="not an Approver"):
        ApprovalAdvisor(lambda r: [])  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_console_approver_approve_edit_reject(placement: str) -> None:
    bank = Bank()
    answers = iter(
        ["x", "a", "e", "{bad", "e", '{"to": "bob", "amount": 2}', "r", "eve is unknown"]
    )
    output = io.StringIO()
    console = ConsoleApprover(input_fn=lambda: next(answers), output=output, user="ops")
    store = InMemoryApprovalStore()
    chain, model = build(
        placement,
        bank,
        [
            [
                call("transfer", "c1", to="ann", amount=1),
                call("transfer", "c2", to="bob", amount=20),
                call("transfer", "c3", to="eve", amount=3),
            ],
            "ok",
        ],
        console,
        store=store,
    )
    await chain.call("go")
    assert sorted(bank.sent) == [("ann", 1), ("bob", 2)]
    text = output.getvalue()
    assert "Approval needed for 3 tool calls" in text
    assert "[2/3] transfer: Send money to an account." in text
    assert "amount = 20" in text
    assert "please answer a, aa, e or r" in text
    assert "not valid JSON" in text
    assert [a.decided_by for a in await store.audit()] == ["ops", "ops", "ops"]
    assert "eve is unknown" in tool_messages(model)[2].content


@pytest.mark.anyio
async def test_console_approver_rejects_at_end_of_input() -> None:
    def eof() -> str:
        raise EOFError

    console = ConsoleApprover(input_fn=eof, output=io.StringIO())
    request = ApprovalRequest(
        calls=(ApprovalCall(id="c1", name="t", description="d", arguments={}),)
    )
    (decision,) = await console.decide(request)
    assert isinstance(decision, Reject)


@pytest.mark.anyio
async def test_console_input_does_not_block_the_event_loop() -> None:
    import threading

    started, answered = threading.Event(), threading.Event()

    def blocking_input() -> str:
        # a task of the event loop sets `answered` once this runs: "a" if the loop kept running
        started.set()
        return "a" if answered.wait(10) else "r"

    console = ConsoleApprover(input_fn=blocking_input, output=io.StringIO())
    request = ApprovalRequest(
        calls=(ApprovalCall(id="c1", name="t", description="d", arguments={}),)
    )
    decisions: list[Any] = []

    async def ask() -> None:
        decisions.extend(await console.decide(request))

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        await anyio.to_thread.run_sync(started.wait, 10)
        answered.set()
    assert decisions == [Approve(by="console")]


@pytest.mark.anyio
async def test_a_call_id_repeated_in_a_later_round_is_asked_about_again(placement: str) -> None:
    bank = Bank()
    recorder: Recorder = Recorder(
        lambda r: [Approve()] if len(recorder.requests) == 1 else [Reject("no")]
    )
    chain, model = build(
        placement,
        bank,
        [
            call("transfer", "call_0", to="bob", amount=1),
            call("transfer", "call_0", to="eve", amount=900),
            "done",
        ],
        CallbackApprover(recorder),
    )
    await chain.call("go")
    assert len(recorder.requests) == 2
    assert bank.sent == [("bob", 1)]
