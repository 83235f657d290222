"""Issue 32, items 1 and 2: what a hook or approver checks is what runs, and an edited
approval is visible to the model, the transcript and memory (audit keeps both)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from test_approval_custom import PAGE, page_example

from advisorchain import (
    Advisor,
    Chain,
    ChatResponse,
    ImagePart,
    ResponseCompleted,
    StreamEvent,
    TextPart,
    Tool,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    DeferredApprover,
    InMemoryApprovalStore,
    MemoryAdvisor,
    PostgresChatMemoryStore,
    Reject,
    SQLiteChatMemoryStore,
)
from advisorchain.advisors.approval.rules import EDITED_ARGUMENTS, edited_result
from advisorchain.advisors.memory.store import ChatMemoryStore
from advisorchain.core.tools import ValidatedArguments
from advisorchain.providers import ScriptedChatModel

from postgres_support import drop_tables, require_postgres_dsn

pytestmark = pytest.mark.anyio


async def turn(
    chain: Chain, prompt: str, streamed: bool, **kwargs: Any
) -> tuple[ChatResponse, list[StreamEvent]]:
    """One turn on `call` or `stream`: the response, and the events when streamed."""
    if not streamed:
        return await chain.call(prompt, **kwargs), []
    events = [e async for e in chain.stream(prompt, **kwargs)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response, events


async def resumed(
    chain: Chain, transcript: Any, decisions: dict[str, Any], streamed: bool, **kwargs: Any
) -> tuple[ChatResponse, list[StreamEvent]]:
    """A resume on `call` or `stream` (`transcript` empty: a memory supplies it)."""
    if not streamed:
        return await chain.call(transcript, decisions=decisions, **kwargs), []
    events = [e async for e in chain.stream(transcript, decisions=decisions, **kwargs)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response, events


def tool_messages(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


class Ledger:
    """`transfer(amount: int, on: date | None, fee: Decimal)`, recording what ran."""

    def __init__(self, *, requires_approval: bool = False) -> None:
        self.sent: list[tuple[Any, ...]] = []

        @tool(requires_approval=requires_approval)
        def transfer(amount: int, on: date | None = None, fee: Decimal = Decimal("0")) -> str:
            """Send money."""
            self.sent.append((amount, on, fee))
            return "transfer done"

        self.transfer = transfer


# -- item 1: hooks, policies and approvers see the validated values ------------------------


@pytest.mark.issue32(1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_docs_amount_limit_advisor_sees_the_integer_not_the_text(
    streamed: bool,
) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(page_example(), str(PAGE), "exec"), namespace)
    asked: list[tuple[str, dict[str, Any]]] = []

    async def confirm(name: str, arguments: dict[str, Any]) -> bool:
        asked.append((name, arguments))
        return False

    ledger = Ledger()
    model = ScriptedChatModel(
        [
            [
                ToolCall.from_arguments("transfer", {"amount": "150"}, id="c1"),
                ToolCall.from_arguments("transfer", {"amount": "50"}, id="c2"),
            ],
            "done",
        ]
    )
    chain = Chain(
        [namespace["AmountLimitAdvisor"](confirm, 100), ToolCallingAdvisor()],
        model=model,
        tools=[ledger.transfer],
    )
    response, _ = await turn(chain, "pay", streamed)  # before: TypeError ends the turn
    assert asked == [("transfer", {"amount": 150, "on": None, "fee": Decimal("0")})]
    assert type(asked[0][1]["amount"]) is int
    assert ledger.sent == [(50, None, Decimal("0"))]
    results = tool_messages(response)
    assert results[0].is_error and "150 is over 100" in results[0].text
    assert results[1].text == "transfer done"


class AmountPolicy(Advisor):
    """A policy written defensively: it only judges numbers (a text is left to the tool)."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        amount = invocation.arguments.get("amount")
        self.seen.append(amount)
        if isinstance(amount, int) and amount > 100:
            return ToolResult(content="Error: over the limit.", outcome="rejected")
        return await next(invocation)


class Smuggler(Advisor):
    """Swaps the arguments without `with_arguments` (not validated, nor flagged)."""

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        return await next(dataclasses.replace(invocation, arguments={"amount": "999"}))


