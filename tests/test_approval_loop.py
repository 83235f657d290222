"""The generic core behind deferral: `pending` results, `round_calls`, `Chain.resume`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from advisorchain import (
    Advisor,
    ApprovalNotFound,
    Chain,
    ChatRequest,
    ToolCall,
    ToolCallingAdvisor,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    tool,
)
from advisorchain.core.suspension import ResumedTurn
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
    from advisorchain import UserMessage

    model = ScriptedChatModel(["resumed"])
    chain = Chain([Resumer("a"), Resumer("b"), ToolCallingAdvisor()], model=model)
    response = await chain.resume("b", {"messages": [UserMessage(content="hi")]})
    assert response.text == "resumed"
    assert model.requests[0].messages == (UserMessage(content="hi"),)
    with pytest.raises(ApprovalNotFound, match="'c'"):
        await chain.resume("c", {})
