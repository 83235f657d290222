"""The generic core behind deferral: `pending` results, `round_calls`, the `Suspension` on
the response and its handlers, `Chain.resume` through the typed `ChatRequest.resumption`."""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChatModel,
    ChatOptions,
    ChatRequest,
    Message,
    ResponseCompleted,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    UserMessage,
    advisor,
    tool,
)
from advisorchain.advisors import (
    ApprovalNotFound,
    PendingApproval,
    ResumedCall,
    Resumption,
    Suspension,
)
from advisorchain.core.manager import ToolPipeline
from advisorchain.providers import ScriptedChatModel

from path_support import answer


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
        self.pipelines: list[ToolPipeline] = []

    async def resume_turn(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        request: ChatRequest,
        tools: ToolPipeline,
    ) -> ChatRequest | None:
        self.pipelines.append(tools)
        if pending_id != self.known:
            return None
        resumed = request.appended(*decisions["messages"])
        return replace(resumed, resumption=Resumption(id=pending_id))


@pytest.mark.anyio
async def test_resume_asks_each_resumer_and_runs_the_whole_chain() -> None:
    model = ScriptedChatModel(["resumed"])
    chain = Chain([Resumer("a"), Resumer("b"), ToolCallingAdvisor()], model=model)
    response = await chain.resume("b", {"messages": [UserMessage(content="hi")]})
    assert response.text == "resumed"
    assert model.requests[0].messages == (UserMessage(content="hi"),)
    with pytest.raises(ApprovalNotFound, match="'c'"):
        await chain.resume("c", {})


@pytest.mark.anyio
async def test_a_resumer_gets_the_chain_tool_pipeline_not_its_advisors() -> None:
    resumer = Resumer("a")
    hook = HoldEverySecondCall()
    loop = ToolCallingAdvisor()
    chain = Chain([resumer, loop, hook], model=ScriptedChatModel(["ok"]))
    await chain.resume("a", {"messages": [UserMessage(content="hi")]})
    (pipeline,) = resumer.pipelines
    assert pipeline.manager is loop.manager
    assert pipeline.hooks == chain.tool_hooks
    assert [h.__self__ for h in pipeline.hooks] == [hook]  # type: ignore[attr-defined]


class NotARequest(Advisor):
    async def resume_turn(self, *args: Any) -> object:
        return "resumed"


@pytest.mark.anyio
async def test_a_resumer_must_return_a_request_with_its_resumption() -> None:
    chain = Chain([NotARequest(), ToolCallingAdvisor()], model=ScriptedChatModel(["ok"]))
    with pytest.raises(TypeError, match="resumption"):
        await chain.resume("a", {})