@pytest.mark.issue32(1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_policy_decides_on_what_runs_where_raw_and_validated_differ(
    streamed: bool,
) -> None:
    ledger = Ledger()
    policy = AmountPolicy()
    model = ScriptedChatModel(
        [[ToolCall.from_arguments("transfer", {"amount": "150", "on": "2026-03-04"})], "ok"]
    )
    chain = Chain([ToolCallingAdvisor(), policy], model=model, tools=[ledger.transfer])
    response, _ = await turn(chain, "pay", streamed)
    assert policy.seen == [150]  # before: "150", let through, and the tool ran with 150
    assert ledger.sent == []
    assert tool_messages(response)[0].text == "Error: over the limit."

    # Arguments put in by a link without `with_arguments` are validated before the next
    # link sees them: the policy judges 999, not the text, and not the old 150.
    ledger.sent.clear()
    policy.seen.clear()
    model = ScriptedChatModel([[ToolCall.from_arguments("transfer", {"amount": 5})], "ok"])
    chain = Chain([ToolCallingAdvisor(), Smuggler(), policy], model=model, tools=[ledger.transfer])
    await turn(chain, "pay", streamed)
    assert policy.seen == [999] and ledger.sent == []


class Swapper(Advisor):
    """Swaps in other validated arguments, keeping the old `validated` form (stale)."""

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        other = invocation.tool.check_arguments({"amount": 999})
        return await next(dataclasses.replace(invocation, arguments=other))


@pytest.mark.issue32(1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_stale_validated_form_never_runs(streamed: bool) -> None:
    ledger = Ledger()
    forms: list[Any] = []

    class Peek(Advisor):
        async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
            forms.append(invocation.validated.amount)
            return await next(invocation)

    model = ScriptedChatModel([[ToolCall.from_arguments("transfer", {"amount": 5})], "ok"])
    chain = Chain([ToolCallingAdvisor(), Swapper(), Peek()], model=model, tools=[ledger.transfer])
    await turn(chain, "pay", streamed)
    assert forms == [999] and ledger.sent == [(999, None, Decimal("0"))]
    # Straight to the tool: the arguments' own validated form runs, not the stale one.
    ledger.sent.clear()
    model = ScriptedChatModel([[ToolCall.from_arguments("transfer", {"amount": 5})], "ok"])
    chain = Chain([ToolCallingAdvisor(), Swapper()], model=model, tools=[ledger.transfer])
    await turn(chain, "pay", streamed)
    assert ledger.sent == [(999, None, Decimal("0"))]


@pytest.mark.issue32(1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_hooks_see_read_only_validated_values_and_the_tool_runs_them(
    streamed: bool,
) -> None:
    seen: list[Any] = []

    class Peek(Advisor):
        async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
            seen.append(invocation.arguments)
            with pytest.raises(TypeError, match="with_arguments"):
                invocation.arguments["amount"] = 1  # type: ignore[index]
            return await next(invocation.with_arguments({**invocation.arguments, "fee": "0.5"}))

    ledger = Ledger()
    call = ToolCall.from_arguments("transfer", {"amount": "7", "on": "2026-03-04", "fee": "1.25"})
    model = ScriptedChatModel([[call], "ok"])
    chain = Chain([ToolCallingAdvisor(), Peek()], model=model, tools=[ledger.transfer])
    await turn(chain, "pay", streamed)
    [arguments] = seen
    assert isinstance(arguments, ValidatedArguments)
    assert arguments == {"amount": 7, "on": date(2026, 3, 4), "fee": Decimal("1.25")}
    assert ledger.sent == [(7, date(2026, 3, 4), Decimal("0.5"))]


@pytest.mark.issue32(1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_schema_tool_refuses_what_does_not_fit_before_any_hook(streamed: bool) -> None:
    ran: list[Any] = []
    policy = AmountPolicy()

    def record(arguments: dict[str, Any], context: Any) -> str:
        ran.append(arguments["amount"])
        return "done"

    pay = Tool(
        "transfer",
        "Send money.",
        {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
        record,
    )
    model = ScriptedChatModel([[ToolCall.from_arguments("transfer", {"amount": "150"})], "ok"])
    chain = Chain([ToolCallingAdvisor(), policy], model=model, tools=[pay])
    response, _ = await turn(chain, "pay", streamed)
    assert ran == [] and policy.seen == []
    assert "invalid arguments" in tool_messages(response)[0].text


@pytest.mark.issue32(1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_approver_sees_validated_json_and_its_decision_holds(streamed: bool) -> None:
    shown: list[dict[str, Any]] = []

    def decide(request: ApprovalRequest) -> list[Approve | Reject]:
        shown.extend(dict(c.arguments) for c in request.calls)
        return [
            Approve() if c.arguments["amount"] <= 100 else Reject("too much") for c in request.calls
        ]

    ledger = Ledger(requires_approval=True)
    calls = [
        ToolCall.from_arguments("transfer", {"amount": "150", "on": "2026-03-04"}, id="c1"),
        ToolCall.from_arguments("transfer", {"amount": "40", "fee": 0.25}, id="c2"),
    ]
    model = ScriptedChatModel([calls, "ok"])
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(CallbackApprover(decide))],
        model=model,
        tools=[ledger.transfer],
    )
    response, _ = await turn(chain, "pay", streamed)
    # JSON values of what runs: numbers as numbers, the date and Decimal as their text.
    assert shown == [
        {"amount": 150, "on": "2026-03-04", "fee": "0"},
        {"amount": 40, "on": None, "fee": "0.25"},
    ]
    assert ledger.sent == [(40, None, Decimal("0.25"))]
    assert [m.is_error for m in tool_messages(response)] == [True, False]


@pytest.mark.issue32(1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_standing_rules_and_deferred_resume_match_validated_arguments(
    streamed: bool,
) -> None:
    store = InMemoryApprovalStore()
    ledger = Ledger(requires_approval=True)
    approvals = ApprovalAdvisor(DeferredApprover(), store=store)
    await approvals.allow(
        "conv", "transfer", arguments={"amount": 150, "on": date(2026, 3, 4)}, by="ops"
    )

    def chain(script: list[Any]) -> Chain:
        return Chain(
            [ToolCallingAdvisor(), approvals],
            model=ScriptedChatModel(script),
            tools=[ledger.transfer],
        )

    # The rule (given as values) allows the call the model sent as text: no deferral.
    call = ToolCall.from_arguments("transfer", {"amount": "150", "on": "2026-03-04"}, id="r1")
    response, _ = await turn(chain([[call], "ok"]), "pay", streamed, conversation_id="conv")
    assert response.finish_reason != "deferred"
    assert ledger.sent == [(150, date(2026, 3, 4), Decimal("0"))]

    # Deferred: the saved call shows the validated JSON; the resume runs it (its
    # transcript's text arguments validate to what was shown).
    ledger.sent.clear()
    call = ToolCall.from_arguments("transfer", {"amount": "60", "fee": "0.10"}, id="d1")
    pending, _ = await turn(chain([[call]]), "pay", streamed, conversation_id="other")
    assert pending.finish_reason == "deferred"
    record = await store.get(pending.deferred[0].metadata["approval_id"])
    assert record is not None
    assert dict(record.calls[0].arguments) == {"amount": 60, "on": None, "fee": "0.10"}
    transcript = [UserMessage(content="pay"), *pending.messages]
    response, _ = await resumed(
        chain(["ok"]), transcript, {"d1": Approve()}, streamed, conversation_id="other"
    )
    assert ledger.sent == [(60, None, Decimal("0.10"))]
    assert tool_messages(response)[0].text == "transfer done"


# -- item 2: an edited approval is visible --------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def memory_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ChatMemoryStore]:
    if request.param == "sqlite":
        yield SQLiteChatMemoryStore(tmp_path / "memory.db")
        return
    dsn = require_postgres_dsn()
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    store = PostgresChatMemoryStore(dsn, table_prefix=prefix)
    yield store
    store.close()
    drop_tables(dsn, f"{prefix}memory")


def edited_chain(
    memory: ChatMemoryStore, approvals: ApprovalAdvisor, ledger: Ledger, script: list[Any]
) -> Chain:
    return Chain(
        [MemoryAdvisor(memory), ToolCallingAdvisor(), approvals],
        model=ScriptedChatModel(script),
        tools=[ledger.transfer],
    )


NOTE = (
    "Note: the approver changed the arguments of this call to "
    '{"amount": 50, "fee": "0", "on": null}'
)


async def assert_the_edit_is_visible(
    response: ChatResponse,
    events: list[StreamEvent],
    memory: ChatMemoryStore,
    store: InMemoryApprovalStore,
    ledger: Ledger,
    approvals: ApprovalAdvisor,
) -> None:
    assert ledger.sent == [(50, None, Decimal("0"))]
    [result] = [m for m in tool_messages(response) if m.tool_call_id == "t1"]
    assert result.text.startswith(NOTE) and result.text.endswith("transfer done")
    if events:
        [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
        assert finished.result.text == result.text
    history = await memory.load("conv")
    assert [m for m in history if isinstance(m, ToolMessage)] == [result]
    # The model's next request, on a later turn, carries it too.
    later = edited_chain(memory, approvals, ledger, ["You sent 50."])
    await later.call("how much did you send?", conversation_id="conv")
    sent = later.model.requests[0].messages  # type: ignore[attr-defined]
    assert result in sent
    # Audit keeps both: what was asked and what ran.
    [audit] = [r for r in await store.audit() if r.call_id == "t1"]
    assert audit.decision == "edited"
    assert dict(audit.arguments)["amount"] == 500
    assert dict(audit.edited_arguments or {}) == {"amount": 50}


@pytest.mark.issue32(2)
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_inline_edit_is_visible(streamed: bool, memory_store: ChatMemoryStore) -> None:
    ledger = Ledger(requires_approval=True)
    store = InMemoryApprovalStore()
    approvals = ApprovalAdvisor(
        CallbackApprover(lambda request: [Approve(arguments={"amount": 50})]), store=store
    )
    call = ToolCall.from_arguments("transfer", {"amount": 500}, id="t1")
    chain = edited_chain(memory_store, approvals, ledger, [[call], "Sent."])
    response, events = await turn(chain, "send 500", streamed, conversation_id="conv")
    await assert_the_edit_is_visible(response, events, memory_store, store, ledger, approvals)


@pytest.mark.issue32(2)
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_deferred_edit_is_visible(streamed: bool, memory_store: ChatMemoryStore) -> None:
    ledger = Ledger(requires_approval=True)
    store = InMemoryApprovalStore()
    approvals = ApprovalAdvisor(DeferredApprover(), store=store)
    call = ToolCall.from_arguments("transfer", {"amount": 500}, id="t1")
    chain = edited_chain(memory_store, approvals, ledger, [[call]])
    pending, _ = await turn(chain, "send 500", streamed, conversation_id="conv")
    assert pending.finish_reason == "deferred"
    resumer = edited_chain(memory_store, approvals, ledger, ["Sent."])
    response, events = await resumed(  # the memory supplies the transcript
        resumer, (), {"t1": Approve(arguments={"amount": 50})}, streamed, conversation_id="conv"
    )
    await assert_the_edit_is_visible(response, events, memory_store, store, ledger, approvals)
    # The model's request that continued the turn already carried it.
    sent = resumer.model.requests[0].messages  # type: ignore[attr-defined]
    assert any(isinstance(m, ToolMessage) and m.text.startswith(NOTE) for m in sent)


@pytest.mark.issue32(2)
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_edit_to_the_same_values_adds_no_note(streamed: bool) -> None:
    ledger = Ledger(requires_approval=True)
    approvals = ApprovalAdvisor(CallbackApprover(lambda r: [Approve(arguments={"amount": "500"})]))
    call = ToolCall.from_arguments("transfer", {"amount": 500}, id="t1")
    chain = Chain(
        [ToolCallingAdvisor(), approvals],
        model=ScriptedChatModel([[call], "ok"]),
        tools=[ledger.transfer],
    )
    response, _ = await turn(chain, "pay", streamed)
    assert tool_messages(response)[0].text == "transfer done"


@pytest.mark.issue32(2)
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_edit_that_does_not_fit_is_refused_and_says_so(streamed: bool) -> None:
    ledger = Ledger(requires_approval=True)
    approvals = ApprovalAdvisor(CallbackApprover(lambda r: [Approve(arguments={"amount": "x"})]))
    call = ToolCall.from_arguments("transfer", {"amount": 500}, id="t1")
    chain = Chain(
        [ToolCallingAdvisor(), approvals],
        model=ScriptedChatModel([[call], "ok"]),
        tools=[ledger.transfer],
    )
    response, _ = await turn(chain, "pay", streamed)
    [result] = tool_messages(response)
    assert ledger.sent == [] and result.is_error
    assert result.text.startswith(
        'Note: the approver changed the arguments of this call to {"amount": "x"}'
    )
    assert "invalid arguments for 'transfer'" in result.text


@pytest.mark.issue32(2)
def test_an_edited_result_with_parts_leads_with_the_note() -> None:
    parts = (TextPart(text="chart"), ImagePart(data=b"\x89PNG", media_type="image/png"))
    edited = edited_result(ToolResult(content=parts), {"n": 1}, {"n": 2})
    assert isinstance(edited.content, tuple) and edited.content[1:] == parts
    first = edited.content[0]
    assert isinstance(first, TextPart) and first.text.endswith('to {"n": 2} (not those you sent).')
    assert edited.metadata == {EDITED_ARGUMENTS: {"n": 2}}


@pytest.mark.issue32(1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_approval_policy_judges_the_validated_values(streamed: bool) -> None:
    judged: list[Any] = []

    def over_100(tool: Tool, arguments: Any, context: Any) -> bool:
        judged.append(arguments["amount"])
        return isinstance(arguments["amount"], int) and arguments["amount"] > 100

    asked: list[str] = []

    def decide(request: ApprovalRequest) -> list[Reject]:
        asked.extend(c.id for c in request.calls)
        return [Reject("no") for _ in request.calls]

    ledger = Ledger()
    call = ToolCall.from_arguments("transfer", {"amount": "150"}, id="c1")
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(CallbackApprover(decide), policy=over_100)],
        model=ScriptedChatModel([[call], "ok"]),
        tools=[ledger.transfer],
    )
    await turn(chain, "pay", streamed)
    assert set(judged) == {150} and asked == ["c1"]  # before: "150", not asked, and it ran
    assert ledger.sent == []
