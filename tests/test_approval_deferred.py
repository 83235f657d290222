"""Deferred approval: pending -> persisted -> resumed (fresh chain, fresh store object), on
every store: in memory, SQLite, and a real PostgreSQL server."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChainConfigurationError,
    ChatRequest,
    ImagePart,
    LoggingAdvisor,
    ReasoningPart,
    ResponseCompleted,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolContext,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalAlreadyResolved,
    ApprovalNotFound,
    ApprovalStore,
    Approve,
    CallbackApprover,
    DeferredApprover,
    InMemoryApprovalStore,
    InvalidApprovalDecisions,
    PostgresApprovalStore,
    Reject,
    SQLiteApprovalStore,
)
from advisorchain.advisors.approval import Defer, StoredResult
from advisorchain.providers import ScriptedChatModel

from postgres_support import POSTGRES_DSN, drop_approval_tables, require_postgres_dsn

StoreFactory = Callable[..., ApprovalStore]
"""Makes a fresh store object on the same data: `factory(clock=...)`."""


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of store objects that all see the same data."""
    if request.param == "memory":
        shared = InMemoryApprovalStore()

        def memory(clock: Callable[[], float] | None = None) -> ApprovalStore:
            if clock is not None:
                shared.clock = clock
            return shared

        yield memory
    elif request.param == "sqlite":
        path = tmp_path / "approvals.db"

        def sqlite(clock: Callable[[], float] | None = None) -> ApprovalStore:
            if clock is None:
                return SQLiteApprovalStore(path)
            return SQLiteApprovalStore(path, clock=clock)

        yield sqlite
    else:
        dsn = require_postgres_dsn()
        prefix = f"t{uuid.uuid4().hex[:10]}_"
        made: list[PostgresApprovalStore] = []

        def postgres(clock: Callable[[], float] | None = None) -> ApprovalStore:
            if clock is None:
                store = PostgresApprovalStore(dsn, table_prefix=prefix)
            else:
                store = PostgresApprovalStore(dsn, table_prefix=prefix, clock=clock)
            made.append(store)
            return store

        yield postgres
        for store in made:
            store._pool.close_idle()
        drop_approval_tables(dsn, prefix)


class Bank:
    """Tools whose effects are visible; `transfer` needs approval and sees its context."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, str, str]] = []
        self.reads = 0
        self.before_transfer: Callable[[], Any] | None = None

        @tool(requires_approval=True)
        async def transfer(to: str, amount: int, context: ToolContext) -> str:
            """Send money to an account."""
            if self.before_transfer is not None:
                await self.before_transfer()
            self.sent.append((to, amount, context.idempotency_key, context["tenant"]))
            return f"sent {amount} to {to}"

        @tool
        def balance() -> int:
            """The account's balance."""
            self.reads += 1
            return 100

        self.tools = [transfer, balance]


def call(name: str, id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=id)


@pytest.fixture(params=["before", "after"])
def placement(request: pytest.FixtureRequest) -> str:
    """Where the ApprovalAdvisor sits: before (outside) or after (inside) the tool loop."""
    value: str = request.param
    return value


def links(advisor: Advisor, placement: str) -> list[Advisor]:
    """The advisor and the tool loop, in the order `placement` names."""
    loop = ToolCallingAdvisor()
    return [advisor, loop] if placement == "before" else [loop, advisor]


def fresh_chain(
    placement: str, store: ApprovalStore, replies: list[Any]
) -> tuple[Chain, ScriptedChatModel]:
    """A new chain (no tools of its own), as another process would build it."""
    model = ScriptedChatModel(replies)
    chain = Chain(links(ApprovalAdvisor(DeferredApprover(), store=store), placement), model=model)
    return chain, model


