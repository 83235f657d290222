"""The generic core of deferral: a deferred call is data, a resume is an ordinary turn.

`ToolResult.defer(...)` answers a call that cannot finish now; the loop ends the turn with
`finish_reason="deferred"` and `response.deferred`; `response.messages` are the transcript
to resume from; `chain.call(transcript, decisions=...)` settles the waiting calls through
the `call_tool` hooks and goes on. Strict validation before anything runs.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChatModel,
    DeferredCall,
    InvalidDecisions,
    Message,
    Reject,
    Result,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolContext,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    UserMessage,
    dump_messages,
    load_messages,
    tool,
)
from advisorchain.advisors import Approve
from advisorchain.providers import ScriptedChatModel

from path_support import answer

PATHS = pytest.mark.parametrize("path", ["call", "stream"])


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


class Hold(Advisor):
    """Defers calls whose text is "hold" (kind "review"); records what it sees."""

    def __init__(self) -> None:
        self.rounds: list[tuple[str, ...]] = []
        self.settled: list[tuple[str, object, str | None]] = []

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        if invocation.decision is not None:
            deferred = invocation.deferred
            assert deferred is not None
            self.settled.append((invocation.call.id, invocation.decision, deferred.kind))
            return await next(invocation)
        self.rounds.append(tuple(c.id for c in invocation.round_calls))
        if invocation.arguments["text"] == "hold":
            return ToolResult.defer(
                "review", {"why": "needs a look"}, accepts=("approve", "reject")
            )
        return await next(invocation)


def calls() -> list[ToolCall]:
    return [
        ToolCall.from_arguments("echo", {"text": "a"}, id="c1"),
        ToolCall.from_arguments("echo", {"text": "hold"}, id="c2"),
        ToolCall(id="c3", name="echo", arguments="{broken"),
    ]


def held_chain(replies: list[Any], hold: Hold | None = None) -> tuple[Chain, ScriptedChatModel]:
    model = ScriptedChatModel(replies)
    return Chain([ToolCallingAdvisor(), hold or Hold()], model=model, tools=[echo]), model


@pytest.mark.anyio
@PATHS
async def test_a_deferred_result_ends_the_turn_with_its_calls_as_data(path: str) -> None:
    hold = Hold()
    chain, _ = held_chain([calls()], hold)
    response = await answer(path, chain, "go")
    assert response.finish_reason == "deferred"
    (waiting,) = response.deferred
    assert isinstance(waiting, DeferredCall)
    assert (waiting.id, waiting.name, waiting.kind) == ("c2", "echo", "review")
    assert dict(waiting.metadata) == {"why": "needs a look"}
    assert waiting.accepts == ("approve", "reject")
    asked, first, broken = response.messages
    assert isinstance(asked, AssistantMessage) and asked.tool_calls == tuple(calls())
    assert "advisorchain" in (asked.provider_data or {})  # the record of the waiting call
    assert isinstance(first, ToolMessage) and first.tool_call_id == "c1"
    assert isinstance(broken, ToolMessage) and broken.is_error
    assert response.message is asked and response.tool_calls == tuple(calls())
    assert hold.rounds == [("c1", "c2"), ("c1", "c2")]  # the runnable calls, each time


@pytest.mark.anyio
@PATHS
async def test_a_resume_is_an_ordinary_turn_from_the_transcript(path: str) -> None:
    hold = Hold()
    chain, _ = held_chain([calls()], hold)
    deferred = await chain.call("go")
    # what a caller stores and sends back: plain JSON, the record included
    transcript = load_messages(dump_messages([UserMessage(content="go"), *deferred.messages]))
    later, model = held_chain(["done"], hold)
    events: list[Any] = []
    if path == "call":
        resumed = await later.call(transcript, decisions={"c2": Approve()})
    else:
        events = [e async for e in later.stream(transcript, decisions={"c2": Approve()})]
        resumed = events[-1].response
        # a resumed stream reports the calls it settles first
        assert isinstance(events[0], ToolCallStarted) and events[0].call.id == "c2"
        assert isinstance(events[1], ToolCallFinished) and events[1].outcome == "ok"
    assert resumed.text == "done" and resumed.finish_reason == "stop"
    assert hold.settled == [("c2", Approve(), "review")]
    settled = resumed.messages[0]
    assert isinstance(settled, ToolMessage) and (settled.tool_call_id, settled.content) == (
        "c2",
        "hold",
    )
    (request,) = model.requests
    assert request.messages == (*transcript, settled)
    assert request.decisions is None  # never sent on


@tool
def start_job(report: str) -> ToolResult:
    """Start a long report job; its result arrives later."""
    started.append(report)
    return ToolResult.defer(
        "external",
        {"job": f"job-{report}"},
        content="The report is being made.",
        result_schema={
            "type": "object",
            "properties": {"pages": {"type": "integer"}},
            "required": ["pages"],
        },
    )


started: list[str] = []


@pytest.mark.anyio
@PATHS
async def test_a_tool_defers_to_external_work_resolved_later_with_a_result(path: str) -> None:
    started.clear()
    model = ScriptedChatModel(
        [ToolCall.from_arguments("start_job", {"report": "q3"}, id="j1"), "It has 12 pages."]
    )
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[start_job])
    deferred = await answer(path, chain, "make the q3 report")
    (job,) = deferred.deferred
    assert (job.kind, dict(job.metadata), job.accepts) == (
        "external",
        {"job": "job-q3"},
        ("result", "reject"),
    )
    transcript = [UserMessage(content="make the q3 report"), *deferred.messages]
    with pytest.raises(InvalidDecisions, match="pages"):
        await answer(path, chain, transcript, decisions={"j1": Result({"pages": "many"})})
    with pytest.raises(InvalidDecisions, match="accepts Result"):
        await answer(path, chain, transcript, decisions={"j1": Approve()})
    resumed = await answer(path, chain, transcript, decisions={"j1": Result({"pages": 12})})
    assert started == ["q3"]  # the tool is not run again: the result is the job's
    settled = resumed.messages[0]
    assert isinstance(settled, ToolMessage) and settled.content == '{"pages":12}'
    assert resumed.text == "It has 12 pages."


@pytest.mark.anyio
@PATHS
async def test_a_rejected_deferred_call_is_not_run(path: str) -> None:
    hold = Hold()
    chain, model = held_chain([calls(), "ok"], hold)
    deferred = await answer(path, chain, "go")
    transcript = [UserMessage(content="go"), *deferred.messages]
    resumed = await answer(path, chain, transcript, decisions={"c2": Reject("not now")})
    settled = resumed.messages[0]
    assert isinstance(settled, ToolMessage) and settled.is_error
    assert "not now" in str(settled.content)


@pytest.mark.anyio
@PATHS
async def test_decisions_are_checked_before_anything_runs(path: str) -> None:
    hold = Hold()
    chain, model = held_chain([calls()], hold)
    deferred = await answer(path, chain, "go")
    transcript = [UserMessage(content="go"), *deferred.messages]
    hold.rounds.clear()
    cases: list[tuple[Any, str]] = [
        ({"c9": Approve()}, "'c9' is not a call that waits"),
        ({"c1": Approve()}, "'c1' is not a call that waits"),
        ({"c2": Result(1)}, "'review' call: it accepts Approve"),
        ({"c2": "yes"}, "str is not a decision"),
        ({"c2": {"x": Approve()}}, "accepts Approve"),
        ({"c2": Approve(arguments=["a"])}, "is not a decision"),  # type: ignore[arg-type]
        ({}, "waiting for decisions"),
    ]
    for decisions, message in cases:
        with pytest.raises(InvalidDecisions, match=message):
            await answer(path, chain, transcript, decisions=decisions)
    with pytest.raises(InvalidDecisions, match="waiting for decisions"):
        await answer(path, chain, transcript)
    # every problem at once, in one error
    with pytest.raises(InvalidDecisions, match="'c9'.*; .*not a decision"):
        await answer(path, chain, transcript, decisions={"c9": Approve(), "c2": 3})
    assert hold.settled == [] and hold.rounds == [] and len(model.requests) == 1


@pytest.mark.anyio
@PATHS
async def test_a_nested_chain_never_takes_the_outer_decisions(path: str) -> None:
    inner_model = ScriptedChatModel([calls(), "inner answer"])
    inner = Chain([], model=inner_model)  # a chain as the model: its turn is its own
    assert isinstance(inner, ChatModel)
    outer = Chain([ToolCallingAdvisor(), Hold()], model=inner, tools=[echo])
    deferred = await answer(path, outer, "go")
    assert deferred.finish_reason == "deferred"
    transcript = [UserMessage(content="go"), *deferred.messages]
    resumed = await answer(path, outer, transcript, decisions={"c2": Approve()})
    assert resumed.text == "inner answer"
    assert all(r.decisions is None for r in inner_model.requests)


# -- the shape of the package (its import graph: test_import_graph.py) -------------------

PACKAGE = pathlib.Path(__file__).resolve().parents[1]


def test_no_core_module_names_approval() -> None:
    """Core has no approval machinery: no name and no string value of its code speaks of
    approval (the tools' own `requires_approval` flag is the tool author's declaration)."""
    import io
    import tokenize

    named: list[str] = []
    for path in (PACKAGE / "core").glob("*.py"):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        for token in tokens:
            text = token.string.lower()
            if token.type == tokenize.NAME and "approv" in text and text != "requires_approval":
                named.append(f"{path.name}: {token.string}")
            elif token.type == tokenize.STRING and text.strip("\"'") in (
                "approval",
                "approval_pending",
            ):
                named.append(f"{path.name}: {token.string}")
    # the decisions are core's own, generic ones
    assert named == [n for n in named if n.split(": ")[1] in ("Approve",)]


def test_no_core_module_knows_the_budget() -> None:
    """Budget limits live in `advisors/budget.py`: core only offers the generic model-call
    watchers (`core/watchers.py`) a budget, the tool loop's usage meter and compaction use;
    no core module, code, comment or docstring, speaks of a budget or of limits on model
    calls (`core/limits.py` is gone)."""
    assert not (PACKAGE / "core" / "limits.py").exists()
    named = [
        f"{path.name}:{number}"
        for path in (PACKAGE / "core").glob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "budget" in line.lower() or "enclosing_limit" in line.lower()
    ]
    assert named == []


def _unused(*_: Message | ToolContext) -> None:
    """(keeps the imports used for typing the helpers)"""
