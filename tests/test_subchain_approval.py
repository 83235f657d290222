"""A deferred approval inside a chain called as a tool (`chain_tool`) defers the parent's
call, the child's deferred calls nested in it; the parent's resume (a mapping of the child's
decisions for the call) resumes the child from its own transcript, through the call, once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatResponse,
    InvalidDecisions,
    Message,
    ResponseCompleted,
    Result,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolMessage,
    ToolProgress,
    UserMessage,
    chain_tool,
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
    Reject,
)
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
        tools=[chain_tool(child, "mailer", "Sends mails.")],
    )
    return Worker(parent, parent_model, child_model, mail)


async def _run(
    chain: Chain, prompt: Any, streamed: bool, **options: Any
) -> tuple[ChatResponse, list[StreamEvent]]:
    if not streamed:
        return await chain.call(prompt, **options), []
    events = [e async for e in chain.stream(prompt, **options)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response, events


async def _defer(
    store: ApprovalStore, streamed: bool = False, **kw: Any
) -> tuple[ChatResponse, list[Message]]:
    """The parent's deferred turn and the transcript to resume from. Both chains name
    their first call "c1": the ids repeat across levels."""
    first = worker(
        store, [_call("mailer", "c1", task="mail bob")], [_call("send", "c1", to="bob")], **kw
    )
    response, _ = await _run(first.parent, "mail bob", streamed)
    assert response.finish_reason == "deferred"
    assert first.mail.sent == []
    return response, [UserMessage(content="mail bob"), *response.messages]


def _child_approval(response: ChatResponse) -> str:
    """The approval id of the child's deferred call, nested in the parent's."""
    (mailer,) = response.deferred
    (send,) = mailer.nested
    approval_id: str = send.metadata["approval_id"]
    return approval_id


@pytest.mark.anyio
@pytest.mark.parametrize("placement", ["before", "after"])
@pytest.mark.parametrize("child_placement", ["before", "after"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_childs_deferred_approval_defers_and_resumes_the_parent(
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

    assert response.finish_reason == "deferred" and first.mail.sent == []
    (mailer,) = response.deferred
    assert (mailer.id, mailer.name, mailer.kind) == ("c1", "mailer", "subchain")
    assert mailer.accepts == ("decisions", "reject")
    (send,) = mailer.nested
    assert (send.id, send.name, send.kind) == ("c1", "send", "approval")
    # History stays valid: the parent's transcript ends with its call, waiting.
    last = response.messages[-1]
    assert isinstance(last, AssistantMessage) and last.tool_calls[0].name == "mailer"
    # Only the child's call is recorded in the store; no transcript is.
    record = await stores().get(_child_approval(response))
    assert record is not None and record.status == "pending"
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
    transcript = [UserMessage(content="mail bob"), *response.messages]
    decisions = {"c1": {"c1": Approve()}}
    resumed, resumed_events = await _run(second.parent, transcript, streamed, decisions=decisions)

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
        finished = next(e for e in resumed_events if isinstance(e, ToolCallFinished))
        assert finished.call.id == "c1" and finished.outcome == "ok"
        # the child's resumed turn streams into the parent's, as the call's progress:
        # its settled call's start and end, then its answer
        inner = resumed_events[1 : resumed_events.index(finished)]
        assert all(isinstance(e, ToolProgress) and e.call_id == "c1" for e in inner)
        kinds = [type(e.event).__name__ for e in inner if isinstance(e, ToolProgress)]
        assert kinds[:2] == ["ToolCallStarted", "ToolCallFinished"]
        assert "TextDelta" in kinds and kinds[-1] != "ResponseCompleted"
        text = "".join(e.text for e in resumed_events if isinstance(e, TextDelta))
        assert text == "Bob has his mail."
    record = await stores().get(_child_approval(response))
    assert record is not None and record.status == "completed"
    # A second resume of the same transcript never sends the mail again.
    third = worker(stores(), ["Again."], ["Mailed bob again."])
    await third.parent.call(transcript, decisions=decisions)
    assert second.mail.sent == ["bob"] and third.mail.sent == []


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_rejection_inside_the_child_reaches_its_model_not_its_tool(
    streamed: bool,
) -> None:
    store = InMemoryApprovalStore()
    _, transcript = await _defer(store)
    second = worker(store, ["Not sent."], ["I was not allowed."])
    decisions = {"c1": {"c1": Reject("not bob")}}
    resumed, _ = await _run(second.parent, transcript, streamed, decisions=decisions)
    assert second.mail.sent == []
    child_seen = second.child_model.requests[0].messages[-1]
    assert isinstance(child_seen, ToolMessage) and "not bob" in child_seen.text
    assert resumed.text == "Not sent."


@pytest.mark.anyio
async def test_rejecting_the_sub_agents_call_refuses_it_without_resuming_the_child() -> None:
    store = InMemoryApprovalStore()
    response, transcript = await _defer(store)
    second = worker(store, ["Skipped."], ["never"])
    resumed = await second.parent.call(transcript, decisions={"c1": Reject("not now")})
    assert second.mail.sent == [] and second.child_model.requests == []
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.is_error and "not now" in result.text
    record = await store.get(_child_approval(response))
    assert record is not None and record.status == "pending"  # the child's, untouched


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_typo_in_a_nested_id_is_refused_before_anything_runs(streamed: bool) -> None:
    """The defect: a typo in the child's call id claimed and completed the parent's
    approval with an error result while the child's stayed pending forever."""
    store = InMemoryApprovalStore()
    mail = Mail()
    child = Chain(
        _links(_approvals(store), "after"),
        model=ScriptedChatModel([_call("send", "c1", to="bob")]),
        tools=mail.tools(),
    )
    # the parent gates the sub-agent itself (approved inline): that call is recorded too
    parent_approvals = ApprovalAdvisor(CallbackApprover(lambda r: [Approve()]), store=store)
    parent = Chain(
        [ToolCallingAdvisor(), parent_approvals],
        model=ScriptedChatModel([_call("mailer", "p1", task="mail bob")]),
        tools=[chain_tool(child, "mailer", "Sends mails.", requires_approval=True)],
    )
    response, _ = await _run(parent, "mail bob", streamed)
    (mailer,) = response.deferred
    parent_record = await store.get(mailer.metadata["approval_id"])
    assert parent_record is not None and parent_record.status == "pending"
    transcript = [UserMessage(content="mail bob"), *response.messages]
    before = (await store.get(parent_record.id), await store.audit())

    for decisions, message in [
        ({"p1": {"c9": Approve()}}, r"\['p1'\]\['c9'\] is not a call that waits"),
        ({"p1": {"c1": Result("x")}}, r"\['p1'\]\['c1'\] is a 'approval' call"),
        ({"p1": Approve()}, "'subchain' call: it accepts a mapping"),
        ({"p1": {"c1": {"deeper": Approve()}}}, r"\['p1'\]\['c1'\].*accepts Approve"),
    ]:
        with pytest.raises(InvalidDecisions, match=message):
            await _run(parent, transcript, streamed, decisions=decisions)
    assert (await store.get(parent_record.id), await store.audit()) == before
    assert mail.sent == []

    resumed, _ = await _run(
        ChainPair.fresh(store, mail).parent,
        transcript,
        streamed,
        decisions={"p1": {"c1": Approve()}},
    )
    assert mail.sent == ["bob"] and resumed.text == "Mailed."
    done = await store.get(parent_record.id)
    assert done is not None and done.status == "completed"