async def suspend(
    placement: str, stores: StoreFactory, calls: list[ToolCall] | None = None
) -> tuple[str, Bank, Any]:
    """Run a turn that ends waiting for approval; its pending id, bank and response."""
    bank = Bank()
    chain, _ = fresh_chain(
        placement,
        stores(),
        [calls or [call("transfer", "c1", to="bob", amount=5), call("balance", "c2")]],
    )
    response = await chain.call(
        "pay bob",
        tools=bank.tools,
        tool_context={"tenant": "t-secret-1"},
        conversation_id="conv-9",
        temperature=0.25,
        stop="END",
        extra={"seed": 7},
    )
    assert response.pending_approval is not None
    return response.pending_approval.id, bank, response


@pytest.mark.anyio
@pytest.mark.parametrize("resume_at", ["before", "after"])
async def test_pending_turn_is_saved_and_resumed_in_a_fresh_chain(
    stores: StoreFactory, placement: str, resume_at: str
) -> None:
    pending_id, bank, response = await suspend(placement, stores)
    assert response.finish_reason == "approval_pending"
    assert [c.id for c in response.pending_approval.calls] == ["c1"]
    assert bank.sent == [] and bank.reads == 1
    assert [type(m).__name__ for m in response.messages] == ["AssistantMessage", "ToolMessage"]

    record = await stores().get(pending_id)
    assert record is not None and record.status == "pending"
    assert record.conversation_id == "conv-9"
    assert record.options == {"temperature": 0.25, "stop": ["END"], "extra": {"seed": 7}}
    # the transcript up to and including the tool-call message, then the finished results
    assert record.messages == (UserMessage(content="pay bob"), *response.messages)
    assert set(record.tool_names) == {"transfer", "balance"}
    assert [c.call.call_id for c in record.calls] == ["c1"]
    assert dict(record.calls[0].call.arguments) == {"to": "bob", "amount": 5}
    assert "t-secret-1" not in repr(record)
    store = stores()
    if isinstance(store, SQLiteApprovalStore):
        stored = b"".join(p.read_bytes() for p in Path(store.path).parent.glob("approvals.db*"))
        assert b"pay bob" in stored and b"t-secret-1" not in stored

    worker = Bank()
    chain, model = fresh_chain(resume_at, stores(), ["Paid bob."])
    resumed = await chain.resume(
        pending_id,
        {"c1": Approve(by="alice")},
        tools=worker.tools,
        tool_context={"tenant": "t-secret-1"},
    )
    assert resumed.text == "Paid bob."
    assert worker.sent == [("bob", 5, "c1", "t-secret-1")]
    assert worker.reads == 0  # the finished call is not run again
    (request,) = model.requests
    assert request.conversation_id == "conv-9"
    assert request.options.temperature == 0.25
    assert request.options.stop == ("END",) and dict(request.options.extra) == {"seed": 7}
    messages = request.messages
    assert isinstance(messages[0], UserMessage)
    assert isinstance(messages[1], AssistantMessage) and len(messages[1].tool_calls) == 2
    assert [(m.tool_call_id, m.content) for m in messages[2:] if isinstance(m, ToolMessage)] == [
        ("c2", "100"),
        ("c1", "sent 5 to bob"),
    ]
    first = resumed.messages[0]
    assert isinstance(first, ToolMessage) and first.tool_call_id == "c1"
    assert resumed.messages[-1].content == "Paid bob."

    (audit,) = await stores().audit(pending_id)
    assert (audit.decision, audit.decided_by, audit.conversation_id) == (
        "approved",
        "alice",
        "conv-9",
    )
    done = await stores().get(pending_id)
    assert done is not None and done.status == "completed"


@pytest.mark.anyio
async def test_second_resume_after_completion_is_refused_and_changes_nothing(
    stores: StoreFactory, placement: str
) -> None:
    pending_id, _, _ = await suspend(placement, stores)
    worker = Bank()
    chain, _ = fresh_chain(placement, stores(), ["ok"])
    await chain.resume(
        pending_id, {"c1": Approve()}, tools=worker.tools, tool_context={"tenant": "t"}
    )
    before = (await stores().get(pending_id), await stores().audit())
    chain, model = fresh_chain(placement, stores(), ["again"])
    with pytest.raises(ApprovalAlreadyResolved, match="already resolved"):
        await chain.resume(
            pending_id, {"c1": Approve()}, tools=worker.tools, tool_context={"tenant": "t"}
        )
    assert (await stores().get(pending_id), await stores().audit()) == before
    assert len(worker.sent) == 1 and model.requests == []


