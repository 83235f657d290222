"""Standing approval rules (issue 14 item 7): read-only tools approved automatically, and
"always allow this tool (optionally with these arguments) in this conversation", kept in
the store with an audit record, and revocable; on every store, on both paths."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    Chain,
    ChatResponse,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalRequest,
    ApprovalStore,
    Approve,
    CallbackApprover,
    DeferredApprover,
    InMemoryApprovalStore,
    PostgresApprovalStore,
    Reject,
    SQLiteApprovalStore,
    StandingRule,
)
from advisorchain.providers import ScriptedChatModel

from path_support import answer
from postgres_support import drop_approval_tables, require_postgres_dsn


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ApprovalStore]:
    if request.param == "memory":
        yield InMemoryApprovalStore()
    elif request.param == "sqlite":
        yield SQLiteApprovalStore(tmp_path / "approvals.db")
    else:
        dsn = require_postgres_dsn()
        prefix = f"t{uuid.uuid4().hex[:10]}_"
        pg = PostgresApprovalStore(dsn, table_prefix=prefix)
        yield pg
        pg._pool.close_idle()
        drop_approval_tables(dsn, prefix)


@pytest.fixture(params=["call", "stream"])
def mode(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


class Ledger:
    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

        @tool(requires_approval=True)
        def transfer(to: str, amount: int) -> str:
            """Send money."""
            self.ran.append(("transfer", {"to": to, "amount": amount}))
            return "sent"

        @tool(requires_approval=True, read_only=True)
        def balance() -> int:
            """The balance."""
            self.ran.append(("balance", {}))
            return 100

        self.tools = [transfer, balance]


class Asker:
    """Approves (or answers `answer`) and records what it was asked."""

    def __init__(self, answer: Any = None) -> None:
        self.asked: list[list[str]] = []
        self.answer = answer

    def __call__(self, request: ApprovalRequest) -> list[Any]:
        self.asked.append([c.name for c in request.calls])
        return [self.answer or Approve(by="alice") for _ in request.calls]


def transfer(to: str = "bob", amount: int = 5, id: str = "c1") -> ToolCall:
    return ToolCall.from_arguments("transfer", {"to": to, "amount": amount}, id=id)


async def turn(chain: Chain, mode: str, conversation_id: str | None = "conv") -> ChatResponse:
    if mode == "call":
        return await chain.call("go", conversation_id=conversation_id)
    events = [e async for e in chain.stream("go", conversation_id=conversation_id)]
    completed = events[-1]
    assert isinstance(completed, ResponseCompleted)
    return completed.response


@pytest.mark.anyio
@pytest.mark.parametrize("auto", [True, False])
async def test_read_only_tools_are_approved_automatically_when_asked_to(
    mode: str, auto: bool
) -> None:
    ledger, asker = Ledger(), Asker()
    approval = ApprovalAdvisor(
        CallbackApprover(asker, run_inline=True), auto_approve_read_only=auto
    )
    model = ScriptedChatModel(
        [[ToolCall.from_arguments("balance", {}, id="b1"), transfer()], "done"]
    )
    chain = Chain([ToolCallingAdvisor(), approval], model=model, tools=ledger.tools)
    response = await turn(chain, mode)
    assert response.text == "done"
    assert asker.asked == ([["transfer"]] if auto else [["balance", "transfer"]])
    assert sorted(name for name, _ in ledger.ran) == ["balance", "transfer"]


@pytest.mark.anyio
async def test_always_allow_a_tool_in_one_conversation(store: ApprovalStore, mode: str) -> None:
    ledger, asker = Ledger(), Asker()
    approval = ApprovalAdvisor(CallbackApprover(asker, run_inline=True), store=store)
    rule = await approval.allow("conv", "transfer", by="alice")
    assert isinstance(rule, StandingRule) and rule.arguments is None
    assert await approval.rules("conv") == [rule]
    assert await approval.rules("other") == []

    model = ScriptedChatModel([[transfer()], "ok", [transfer(id="c2")], "ok"])
    chain = Chain([approval, ToolCallingAdvisor()], model=model, tools=ledger.tools)
    await turn(chain, mode)
    assert asker.asked == []  # the rule approved it
    await turn(chain, mode, conversation_id="other")
    assert asker.asked == [["transfer"]]  # another conversation is asked
    assert len(ledger.ran) == 2

    audit = await store.audit()
    made, by_rule, asked = audit
    assert (made.decision, made.decided_by, made.approval_id) == ("allowed", "alice", rule.id)
    assert made.conversation_id == "conv" and made.tool_name == "transfer"
    assert by_rule.decision == "approved" and rule.id in by_rule.decided_by
    assert (asked.decision, asked.decided_by) == ("approved", "alice")


@pytest.mark.anyio
async def test_a_revoked_rule_allows_nothing(store: ApprovalStore, mode: str) -> None:
    ledger, asker = Ledger(), Asker(Reject("no", by="alice"))
    approval = ApprovalAdvisor(CallbackApprover(asker, run_inline=True), store=store)
    rule = await approval.allow("conv", "transfer", by="alice")
    revoked = await approval.revoke(rule.id, by="bob")
    assert revoked is not None and revoked.revoked_by == "bob" and revoked.revoked_at
    assert await approval.revoke(rule.id, by="bob") is None  # once
    assert await approval.revoke("rule_unknown", by="bob") is None
    assert await approval.rules("conv") == []

    model = ScriptedChatModel([[transfer()], "ok"])
    chain = Chain([ToolCallingAdvisor(), approval], model=model, tools=ledger.tools)
    await turn(chain, mode)
    assert asker.asked == [["transfer"]] and ledger.ran == []
    decisions = [(a.decision, a.decided_by) for a in await store.audit()]
    assert decisions == [("allowed", "alice"), ("revoked", "bob"), ("rejected", "alice")]


@pytest.mark.anyio
async def test_a_rule_with_arguments_allows_only_those(store: ApprovalStore, mode: str) -> None:
    ledger, asker = Ledger(), Asker(Reject("no"))
    approval = ApprovalAdvisor(CallbackApprover(asker, run_inline=True), store=store)
    await approval.allow("conv", "transfer", arguments={"amount": 5, "to": "bob"}, by="alice")
    calls = [transfer(), transfer(to="mallory", amount=5000, id="c2")]
    chain = Chain(
        [ToolCallingAdvisor(), approval],
        model=ScriptedChatModel([calls, "ok"]),
        tools=ledger.tools,
    )
    await turn(chain, mode)
    assert ledger.ran == [("transfer", {"to": "bob", "amount": 5})]
    assert asker.asked == [["transfer"]]  # only mallory's call was asked about


@pytest.mark.anyio
@pytest.mark.parametrize("remember", ["tool", "arguments"])
async def test_an_approver_can_remember_its_approval(
    store: ApprovalStore, mode: str, remember: Any
) -> None:
    ledger = Ledger()
    asker = Asker(Approve(by="alice", remember=remember))
    approval = ApprovalAdvisor(CallbackApprover(asker, run_inline=True), store=store)
    model = ScriptedChatModel(
        [[transfer()], [transfer(id="c2")], [transfer(amount=6, id="c3")], "ok"]
    )
    chain = Chain([ToolCallingAdvisor(), approval], model=model, tools=ledger.tools)
    await turn(chain, mode)
    rule, *later = await approval.rules("conv")
    assert rule.created_by == "alice"
    assert rule.arguments == (None if remember == "tool" else {"to": "bob", "amount": 5})
    # amount=6 was asked about again under an arguments rule, and remembered in turn
    assert [r.arguments for r in later] == (
        [] if remember == "tool" else [{"to": "bob", "amount": 6}]
    )
    # the same call again: allowed; other arguments: allowed by a tool rule only
    assert asker.asked == ([["transfer"]] if remember == "tool" else [["transfer"]] * 2)
    assert len(ledger.ran) == 3


@pytest.mark.anyio
async def test_without_a_conversation_nothing_is_remembered(mode: str) -> None:
    store = InMemoryApprovalStore()
    asker = Asker(Approve(remember="tool"))
    approval = ApprovalAdvisor(CallbackApprover(asker, run_inline=True), store=store)
    chain = Chain(
        [ToolCallingAdvisor(), approval],
        model=ScriptedChatModel([[transfer()], "ok"]),
        tools=Ledger().tools,
    )
    await turn(chain, mode, conversation_id=None)
    assert await store.rules("conv") == [] and store._rules == {}


@pytest.mark.anyio
async def test_a_rule_spares_a_deferred_approval_and_a_resume_can_make_one(
    store: ApprovalStore, mode: str
) -> None:
    ledger = Ledger()
    approval = ApprovalAdvisor(DeferredApprover(), store=store)
    model = ScriptedChatModel([[transfer()], "ok", [transfer(id="c2")], "ok"])
    chain = Chain([ToolCallingAdvisor(), approval], model=model, tools=ledger.tools)
    suspended = await turn(chain, mode)
    assert suspended.finish_reason == "deferred"
    resumed = await answer(
        mode,
        chain,
        [UserMessage(content="go"), *suspended.messages],
        decisions={"c1": Approve(by="alice", remember="tool")},
        conversation_id="conv",
    )
    assert resumed.text == "ok"
    (rule,) = await approval.rules("conv")
    assert rule.created_by == "alice"
    again = await turn(chain, mode)  # the rule answers before the deferral
    assert again.finish_reason != "deferred" and again.text == "ok"
    assert len(ledger.ran) == 2
    kinds = [a.decision for a in await store.audit()]
    assert kinds == ["approved", "allowed", "approved"]