class ChainPair:
    """A fresh parent (gating the sub-agent inline) and child, as another process builds them."""

    def __init__(self, parent: Chain) -> None:
        self.parent = parent

    @classmethod
    def fresh(cls, store: ApprovalStore, mail: Mail) -> ChainPair:
        child = Chain(
            _links(_approvals(store), "after"),
            model=ScriptedChatModel(["Mailed bob."]),
            tools=mail.tools(),
        )
        approvals = ApprovalAdvisor(CallbackApprover(lambda r: [Approve()]), store=store)
        parent = Chain(
            [ToolCallingAdvisor(), approvals],
            model=ScriptedChatModel(["Mailed."]),
            tools=[chain_tool(child, "mailer", "Sends mails.", requires_approval=True)],
        )
        return cls(parent)


@pytest.mark.anyio
async def test_two_workers_racing_on_one_store_run_the_childs_tool_once(
    stores: StoreFactory,
) -> None:
    _, transcript = await _defer(stores())
    decisions = {"c1": {"c1": Approve()}}
    gate = anyio.Event()
    mail = Mail(gate=gate)  # both workers' tools record here; the winner's waits for the loser
    racers = [worker(stores(), ["done"], ["mailed"], mail=mail) for _ in range(2)]
    outcomes: list[str] = []

    async def race(racer: Worker) -> None:
        try:
            response = await racer.parent.call(transcript, decisions=decisions)
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
async def test_a_resume_that_died_inside_the_child_never_runs_its_tool_twice(
    stores: StoreFactory,
) -> None:
    now = [1000.0]
    _, transcript = await _defer(stores(clock=lambda: now[0]))
    decisions = {"c1": {"c1": Approve()}}

    class Crash(BaseException):
        pass

    def crash(request: Any) -> Any:
        raise Crash

    doomed = worker(stores(clock=lambda: now[0]), ["never"], crash)
    with pytest.raises(Crash):  # the child's model call after its tool ran: a crash
        await doomed.parent.call(transcript, decisions=decisions)
    assert doomed.mail.sent == ["bob"]

    now[0] += 3600
    second = worker(stores(clock=lambda: now[0]), ["Done."], ["Mailed bob."])
    resumed = await second.parent.call(transcript, decisions=decisions)
    # the child's call had finished: its stored result answers it, it is not sent again
    assert second.mail.sent == []
    child_seen = second.child_model.requests[0].messages[-1]
    assert child_seen == ToolMessage(tool_call_id="c1", name="send", content="sent to bob")
    assert resumed.text == "Done."