@pytest.mark.anyio
async def test_rejected_and_edited_decisions_on_resume(
    stores: StoreFactory, placement: str
) -> None:
    pending_id, _, _ = await suspend(
        placement,
        stores,
        [
            call("transfer", "c1", to="bob", amount=5),
            call("transfer", "c2", to="eve", amount=7),
            call("transfer", "c3", to="ann", amount=9),
        ],
    )
    worker = Bank()
    chain, model = fresh_chain(placement, stores(), ["done"])
    resumed = await chain.resume(
        pending_id,
        {
            "c1": Approve({"to": "bob", "amount": 4}),
            "c2": Reject("eve is unknown"),
            "c3": Approve({"to": "ann", "amount": "nine"}),
        },
        tools=worker.tools,
        tool_context={"tenant": "t"},
    )
    assert worker.sent == [("bob", 4, "c1", "t")]
    results = [m for m in resumed.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["c1", "c2", "c3"]
    assert [m.is_error for m in results] == [False, True, True]
    assert "eve is unknown" in results[1].content
    assert "amount" in results[2].content
    decisions = [(a.call_id, a.decision) for a in await stores().audit(pending_id)]
    assert decisions == [("c1", "edited"), ("c2", "rejected"), ("c3", "edited")]
    assert len(model.requests) == 1


@pytest.mark.anyio
async def test_stream_path_defers_and_resumes(stores: StoreFactory, placement: str) -> None:
    bank = Bank()
    chain, _ = fresh_chain(
        placement, stores(), [[call("transfer", "c1", to="bob", amount=5), call("balance", "c2")]]
    )
    events = [e async for e in chain.stream("pay", tools=bank.tools, tool_context={"tenant": "t"})]
    assert [type(e).__name__ for e in events] == [
        "ToolCallStarted",
        "ToolCallStarted",
        "ToolCallFinished",
        "ResponseCompleted",
    ]
    finished = events[2]
    assert isinstance(finished, ToolCallFinished) and finished.call.id == "c2"
    completed = events[-1]
    assert isinstance(completed, ResponseCompleted)
    assert completed.response.finish_reason == "approval_pending"
    pending = completed.response.pending_approval
    assert pending is not None
    record = await stores().get(pending.id)
    assert record is not None
    assert record.messages == (UserMessage(content="pay"), *completed.response.messages)

    worker = Bank()
    chain, _ = fresh_chain(placement, stores(), ["Paid bob."])
    resumed = [
        e
        async for e in chain.resume_stream(
            pending.id, {"c1": Approve()}, tools=worker.tools, tool_context={"tenant": "t"}
        )
    ]
    assert isinstance(resumed[0], ToolCallStarted) and resumed[0].call.id == "c1"
    assert isinstance(resumed[1], ToolCallFinished) and resumed[1].outcome == "ok"
    assert "".join(e.text for e in resumed if isinstance(e, TextDelta)) == "Paid bob."
    last = resumed[-1]
    assert isinstance(last, ResponseCompleted) and last.response.text == "Paid bob."
    assert isinstance(last.response.messages[0], ToolMessage)
    assert worker.sent == [("bob", 5, "c1", "t")]


@pytest.mark.anyio
async def test_bad_input_gets_clear_errors_and_leaves_the_store_unchanged(
    stores: StoreFactory, placement: str
) -> None:
    pending_id, _, _ = await suspend(placement, stores)
    worker = Bank()
    chain, model = fresh_chain(placement, stores(), ["never"])
    before = await stores().get(pending_id)

    async def resume(pid: str, decisions: Any, tools: Any = worker.tools) -> None:
        await chain.resume(pid, decisions, tools=tools, tool_context={"tenant": "t"})

    with pytest.raises(ApprovalNotFound, match="no pending approval"):
        await resume("approval_nope", {"c1": Approve()})
    with pytest.raises(InvalidApprovalDecisions, match="not pending .*c2"):
        await resume(pending_id, {"c1": Approve(), "c2": Approve()})
    with pytest.raises(InvalidApprovalDecisions, match="no decision for pending call"):
        await resume(pending_id, {})
    with pytest.raises(InvalidApprovalDecisions, match="must be Approve"):
        await resume(pending_id, {"c1": Defer()})
    with pytest.raises(InvalidApprovalDecisions, match="must map"):
        await resume(pending_id, [Approve()])
    with pytest.raises(ChainConfigurationError, match="missing: transfer"):
        await resume(pending_id, {"c1": Approve()}, tools=worker.tools[1:])
    assert await stores().get(pending_id) == before
    assert await stores().audit() == []
    assert worker.sent == [] and model.requests == []

    plain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel([]))
    with pytest.raises(ChainConfigurationError, match="resume"):
        await plain.resume(pending_id, {"c1": Approve()})


