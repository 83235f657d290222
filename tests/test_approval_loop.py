"""The generic core behind deferral: `pending` results, `round_calls`, suspension handlers,
`Chain.resume`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChatOptions,
    ChatRequest,
    Message,
    ResponseCompleted,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    UserMessage,
    advisor,
    tool,
)
from advisorchain.advisors import ApprovalNotFound
from advisorchain.core.suspension import RESUMED, ResumedTurn, SuspendedTurn, on_suspend
from advisorchain.providers import ScriptedChatModel


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


class HoldEverySecondCall(Advisor):
    """Answers `pending` for calls whose text is "hold"; records each call's round."""

    def __init__(self) -> None:
        self.rounds: list[tuple[str, ...]] = []

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        self.rounds.append(tuple(c.id for c in invocation.round_calls))
        if invocation.arguments["text"] == "hold":
            return ToolResult(content="waiting", outcome="pending")
        return await next(invocation)


def calls() -> list[ToolCall]:
    return [
        ToolCall.from_arguments("echo", {"text": "a"}, id="c1"),
        ToolCall.from_arguments("echo", {"text": "hold"}, id="c2"),
        ToolCall(id="c3", name="echo", arguments="{broken"),
    ]


@pytest.mark.anyio
async def test_a_pending_result_ends_the_turn_as_approval_pending() -> None:
    hook = HoldEverySecondCall()
    model = ScriptedChatModel([calls(), "never"])
    chain = Chain([hook, ToolCallingAdvisor()], model=model, tools=[echo])
    response = await chain.call("go")
    assert response.finish_reason == "approval_pending"
    assert response.pending_approval is not None
    assert response.pending_approval.id.startswith("approval_")
    assert [c.id for c in response.pending_approval.calls] == ["c2"]
    assert response.message.tool_calls == tuple(calls())
    finished = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in finished] == ["c1", "c3"]  # the waiting call has none
    assert len(model.requests) == 1
    # the invalid call never reaches the hooks, so it is not part of the round they see
    assert sorted(hook.rounds) == [("c1", "c2"), ("c1", "c2")]


@pytest.mark.anyio
async def test_stream_reports_no_finish_for_a_waiting_call() -> None:
    chain = Chain(
        [HoldEverySecondCall(), ToolCallingAdvisor()],
        model=ScriptedChatModel([calls()]),
        tools=[echo],
    )
    events = [e async for e in chain.stream("go")]
    names = [type(e).__name__ for e in events]
    assert names.count("ToolCallStarted") == 3 and names.count("ToolCallFinished") == 2
    assert events[-1].response.finish_reason == "approval_pending"  # type: ignore[union-attr]


class Resumer(Advisor):
    """A `TurnResumer` that knows one id."""

    def __init__(self, known: str) -> None:
        self.known = known

    async def resume_turn(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        request: ChatRequest,
        advisors: Sequence[Advisor],
    ) -> ResumedTurn | None:
        if pending_id != self.known:
            return None
        return ResumedTurn(request=request.appended(*decisions["messages"]))


@pytest.mark.anyio
async def test_resume_asks_each_resumer_and_runs_the_whole_chain() -> None:
    model = ScriptedChatModel(["resumed"])
    chain = Chain([Resumer("a"), Resumer("b"), ToolCallingAdvisor()], model=model)
    response = await chain.resume("b", {"messages": [UserMessage(content="hi")]})
    assert response.text == "resumed"
    assert model.requests[0].messages == (UserMessage(content="hi"),)
    with pytest.raises(ApprovalNotFound, match="'c'"):
        await chain.resume("c", {})


