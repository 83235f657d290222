"""A deferred approval inside a chain called as a tool (`Chain.as_tool`) suspends the
parent turn; `Chain.resume` of the parent resumes the child through the call, once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolMessage,
    ToolProgress,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalAlreadyResolved,
    ApprovalStore,
    Approve,
    CallbackApprover,
    DeferredApprover,
    InMemoryApprovalStore,
    InvalidApprovalDecisions,
    Reject,
)
from advisorchain.core.subchain import SUBCHAIN_APPROVAL
from advisorchain.core.suspension import PendingApproval
from advisorchain.providers import ScriptedChatModel

# the memory/SQLite/PostgreSQL store factory the deferred-approval tests use
from test_approval_deferred import StoreFactory, stores

__all__ = ["stores"]  # the fixture


def _call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=call_id)


@dataclass
class Mail:
    """The child's tool, which needs approval; `sent` is what it did."""

    sent: list[str] = field(default_factory=list)
    gate: anyio.Event | None = None

    def tools(self) -> list[Any]:
        @tool(requires_approval=True)
        async def send(to: str) -> str:
            """Send a mail."""
            if self.gate is not None:
                await self.gate.wait()
            self.sent.append(to)
            return f"sent to {to}"

        return [send]


def _approvals(store: ApprovalStore) -> ApprovalAdvisor:
    return ApprovalAdvisor(DeferredApprover(), store=store)


def _links(approvals: ApprovalAdvisor, placement: str) -> list[Any]:
    if placement == "before":
        return [approvals, ToolCallingAdvisor()]
    return [ToolCallingAdvisor(), approvals]


@dataclass
class Worker:
    """One process's chains: a parent whose tool `mailer` is a child chain."""

    parent: Chain
    parent_model: ScriptedChatModel
    child_model: ScriptedChatModel
    mail: Mail


def worker(
    store: ApprovalStore,
    parent_script: list[Any],
    child_script: Any,
    *,
    placement: str = "after",
    child_placement: str = "after",
    mail: Mail | None = None,
) -> Worker:
    mail = mail or Mail()
    child_model = ScriptedChatModel(child_script)
    child = Chain(_links(_approvals(store), child_placement), model=child_model, tools=mail.tools())
    parent_model = ScriptedChatModel(parent_script)
    parent = Chain(
        _links(_approvals(store), placement),
        model=parent_model,
        tools=[child.as_tool("mailer", "Sends mails.")],
    )
    return Worker(parent, parent_model, child_model, mail)