@pytest.mark.anyio
async def test_racing_resumes_execute_the_call_once(stores: StoreFactory, placement: str) -> None:
    pending_id, _, _ = await suspend(placement, stores)
    worker = Bank()
    loser_failed = anyio.Event()
    worker.before_transfer = loser_failed.wait  # the winner holds its claim until the loser lost
    outcomes: list[str] = []

    async def resume() -> None:
        chain, _ = fresh_chain(placement, stores(), ["Paid."])
        try:
            response = await chain.resume(
                pending_id, {"c1": Approve()}, tools=worker.tools, tool_context={"tenant": "t"}
            )
        except ApprovalAlreadyResolved:
            outcomes.append("already resolved")
            loser_failed.set()
        else:
            outcomes.append(response.text)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(resume)
            group.start_soon(resume)
    assert sorted(outcomes) == ["Paid.", "already resolved"]
    assert worker.sent == [("bob", 5, "c1", "t")]


class Crash(BaseException):
    """Stands for the process dying in the middle of a tool call."""


@pytest.mark.anyio
async def test_crash_between_claim_and_result_reports_unknown(
    stores: StoreFactory, placement: str
) -> None:
    pending_id, _, _ = await suspend(placement, stores)
    crashing = Bank()

    async def die() -> None:
        raise Crash

    crashing.before_transfer = die
    chain, _ = fresh_chain(placement, stores(), ["never"])
    with pytest.raises(Crash):
        await chain.resume(
            pending_id, {"c1": Approve()}, tools=crashing.tools, tool_context={"tenant": "t"}
        )

    worker = Bank()
    chain, _ = fresh_chain(placement, stores(), ["too soon"])
    with pytest.raises(ApprovalAlreadyResolved, match="another worker"):
        await chain.resume(
            pending_id, {"c1": Approve()}, tools=worker.tools, tool_context={"tenant": "t"}
        )

    later = stores(clock=lambda: 4e9)  # the first claim's lease has run out
    chain, model = fresh_chain(placement, later, ["I do not know whether bob was paid."])
    resumed = await chain.resume(
        pending_id, {"c1": Approve()}, tools=worker.tools, tool_context={"tenant": "t"}
    )
    assert worker.sent == [] and crashing.sent == []
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.is_error and "unknown" in result.content
    assert model.requests[0].messages[-1] == result
    record = await later.get(pending_id)
    assert record is not None and record.status == "completed"
    assert record.calls[0].result is not None and record.calls[0].result.outcome == "unknown"


