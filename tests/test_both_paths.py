"""Every advisor the library ships works on both paths: `call` and `stream` give one transcript."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from advisorchain import (
    Advisor,
    ApprovalAdvisor,
    Approve,
    AssistantMessage,
    Chain,
    ChatResponse,
    LoggingAdvisor,
    MemoryAdvisor,
    Message,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolSearchAdvisor,
    TracingAdvisor,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalRequest,
    CallbackApprover,
    DeferredApprover,
    InMemoryApprovalStore,
    InMemoryChatMemoryStore,
    StructuredOutputAdvisor,
)
from advisorchain.providers import ScriptedChatModel


@tool(requires_approval=True)
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


def approve_all(request: ApprovalRequest) -> dict[str, Any]:
    return {c.call_id: Approve() for c in request.calls}


def script() -> list[Any]:
    return [
        ToolCall.from_arguments("echo", {"text": "one"}, id="c1"),
        [
            ToolCall.from_arguments("echo", {"text": "two"}, id="c2"),
            ToolCall.from_arguments("echo", {"text": "three"}, id="c3"),
        ],
        "All echoed: one, two, three.",
    ]


def search_script() -> list[Any]:
    return [
        ToolCall.from_arguments("search_tools", {"query": "echo text"}, id="s1"),
        ToolCall.from_arguments("echo", {"text": "one"}, id="c1"),
        "Echoed one.",
    ]


def structured_script() -> list[Any]:
    return [*script()[:2], '{"items": ["one", "two", "three"]}']


@dataclass
class Case:
    """A chain of shipped advisors, built fresh for each path."""

    links: Callable[[], list[Advisor]]
    script: Callable[[], list[Any]] = script
    conversation_id: str | None = None


def memory() -> list[Advisor]:
    return [MemoryAdvisor(InMemoryChatMemoryStore()), ToolCallingAdvisor()]


CASES = {
    "tool loop": Case(lambda: [ToolCallingAdvisor()]),
    "logging outside": Case(lambda: [LoggingAdvisor(include_content=True), ToolCallingAdvisor()]),
    "logging inside": Case(lambda: [ToolCallingAdvisor(), LoggingAdvisor(include_content=True)]),
    "tracing outside": Case(lambda: [TracingAdvisor(capture_content=True), ToolCallingAdvisor()]),
    "tracing inside": Case(lambda: [ToolCallingAdvisor(), TracingAdvisor()]),
    "memory": Case(memory, conversation_id="conv-1"),
    "approval outside": Case(
        lambda: [ApprovalAdvisor(CallbackApprover(approve_all)), ToolCallingAdvisor()]
    ),
    "approval inside": Case(
        lambda: [ToolCallingAdvisor(), ApprovalAdvisor(CallbackApprover(approve_all))]
    ),
    "tool search": Case(
        lambda: [ToolCallingAdvisor(), ToolSearchAdvisor(min_tools=0)], script=search_script
    ),
    "structured output": Case(
        lambda: [StructuredOutputAdvisor(list[str]), ToolCallingAdvisor()],
        script=structured_script,
    ),
    "all together": Case(
        lambda: [
            LoggingAdvisor(),
            TracingAdvisor(),
            MemoryAdvisor(InMemoryChatMemoryStore()),
            ToolCallingAdvisor(),
            ApprovalAdvisor(CallbackApprover(approve_all)),
            ToolSearchAdvisor(min_tools=0),
        ],
        script=search_script,
        conversation_id="conv-1",
    ),
}


def model_transcripts(model: ScriptedChatModel) -> list[tuple[tuple[Message, ...], list[str]]]:
    return [(r.messages, [t.name for t in r.tools]) for r in model.requests]


async def run_call(case: Case) -> tuple[ChatResponse, ScriptedChatModel, str]:
    model = ScriptedChatModel(case.script())
    chain = Chain(case.links(), model=model, tools=[echo])
    response = await chain.call("Echo one, two, three.", conversation_id=case.conversation_id)
    return response, model, response.text


async def run_stream(case: Case) -> tuple[ChatResponse, ScriptedChatModel, str]:
    model = ScriptedChatModel(case.script())
    chain = Chain(case.links(), model=model, tools=[echo])
    events = [
        e async for e in chain.stream("Echo one, two, three.", conversation_id=case.conversation_id)
    ]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return final.response, model, text


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(CASES))
async def test_call_and_stream_give_the_same_transcript(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    case = CASES[name]
    with caplog.at_level(logging.INFO, logger="advisorchain"):
        called, call_model, call_text = await run_call(case)
        streamed, stream_model, stream_text = await run_stream(case)
    assert called.finish_reason == streamed.finish_reason == "stop"
    assert called.messages == streamed.messages
    assert called.text == streamed.text == stream_text == call_text
    assert called.usage.requests == streamed.usage.requests == 3
    assert model_transcripts(call_model) == model_transcripts(stream_model)
    assert len(called.messages) >= 5


@pytest.mark.anyio
@pytest.mark.parametrize("inside", [False, True])
async def test_a_deferred_approval_defers_and_resumes_alike_on_both_paths(inside: bool) -> None:
    def links(store: InMemoryApprovalStore) -> list[Advisor]:
        approval = ApprovalAdvisor(DeferredApprover(), store=store)
        return [ToolCallingAdvisor(), approval] if inside else [approval, ToolCallingAdvisor()]

    results = []
    for path in ("call", "stream"):
        store = InMemoryApprovalStore()
        model = ScriptedChatModel(script())
        chain = Chain(links(store), model=model, tools=[echo])
        if path == "call":
            pending = await chain.call("Echo one, two, three.")
        else:
            events = [e async for e in chain.stream("Echo one, two, three.")]
            final = events[-1]
            assert isinstance(final, ResponseCompleted)
            pending = final.response
        assert pending.finish_reason == "deferred"
        ids = [d.id for d in pending.deferred]
        decisions = {i: Approve() for i in ids}
        transcript = [UserMessage(content="Echo one, two, three."), *pending.messages]
        if path == "call":
            resumed = await chain.call(transcript, decisions=decisions)
        else:
            events = [e async for e in chain.stream(transcript, decisions=decisions)]
            final = events[-1]
            assert isinstance(final, ResponseCompleted)
            resumed = final.response
        transcripts = [(plain(m), tools) for m, tools in model_transcripts(model)]
        results.append((plain(pending.messages), ids, resumed.finish_reason, transcripts))
    assert results[0][1:] == results[1][1:]
    assert results[0][0] == results[1][0]


def plain(messages: Sequence[Message]) -> tuple[Message, ...]:
    """`messages` without the deferral records (each run's approval ids are its own)."""
    return tuple(
        m.model_copy(update={"provider_data": None}) if isinstance(m, AssistantMessage) else m
        for m in messages
    )