async def _run(chain: Chain, prompt: str, streamed: bool) -> tuple[ChatResponse, list[StreamEvent]]:
    if not streamed:
        return await chain.call(prompt), []
    events = [e async for e in chain.stream(prompt)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response, events


async def _resume(
    chain: Chain, pending_id: str, decisions: dict[str, Any], streamed: bool
) -> tuple[ChatResponse, list[StreamEvent]]:
    if not streamed:
        return await chain.resume(pending_id, decisions), []
    events = [e async for e in chain.resume_stream(pending_id, decisions)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response, events


async def _suspend(store: ApprovalStore, streamed: bool = False, **kw: Any) -> ChatResponse:
    # Both chains name their first call "c1": the ids repeat across levels.
    first = worker(
        store, [_call("mailer", "c1", task="mail bob")], [_call("send", "c1", to="bob")], **kw
    )
    response, _ = await _run(first.parent, "mail bob", streamed)
    assert response.finish_reason == "approval_pending"
    assert first.mail.sent == []
    return response


@pytest.mark.anyio
@pytest.mark.parametrize("placement", ["before", "after"])
@pytest.mark.parametrize("child_placement", ["before", "after"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_childs_deferred_approval_suspends_and_resumes_the_parent(
    stores: StoreFactory, placement: str, child_placement: str, streamed: bool
) -> None:
    first = worker(
        stores(),
        [_call("mailer", "c1", task="mail bob")],
        [_call("send", "c1", to="bob")],
        placement=placement,
        child_placement=child_placement,
    )
    response, events = await _run(first.parent, "mail bob", streamed)

    assert response.finish_reason == "approval_pending" and first.mail.sent == []
    suspension = response.suspension
    assert suspension is not None
    [(call_id, inner)] = suspension.inner
    assert call_id == "c1" and inner.calls[0].name == "send"
    # One API for every pending approval of the tree: the child's, by its own id.
    assert suspension.approvals == (PendingApproval(id=inner.id, calls=inner.calls),)
    assert suspension.calls[0].name == "mailer"
    # History stays valid: the parent's transcript ends with its call, waiting.
    last = response.messages[-1]
    assert isinstance(last, AssistantMessage) and last.tool_calls[0].name == "mailer"
    # Both turns are saved: the parent's waits for the child's approval.
    parent_record = await stores().get(suspension.id)
    assert parent_record is not None
    assert parent_record.calls[0].call.details[SUBCHAIN_APPROVAL] == inner.id
    assert await stores().get(inner.id) is not None
    if streamed:
        progress = [e.event for e in events if isinstance(e, ToolProgress)]
        assert any(isinstance(e, ToolCallStarted) and e.call.name == "send" for e in progress)
        assert not any(isinstance(e, ToolCallFinished) for e in events)

    # Another process resumes the parent: the child resumes through the call, once.
    second = worker(
        stores(),
        ["Bob has his mail."],
        ["Mailed bob."],
        placement=placement,
        child_placement=child_placement,
    )
    decisions = suspension.decisions(lambda approval, call: Approve())
    assert decisions == {"c1": {"c1": Approve()}}
    resumed, resumed_events = await _resume(second.parent, suspension.id, decisions, streamed)

    assert second.mail.sent == ["bob"]
    assert resumed.finish_reason == "stop" and resumed.text == "Bob has his mail."
    # The resumed turn pays for the child's resumed turn too: one model call each.
    assert resumed.usage.requests == 2
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.tool_call_id == "c1"
    assert result.content == "Mailed bob." and not result.is_error
    # The child's model continued its own transcript, with its tool's result.
    child_seen = second.child_model.requests[0].messages
    assert child_seen[0] == UserMessage(content="mail bob")
    assert child_seen[-1] == ToolMessage(tool_call_id="c1", name="send", content="sent to bob")
    # The parent's model read the child's answer as the tool result.
    assert second.parent_model.requests[0].messages[-1] == result
    if streamed:
        assert isinstance(resumed_events[0], ToolCallStarted)
        finished = resumed_events[1]
        assert isinstance(finished, ToolCallFinished) and finished.outcome == "ok"
        text = "".join(e.text for e in resumed_events if isinstance(e, TextDelta))
        assert text == "Bob has his mail."
    for record_id in (suspension.id, inner.id):
        record = await stores().get(record_id)
        assert record is not None and record.status == "completed"
    with pytest.raises(ApprovalAlreadyResolved):
        await second.parent.resume(suspension.id, decisions)
    assert second.mail.sent == ["bob"]


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_rejection_inside_the_child_reaches_its_model_not_its_tool(
    streamed: bool,
) -> None:
    store = InMemoryApprovalStore()
    suspension = (await _suspend(store)).suspension
    assert suspension is not None
    second = worker(store, ["Not sent."], ["I was not allowed."])
    [approval] = suspension.approvals
    decisions = suspension.decisions({approval.id: {"c1": Reject("not bob")}})
    resumed, _ = await _resume(second.parent, suspension.id, decisions, streamed)

    assert second.mail.sent == []
    child_seen = second.child_model.requests[0].messages[-1]
    assert isinstance(child_seen, ToolMessage) and child_seen.is_error
    assert "not bob" in child_seen.text
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.content == "I was not allowed."
    assert resumed.text == "Not sent."


@pytest.mark.anyio
async def test_rejecting_the_sub_agents_call_refuses_it_without_resuming_the_child() -> None:
    store = InMemoryApprovalStore()
    suspension = (await _suspend(store)).suspension
    assert suspension is not None
    second = worker(store, ["Skipped."], [])
    resumed = await second.parent.resume(suspension.id, {"c1": Reject("not now")})

    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.is_error and "not now" in result.text
    assert second.child_model.requests == [] and second.mail.sent == []
    assert resumed.text == "Skipped."


@pytest.mark.anyio
async def test_bad_decisions_for_the_sub_agents_call_are_refused_before_anything_runs() -> None:
    store = InMemoryApprovalStore()
    suspension = (await _suspend(store)).suspension
    assert suspension is not None
    second = worker(store, ["never"], ["never"])
    with pytest.raises(InvalidApprovalDecisions, match="sub-agent"):
        await second.parent.resume(suspension.id, {"c1": Approve()})
    with pytest.raises(KeyError):
        suspension.decisions({"approval_unknown": {}})
    record = await store.get(suspension.id)
    assert record is not None and record.status == "pending"
    # The right decisions still resume it.
    await second.parent.resume(suspension.id, suspension.decisions(lambda a, c: Approve()))
    assert second.mail.sent == ["bob"]


@pytest.mark.anyio
async def test_two_workers_racing_on_one_sql_store_run_the_childs_tool_once(
    stores: StoreFactory,
) -> None:
    suspension = (await _suspend(stores())).suspension
    assert suspension is not None
    decisions = suspension.decisions(lambda a, c: Approve())
    gate = anyio.Event()
    mail = Mail(gate=gate)  # both workers' tools record here; the winner's waits for the loser
    racers = [worker(stores(), ["done"], ["mailed"], mail=mail) for _ in range(2)]
    outcomes: list[str] = []

    async def race(racer: Worker) -> None:
        try:
            response = await racer.parent.resume(suspension.id, decisions)
            outcomes.append(response.text)
        except ApprovalAlreadyResolved:
            outcomes.append("lost")
            gate.set()

    async with anyio.create_task_group() as group:
        for racer in racers:
            group.start_soon(race, racer)

    assert sorted(outcomes) == ["done", "lost"]
    assert mail.sent == ["bob"]
    assert sum(len(r.child_model.requests) for r in racers) == 1


@pytest.mark.anyio
async def test_a_resume_that_died_inside_the_child_leaves_its_outcome_unknown(
    stores: StoreFactory,
) -> None:
    now = [1000.0]
    store = stores(clock=lambda: now[0])
    suspension = (await _suspend(store)).suspension
    assert suspension is not None
    decisions = suspension.decisions(lambda a, c: Approve())

    class Crash(BaseException):
        pass

    def crash(request: Any) -> Any:
        raise Crash

    doomed = worker(stores(clock=lambda: now[0]), ["never"], crash)
    with pytest.raises(Crash):  # the child's model call after its tool ran: a crash
        await doomed.parent.resume(suspension.id, decisions)
    assert doomed.mail.sent == ["bob"]

    now[0] += 3600  # the dead resume's claim expires
    second = worker(stores(clock=lambda: now[0]), ["Check it."], ["never"])
    resumed = await second.parent.resume(suspension.id, decisions)
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.is_error and "unknown" in result.text
    assert second.mail.sent == [] and second.child_model.requests == []
    assert resumed.text == "Check it."


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_two_levels_of_sub_agents_suspend_and_resume_together(streamed: bool) -> None:
    store = InMemoryApprovalStore()

    def tree(parent: list[Any], middle: list[Any], leaf: list[Any], mail: Mail) -> Chain:
        inner = Chain(
            [ToolCallingAdvisor(), _approvals(store)],
            model=ScriptedChatModel(leaf),
            tools=mail.tools(),
        )
        middle_chain = Chain(
            [ToolCallingAdvisor(), _approvals(store)],
            model=ScriptedChatModel(middle),
            tools=[inner.as_tool("mailer", "Sends mails.")],
        )
        return Chain(
            [ToolCallingAdvisor(), _approvals(store)],
            model=ScriptedChatModel(parent),
            tools=[middle_chain.as_tool("assistant", "Does errands.")],
        )

    first_mail = Mail()
    first = tree(
        [_call("assistant", "c1", task="mail bob")],
        [_call("mailer", "c1", task="mail bob")],
        [_call("send", "c1", to="bob")],
        first_mail,
    )
    response, _ = await _run(first, "mail bob", streamed)
    suspension = response.suspension
    assert suspension is not None and first_mail.sent == []
    [approval] = suspension.approvals
    assert approval.calls[0].name == "send"
    decisions = suspension.decisions({approval.id: {"c1": Approve()}})
    assert decisions == {"c1": {"c1": {"c1": Approve()}}}

    second_mail = Mail()
    second = tree(["All done."], ["Errand done."], ["Mailed."], second_mail)
    resumed, _ = await _resume(second, suspension.id, decisions, streamed)
    assert second_mail.sent == ["bob"]
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.content == "Errand done."
    assert resumed.text == "All done."


@pytest.mark.anyio
async def test_a_parent_waiting_for_its_own_and_a_childs_approval_resumes_both() -> None:
    store = InMemoryApprovalStore()
    parent_mail = Mail()

    def parent_of(script: list[Any], child_script: list[Any], mail: Mail) -> Worker:
        built = worker(store, script, child_script, mail=mail)
        return Worker(
            Chain(
                [ToolCallingAdvisor(), _approvals(store)],
                model=built.parent_model,
                tools=[*built.parent.tools, *parent_mail.tools()],
            ),
            built.parent_model,
            built.child_model,
            mail,
        )

    first = parent_of(
        [[_call("mailer", "c1", task="mail bob"), _call("send", "c2", to="ann")]],
        [_call("send", "c1", to="bob")],
        Mail(),
    )
    response = await first.parent.call("mail both")
    suspension = response.suspension
    assert suspension is not None
    own, inner = suspension.approvals
    assert own.id == suspension.id and [c.id for c in own.calls] == ["c2"]
    assert [c.name for c in inner.calls] == ["send"] and inner.id != own.id

    child_mail = Mail()
    second = parent_of(["Both mailed."], ["Mailed bob."], child_mail)
    decisions = suspension.decisions({own.id: {"c2": Approve()}, inner.id: {"c1": Approve()}})
    resumed = await second.parent.resume(suspension.id, decisions)
    assert parent_mail.sent == ["ann"] and child_mail.sent == ["bob"]
    results = [m for m in resumed.messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in results] == [
        ("c1", "Mailed bob."),
        ("c2", "sent to ann"),
    ]
    assert resumed.text == "Both mailed."


@pytest.mark.anyio
async def test_a_sub_agent_that_waits_again_while_resumed_is_an_error_result() -> None:
    store = InMemoryApprovalStore()

    def parent_of(script: list[Any], child_script: list[Any], mail: Mail) -> Chain:
        child = Chain(
            [ToolCallingAdvisor(), _approvals(store)],
            model=ScriptedChatModel(child_script),
            tools=mail.tools(),
        )
        # The sub-agent's call itself needs approval: deferred, then approved on resume.
        return Chain(
            [ToolCallingAdvisor(), _approvals(store)],
            model=ScriptedChatModel(script),
            tools=[child.as_tool("mailer", "Sends mails.", requires_approval=True)],
        )

    first = parent_of([_call("mailer", "c1", task="mail bob")], [], Mail())
    suspension = (await first.call("mail bob")).suspension
    assert suspension is not None and suspension.inner == ()
    mail = Mail()
    # Run on resume, the child defers its own call: the parent cannot wait a second time.
    second = parent_of(["It needs another approval."], [_call("send", "k1", to="bob")], mail)
    resumed = await second.resume(suspension.id, {"c1": Approve()})
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.is_error
    assert "SubchainSuspendedError" in result.text
    assert resumed.finish_reason == "stop" and mail.sent == []


@pytest.mark.anyio
async def test_an_approved_sub_agent_call_that_suspends_saves_the_parent() -> None:
    store = InMemoryApprovalStore()
    mail = Mail()
    child = Chain(
        [ToolCallingAdvisor(), _approvals(store)],
        model=ScriptedChatModel([_call("send", "k1", to="bob"), "Mailed."]),
        tools=mail.tools(),
    )
    parent = Chain(
        [
            ToolCallingAdvisor(),
            ApprovalAdvisor(CallbackApprover(lambda r: [Approve() for _ in r.calls]), store=store),
        ],
        model=ScriptedChatModel([_call("mailer", "c1", task="mail bob"), "Done."]),
        tools=[child.as_tool("mailer", "Sends mails.", requires_approval=True)],
    )
    response = await parent.call("mail bob")
    suspension = response.suspension
    assert suspension is not None and await store.get(suspension.id) is not None
    resumed = await parent.resume(suspension.id, suspension.decisions(lambda a, c: Approve()))
    assert mail.sent == ["bob"] and resumed.text == "Done."


@pytest.mark.anyio
async def test_a_child_resumed_on_its_own_leaves_the_parents_call_an_error_result() -> None:
    store = InMemoryApprovalStore()
    first = worker(store, [_call("mailer", "c1", task="mail bob")], [_call("send", "c1", to="bob")])
    suspension = (await first.parent.call("mail bob")).suspension
    assert suspension is not None
    [(_, inner)] = suspension.inner
    mail = Mail()
    alone = Chain([ToolCallingAdvisor(), _approvals(store)], model=ScriptedChatModel(["ok"]))
    await alone.resume(inner.id, {"c1": Approve()}, tools=mail.tools())
    assert mail.sent == ["bob"]

    second = worker(store, ["It was handled elsewhere."], ["never"], mail=mail)
    resumed = await second.parent.resume(
        suspension.id, suspension.decisions(lambda a, c: Approve())
    )
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.is_error
    assert "ApprovalAlreadyResolved" in result.text
    assert mail.sent == ["bob"] and second.child_model.requests == []