@pytest.mark.anyio
async def test_calls_decided_but_not_started_run_after_a_takeover(
    stores: StoreFactory, placement: str
) -> None:
    pending_id, _, _ = await suspend(
        placement,
        stores,
        [call("transfer", "c1", to="bob", amount=1), call("transfer", "c2", to="ann", amount=2)],
    )
    crashing = Bank()
    crashes = iter([False, True])

    async def maybe_die() -> None:
        if next(crashes):
            raise Crash

    crashing.before_transfer = maybe_die
    chain, _ = fresh_chain(placement, stores(), ["never"])
    with pytest.raises(Crash):
        await chain.resume(
            pending_id,
            {"c1": Approve(), "c2": Approve()},
            tools=crashing.tools,
            tool_context={"tenant": "t"},
        )
    assert crashing.sent == [("bob", 1, "c1", "t")]

    worker = Bank()
    chain, model = fresh_chain(placement, stores(clock=lambda: 4e9), ["ok"])
    resumed = await chain.resume(
        pending_id,
        {"c1": Approve(), "c2": Reject("changed my mind")},
        tools=worker.tools,
        tool_context={"tenant": "t"},
    )
    # c1 finished before the crash: its stored result is reused; c2 was being run: unknown.
    assert worker.sent == []
    results = [m for m in resumed.messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.is_error) for m in results] == [("c1", False), ("c2", True)]
    assert "unknown" in results[1].content
    # the decisions recorded by the first claim stand
    assert [a.decision for a in await stores().audit(pending_id)] == ["approved", "approved"]


@pytest.mark.anyio
async def test_inline_and_deferred_decisions_in_one_round(
    stores: StoreFactory, placement: str
) -> None:
    bank = Bank()

    def decide(request: Any) -> Any:
        return [Approve() if c.arguments["amount"] < 100 else Defer() for c in request.calls]

    model = ScriptedChatModel(
        [[call("transfer", "c1", to="bob", amount=5), call("transfer", "c2", to="eve", amount=500)]]
    )
    chain = Chain(
        links(ApprovalAdvisor(CallbackApprover(decide), store=stores()), placement),
        model=model,
        tools=bank.tools,
    )
    response = await chain.call("pay", tool_context={"tenant": "t"})
    assert response.pending_approval is not None
    assert [c.id for c in response.pending_approval.calls] == ["c2"]
    assert bank.sent == [("bob", 5, "c1", "t")]
    record = await stores().get(response.pending_approval.id)
    assert record is not None and [c.call.call_id for c in record.calls] == ["c2"]


@pytest.mark.anyio
async def test_deferred_approver_defaults_to_a_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    advisor = ApprovalAdvisor(DeferredApprover())
    assert isinstance(advisor.store, SQLiteApprovalStore)
    bank = Bank()
    chain = Chain(
        [advisor, ToolCallingAdvisor()],
        model=ScriptedChatModel([call("transfer", "c1", to="bob", amount=5)]),
        tools=bank.tools,
    )
    response = await chain.call("pay", tool_context={"tenant": "t"})
    assert response.pending_approval is not None
    assert (tmp_path / "approvals.db").exists()
    assert await SQLiteApprovalStore(tmp_path / "approvals.db").get(response.pending_approval.id)


def test_postgres_tests_fail_in_ci_without_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(POSTGRES_DSN, raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run"):
        require_postgres_dsn()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        require_postgres_dsn()


def test_postgres_store_names_its_extra_when_psycopg_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"psycopg\[binary\]>=3\.1.*pip install '\.\[postgres\]'"):
        PostgresApprovalStore("postgresql://localhost/x")


@pytest.mark.anyio
async def test_a_continuation_reusing_a_resumed_call_id_waits_again(
    stores: StoreFactory, placement: str
) -> None:
    pending_id, _, _ = await suspend(placement, stores)
    worker = Bank()
    chain, _ = fresh_chain(placement, stores(), [call("transfer", "c1", to="eve", amount=900)])
    response = await chain.resume(
        pending_id, {"c1": Approve()}, tools=worker.tools, tool_context={"tenant": "t"}
    )
    assert worker.sent == [("bob", 5, "c1", "t")]  # the resumed call only
    assert response.finish_reason == "approval_pending"
    assert response.pending_approval is not None and response.pending_approval.id != pending_id
    record = await stores().get(response.pending_approval.id)
    assert record is not None and record.status == "pending"
    # saved once each: the first transcript, the resumed result, the new tool-call message
    first = await stores().get(pending_id)
    assert first is not None
    resumed_result, asking_again = response.messages
    assert isinstance(resumed_result, ToolMessage) and resumed_result.tool_call_id == "c1"
    assert record.messages == (*first.messages, resumed_result, asking_again)