class SavesWhenHeld(HoldEverySecondCall):
    """Registers a suspension handler for each call it holds; records what it is handed."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.suspended: list[SuspendedTurn] = []

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        result = await super().call_tool(invocation, next)
        if result.outcome == "pending":
            on_suspend(invocation.request.context, self.save)
        return result

    async def save(self, turn: SuspendedTurn) -> None:
        if self.fail:
            raise OSError("disk full")
        self.suspended.append(turn)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_the_loop_hands_a_suspended_turn_to_the_handlers_before_it_returns(
    mode: str,
) -> None:
    hook = SavesWhenHeld()
    history: list[Message] = [UserMessage(content="earlier"), AssistantMessage(content="ok")]
    chain = Chain(
        [ToolCallingAdvisor(), hook],
        model=ScriptedChatModel(["first", calls()]),
        tools=[echo],
        options=ChatOptions(temperature=0.5),
    )
    await chain.call("hello")  # a round without a held call: no handler, nothing handed over
    assert hook.suspended == []
    prompt: list[Message] = [*history, UserMessage(content="go")]
    if mode == "call":
        response = await chain.call(prompt, conversation_id="conv")
    else:
        events = [e async for e in chain.stream(prompt, conversation_id="conv")]
        completed = events[-1]
        assert isinstance(completed, ResponseCompleted)
        response = completed.response
    (turn,) = hook.suspended
    assert turn.pending == response.pending_approval
    assert turn.request.messages == tuple(prompt)
    assert turn.request.conversation_id == "conv" and turn.request.options.temperature == 0.5
    assert [t.name for t in turn.request.tools] == ["echo"]
    assert turn.messages == response.messages
    assert turn.transcript == (*prompt, *response.messages)


@pytest.mark.anyio
async def test_a_failing_suspension_handler_fails_the_turn() -> None:
    chain = Chain(
        [SavesWhenHeld(fail=True), ToolCallingAdvisor()],
        model=ScriptedChatModel([calls()]),
        tools=[echo],
    )
    with pytest.raises(OSError, match="disk full"):
        await chain.call("go")


class Reporter(Advisor):
    """A `TurnResumer` whose resume produced one tool result (and its stream events)."""

    async def resume_turn(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        request: ChatRequest,
        advisors: Sequence[Advisor],
    ) -> ResumedTurn:
        call = ToolCall.from_arguments("echo", {"text": "hold"}, id="c2")
        result = ToolMessage(tool_call_id="c2", name="echo", content="held")
        transcript = (UserMessage(content="go"), AssistantMessage(tool_calls=(call,)), result)
        return ResumedTurn(
            request=request.with_messages(transcript),
            messages=(result,),
            events=(ToolCallStarted(call), ToolCallFinished(call, result, "ok", 0.0)),
        )


@pytest.mark.anyio
@pytest.mark.parametrize("loop", [True, False])
async def test_a_resumed_turn_starts_with_the_resumed_results_once(loop: bool) -> None:
    links: list[Advisor] = [Reporter(), ToolCallingAdvisor()] if loop else [Reporter()]
    chain = Chain(links, model=ScriptedChatModel(["done", "done"]))
    response = await chain.resume("a", {})
    assert [m.content for m in response.messages] == ["held", "done"]
    events = [e async for e in chain.resume_stream("a", {})]
    assert [type(e).__name__ for e in events[:2]] == ["ToolCallStarted", "ToolCallFinished"]
    assert sum(isinstance(e, ToolCallFinished) for e in events) == 1
    completed = events[-1]
    assert isinstance(completed, ResponseCompleted)
    assert [m.content for m in completed.response.messages] == ["held", "done"]


@pytest.mark.anyio
async def test_a_resumed_turn_is_marked_for_every_link() -> None:
    seen: list[object] = []

    async def outer(request: ChatRequest) -> ChatRequest:
        seen.append(request.context.get(RESUMED))
        return request

    chain = Chain(
        [advisor(before=outer), Reporter(), ToolCallingAdvisor()],
        model=ScriptedChatModel(["a", "b"]),
    )
    await chain.call("new turn")
    await chain.resume("approval_1", {})
    assert seen == [None, "approval_1"]
    assert RESUMED == "advisorchain.resumed"