class SavesWhenHeld(HoldEverySecondCall):
    """Gives each call it holds a suspension handler; records what it is handed."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.suspended: list[Suspension] = []

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        result = await super().call_tool(invocation, next)
        if result.outcome == "pending":
            return replace(result, on_suspend=self.save)
        return result

    async def save(self, turn: Suspension) -> None:
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
    response = await answer(mode, chain, prompt, conversation_id="conv")
    (turn,) = hook.suspended
    assert turn is response.suspension  # the value the handlers saved is the response's
    assert turn.pending == response.pending_approval
    assert turn.id == turn.pending.id and turn.calls == turn.pending.calls
    assert [m.tool_call_id for m in turn.finished] == ["c1", "c3"]
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
    """A `TurnResumer` whose resume produced one tool result."""

    async def resume_turn(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        request: ChatRequest,
        tools: ToolPipeline,
    ) -> ChatRequest:
        call = ToolCall.from_arguments("echo", {"text": "hold"}, id="c2")
        result = ToolMessage(tool_call_id="c2", name="echo", content="held")
        transcript = (UserMessage(content="go"), AssistantMessage(tool_calls=(call,)), result)
        settled = ResumedCall(call=call, message=result, outcome="ok", duration=0.25)
        return replace(
            request.with_messages(transcript),
            resumption=Resumption(id=pending_id, calls=(settled,)),
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
    finished = events[1]
    assert isinstance(finished, ToolCallFinished) and finished.duration == 0.25
    assert sum(isinstance(e, ToolCallFinished) for e in events) == 1
    completed = events[-1]
    assert isinstance(completed, ResponseCompleted)
    assert [m.content for m in completed.response.messages] == ["held", "done"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_resumed_turn_is_marked_before_the_loop_and_not_inside_it(mode: str) -> None:
    outside: list[object] = []
    inside: list[object] = []

    async def before_loop(request: ChatRequest) -> ChatRequest:
        outside.append(request.resumption.id if request.resumption else None)
        return request

    async def in_loop(request: ChatRequest) -> ChatRequest:
        inside.append(request.resumption)
        return request

    chain = Chain(
        [advisor(before=before_loop), Reporter(), ToolCallingAdvisor(), advisor(before=in_loop)],
        model=ScriptedChatModel(["a", "b"]),
    )
    if mode == "call":
        await chain.call("new turn")
        await chain.resume("approval_1", {})
    else:
        [e async for e in chain.stream("new turn")]
        [e async for e in chain.resume_stream("approval_1", {})]
    assert outside == [None, "approval_1"]
    assert inside == [None, None]  # the loop takes it: nothing inside it sees it again


@pytest.mark.anyio
async def test_a_nested_chain_never_takes_the_outer_resumption() -> None:
    inner = Chain([ToolCallingAdvisor()], model=ScriptedChatModel(["inner answer"]))
    assert isinstance(inner, ChatModel)
    outer = Chain([Reporter()], model=inner)  # no loop of its own
    response = await outer.resume("a", {})
    assert [m.text for m in response.messages] == ["held", "inner answer"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_pending_result_can_carry_a_nested_suspension(mode: str) -> None:
    inner = Suspension(
        pending=PendingApproval(id="approval_inner", calls=()),
        request=ChatRequest(messages=(UserMessage(content="sub-task"),)),
        messages=(),
    )

    class SubAgent(Advisor):
        async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
            if invocation.arguments["text"] == "hold":
                return ToolResult(content="waiting", outcome="pending", suspension=inner)
            return await next(invocation)

    chain = Chain(
        [ToolCallingAdvisor(), SubAgent()], model=ScriptedChatModel([calls()]), tools=[echo]
    )
    response = await answer(mode, chain, "go")
    assert response.suspension is not None
    assert response.suspension.inner == (("c2", inner),)


@pytest.mark.anyio
async def test_one_handler_is_awaited_once_per_turn() -> None:
    saved: list[Suspension] = []

    async def save(turn: Suspension) -> None:
        saved.append(turn)

    class HoldAll(Advisor):
        async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
            return ToolResult(content="waiting", outcome="pending", on_suspend=save)

    two = [
        ToolCall.from_arguments("echo", {"text": "a"}, id="c1"),
        ToolCall.from_arguments("echo", {"text": "b"}, id="c2"),
    ]
    chain = Chain([ToolCallingAdvisor(), HoldAll()], model=ScriptedChatModel([two]), tools=[echo])
    response = await chain.call("go")
    assert saved == [response.suspension]
    assert response.pending_approval is not None
    assert [c.id for c in response.pending_approval.calls] == ["c1", "c2"]


PACKAGE = pathlib.Path(__file__).resolve().parents[1]


def _imports(module: pathlib.Path) -> set[str]:
    """The sibling modules `module` imports, TYPE_CHECKING imports included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(a.name for a in node.names)
    return names


@pytest.mark.parametrize("folder", ["core", "advisors/approval"])
def test_no_import_cycles(folder: str) -> None:
    modules = {p.stem: p for p in (PACKAGE / folder).glob("*.py") if p.stem != "__init__"}
    graph = {name: _imports(path) & set(modules) for name, path in modules.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph[start]:
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert [name for name in graph if reaches(name, name, {name})] == []