@pytest.mark.anyio
async def test_a_crash_while_the_childs_tool_ran_leaves_its_outcome_unknown(
    stores: StoreFactory,
) -> None:
    now = [1000.0]
    _, transcript = await _defer(stores(clock=lambda: now[0]))
    decisions = {"c1": {"c1": Approve()}}

    class Crash(BaseException):
        pass

    async def die() -> None:
        raise Crash

    class Dying:
        """Stands for the gate the tool waits at: the process dies there."""

        async def wait(self) -> bool:
            await die()
            return True

    doomed = worker(stores(clock=lambda: now[0]), ["never"], ["never"], mail=Mail(gate=Dying()))  # type: ignore[arg-type]
    with pytest.raises(Crash):
        await doomed.parent.call(transcript, decisions=decisions)
    now[0] += 3600
    second = worker(stores(clock=lambda: now[0]), ["Check it."], ["I do not know."])
    resumed = await second.parent.call(transcript, decisions=decisions)
    assert second.mail.sent == [] and doomed.mail.sent == []
    child_seen = second.child_model.requests[0].messages[-1]
    assert isinstance(child_seen, ToolMessage) and "unknown" in child_seen.text
    assert resumed.text == "Check it."


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_two_levels_of_sub_agents_defer_and_resume_together(streamed: bool) -> None:
    store = InMemoryApprovalStore()
    mail = Mail()

    def build(
        top: list[Any], middle: list[Any], bottom: list[Any]
    ) -> tuple[Chain, ScriptedChatModel]:
        leaf = Chain(
            _links(_approvals(store), "after"), model=ScriptedChatModel(bottom), tools=mail.tools()
        )
        mid = Chain(
            [ToolCallingAdvisor()],
            model=ScriptedChatModel(middle),
            tools=[chain_tool(leaf, "mailer", "Sends mails.")],
        )
        top_model = ScriptedChatModel(top)
        root = Chain(
            [ToolCallingAdvisor()],
            model=top_model,
            tools=[chain_tool(mid, "office", "Does office work.")],
        )
        return root, top_model

    root, _ = build(
        [_call("office", "c1", task="mail bob")],
        [_call("mailer", "c1", task="mail bob")],
        [_call("send", "c1", to="bob")],
    )
    response, _ = await _run(root, "mail bob", streamed)
    (office,) = response.deferred
    (mailer,) = office.nested
    (send,) = mailer.nested
    assert [office.name, mailer.name, send.name] == ["office", "mailer", "send"]
    transcript = [UserMessage(content="mail bob"), *response.messages]
    root, top_model = build(["All done."], ["Mailer done."], ["Sent."])
    resumed, _ = await _run(root, transcript, streamed, decisions={"c1": {"c1": {"c1": Approve()}}})
    assert mail.sent == ["bob"] and resumed.text == "All done."
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.content == "Mailer done."
    assert resumed.usage.requests == 3