@pytest.mark.anyio
async def test_waiting_lists_pending_approvals_by_conversation(
    stores: StoreFactory, placement: str
) -> None:
    first, _, _ = await suspend(placement, stores)
    second, _, _ = await suspend(placement, stores)
    assert {r.id for r in await stores().waiting()} == {first, second}
    assert {r.id for r in await stores().waiting("conv-9")} == {first, second}
    assert await stores().waiting("other") == []
    worker = Bank()
    chain, _ = fresh_chain(placement, stores(), ["ok"])
    await chain.resume(first, {"c1": Approve()}, tools=worker.tools, tool_context={"tenant": "t"})
    assert [r.id for r in await stores().waiting()] == [second]


@pytest.mark.anyio
async def test_the_canonical_chain_defers_and_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The project's chain: logging outside the tool loop, approval inside it."""
    path = tmp_path / "approvals.db"

    def canonical(replies: list[Any]) -> tuple[Chain, ScriptedChatModel]:
        model = ScriptedChatModel(replies)
        approvals = ApprovalAdvisor(DeferredApprover(), store=SQLiteApprovalStore(path))
        return Chain([LoggingAdvisor(), ToolCallingAdvisor(), approvals], model=model), model

    caplog.set_level(logging.INFO, logger="advisorchain")
    bank = Bank()
    chain, _ = canonical([[call("transfer", "c1", to="bob", amount=5), call("balance", "c2")]])
    response = await chain.call(
        "pay bob", tools=bank.tools, tool_context={"tenant": "t"}, conversation_id="conv-1"
    )
    assert response.finish_reason == "approval_pending" and bank.sent == []
    pending = response.pending_approval
    assert pending is not None
    record = await SQLiteApprovalStore(path).get(pending.id)
    assert record is not None and record.conversation_id == "conv-1"
    assert record.messages == (UserMessage(content="pay bob"), *response.messages)

    worker = Bank()
    chain, model = canonical(["Paid bob."])
    resumed = await chain.resume(
        pending.id, {"c1": Approve(by="alice")}, tools=worker.tools, tool_context={"tenant": "t"}
    )
    assert resumed.text == "Paid bob." and worker.sent == [("bob", 5, "c1", "t")]
    assert model.requests[0].messages == (*record.messages, resumed.messages[0])
    (audit,) = await SQLiteApprovalStore(path).audit(pending.id)
    assert (audit.decision, audit.decided_by) == ("approved", "alice")
    # the logging advisor, outside the loop, sees each turn once, the resumed result included
    turns = [r for r in caplog.records if getattr(r, "event", None) == "turn"]
    assert [(r.finish_reason, r.tool_calls) for r in turns] == [  # type: ignore[attr-defined]
        ("approval_pending", 1),
        ("stop", 1),
    ]
    tool_calls = [r for r in caplog.records if getattr(r, "event", None) == "tool_call"]
    assert sorted((r.call_id, r.outcome) for r in tool_calls) == [  # type: ignore[attr-defined]
        ("c1", "ok"),
        ("c1", "pending"),
        ("c2", "ok"),
    ]


def _resumed_id(request: ChatRequest) -> str | None:
    return request.resumption.id if request.resumption is not None else None