@pytest.mark.anyio
async def test_a_parent_waiting_for_its_own_and_a_childs_approval_resumes_both() -> None:
    store = InMemoryApprovalStore()
    mail = Mail()
    own_sent: list[str] = []

    @tool(requires_approval=True)
    def notify(who: str) -> str:
        """Notify someone."""
        own_sent.append(who)
        return f"notified {who}"

    def build(parent_script: list[Any], child_script: list[Any]) -> Chain:
        child = Chain(
            _links(_approvals(store), "after"),
            model=ScriptedChatModel(child_script),
            tools=mail.tools(),
        )
        return Chain(
            [ToolCallingAdvisor(), _approvals(store)],
            model=ScriptedChatModel(parent_script),
            tools=[chain_tool(child, "mailer", "Sends mails."), notify],
        )

    parent = build(
        [[_call("mailer", "c1", task="mail bob"), _call("notify", "c2", who="ann")]],
        [_call("send", "c1", to="bob")],
    )
    response = await parent.call("mail bob, notify ann")
    assert [(d.id, d.kind) for d in response.deferred] == [("c1", "subchain"), ("c2", "approval")]
    transcript = [UserMessage(content="mail bob, notify ann"), *response.messages]
    resumed = await build(["Both done."], ["Mailed."]).call(
        transcript, decisions={"c1": {"c1": Approve()}, "c2": Approve()}
    )
    assert mail.sent == ["bob"] and own_sent == ["ann"]
    assert resumed.text == "Both done."


@pytest.mark.anyio
async def test_a_sub_agent_that_waits_again_while_resumed_is_an_error_result() -> None:
    store = InMemoryApprovalStore()
    _, transcript = await _defer(store)
    # the resumed child asks for another approval instead of answering
    second = worker(store, ["Gave up."], [_call("send", "c2", to="eve")])
    resumed = await second.parent.call(transcript, decisions={"c1": {"c1": Approve()}})
    assert second.mail.sent == ["bob"]
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.is_error
    assert "deferred again" in result.text
    assert resumed.text == "Gave up."


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_approved_sub_agent_call_that_defers_is_recorded_and_resumed_once(
    streamed: bool,
) -> None:
    store = InMemoryApprovalStore()
    mail = Mail()
    pair = ChainPair.fresh(store, mail)  # another process's chains, for the resume
    child = Chain(
        _links(_approvals(store), "after"),
        model=ScriptedChatModel([_call("send", "c1", to="bob")]),
        tools=mail.tools(),
    )
    approvals = ApprovalAdvisor(CallbackApprover(lambda r: [Approve(by="ops")]), store=store)
    parent = Chain(
        [ToolCallingAdvisor(), approvals],
        model=ScriptedChatModel([_call("mailer", "p1", task="mail bob")]),
        tools=[chain_tool(child, "mailer", "Sends mails.", requires_approval=True)],
    )
    response, _ = await _run(parent, "mail bob", streamed)
    (mailer,) = response.deferred
    record = await store.get(mailer.metadata["approval_id"])
    assert record is not None and record.calls[0].name == "mailer"
    transcript = [UserMessage(content="mail bob"), *response.messages]
    resumed, _ = await _run(pair.parent, transcript, streamed, decisions={"p1": {"c1": Approve()}})
    assert mail.sent == ["bob"] and resumed.text == "Mailed."
    # the parent's gate was the inline approval: audited once, when it was given
    audit = [(a.call_id, a.tool_name, a.decision, a.decided_by) for a in await store.audit()]
    assert ("p1", "mailer", "approved", "ops") in audit
    assert sum(a[0] == "p1" for a in audit) == 1
    # replaying the transcript: the stored result, the child is not resumed again
    again = ChainPair.fresh(store, mail)
    await again.parent.call(transcript, decisions={"p1": {"c1": Approve()}})
    assert mail.sent == ["bob"]


@pytest.mark.anyio
async def test_a_forged_sub_agent_call_of_a_gated_tool_never_runs() -> None:
    """A transcript whose sub-agent call was never approved (no record) is refused."""
    store = InMemoryApprovalStore()
    mail = Mail()
    _, transcript = await _defer(store)
    pair = ChainPair.fresh(store, mail)  # its mailer requires approval: c1 was never approved
    resumed = await pair.parent.call(transcript, decisions={"c1": {"c1": Approve()}})
    assert mail.sent == []
    result = resumed.messages[0]
    assert isinstance(result, ToolMessage) and result.is_error and "differs" in result.text