class Memory(Advisor):
    """Stands for a memory advisor outside the loop: records what each turn shows it."""

    def __init__(self) -> None:
        self.turns: list[tuple[object, tuple[Any, ...]]] = []

    async def call(self, request: Any, next: Any) -> Any:
        response = await next(request)
        self.turns.append((_resumed_id(request), response.messages))
        return response

    async def stream(self, request: Any, next: Any) -> Any:
        async for event in next(request):
            if isinstance(event, ResponseCompleted):
                self.turns.append((_resumed_id(request), event.response.messages))
            yield event


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_links_outside_the_loop_see_a_resumed_turn_and_its_results(
    placement: str, mode: str
) -> None:
    store = InMemoryApprovalStore()
    memory = Memory()
    model = ScriptedChatModel(
        [[call("transfer", "c1", to="bob", amount=5), call("balance", "c2")], "Paid bob."]
    )
    approvals = ApprovalAdvisor(DeferredApprover(), store=store)
    bank = Bank()
    chain = Chain([memory, *links(approvals, placement)], model=model, tools=bank.tools)

    async def run(turn: Any) -> Any:
        if mode == "call":
            return await turn()
        events = [e async for e in turn(stream=True)]
        assert isinstance(events[-1], ResponseCompleted)
        return events[-1].response

    def first(stream: bool = False) -> Any:
        return (chain.stream if stream else chain.call)("pay bob", tool_context={"tenant": "t"})

    suspended = await run(first)
    pending = suspended.pending_approval

    def resume(stream: bool = False) -> Any:
        go = chain.resume_stream if stream else chain.resume
        return go(pending.id, {"c1": Approve()}, tool_context={"tenant": "t"})

    resumed = await run(resume)
    assert [flag for flag, _ in memory.turns] == [None, pending.id]
    # what the memory would store (user message once, then each turn's messages) is the
    # complete transcript: the resumed result sits between the two turns' messages
    stored = (UserMessage(content="pay bob"), *memory.turns[0][1], *memory.turns[1][1])
    assert stored == (*model.requests[-1].messages, resumed.message)
    assert bank.sent == [("bob", 5, "c1", "t")]


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(24))


@pytest.mark.anyio
async def test_content_parts_survive_the_store_and_the_resume(
    stores: StoreFactory, placement: str
) -> None:
    @tool
    def chart() -> ImagePart:
        """A chart."""
        return ImagePart(data=PNG)

    @tool(requires_approval=True)
    def snapshot() -> list[Any]:
        """A camera snapshot."""
        return ["snap", ImagePart(data=PNG)]

    tools = [chart, snapshot]
    reasoning = ReasoningPart(text="Both tools.", signature="sig-1", provider="anthropic")
    first = AssistantMessage(
        content=(reasoning, TextPart(text="Looking.")),
        tool_calls=(call("snapshot", "c1"), call("chart", "c2")),
    )
    question = UserMessage(content=(TextPart(text="What changed?"), ImagePart(data=PNG)))
    chain, _ = fresh_chain(placement, stores(), [first])
    response = await chain.call([question], tools=tools)
    assert response.pending_approval is not None
    pending_id = response.pending_approval.id
    chart_result = ToolMessage(tool_call_id="c2", name="chart", content=(ImagePart(data=PNG),))

    record = await stores().get(pending_id)  # a fresh store object: read back from storage
    assert record is not None
    assert record.messages == (question, first, chart_result)

    chain, model = fresh_chain(placement, stores(), ["Nothing."])
    resumed = await chain.resume(pending_id, {"c1": Approve()}, tools=tools)
    assert resumed.text == "Nothing."
    (request,) = model.requests
    snap = ToolMessage(
        tool_call_id="c1", name="snapshot", content=(TextPart(text="snap"), ImagePart(data=PNG))
    )
    assert request.messages == (question, first, chart_result, snap)
    done = await stores().get(pending_id)
    assert done is not None
    assert done.calls[0].result == StoredResult(content=snap.content, outcome="ok")


def test_results_stored_by_0_1_still_load() -> None:
    from advisorchain.advisors.approval.store import dump_result, load_result

    assert load_result('{"content": "sent 5 to bob", "outcome": "ok"}') == StoredResult(
        content="sent 5 to bob", outcome="ok"
    )
    parts = StoredResult(content=(TextPart(text="a"), ImagePart(data=PNG)), outcome="ok")
    assert load_result(dump_result(parts)) == parts
