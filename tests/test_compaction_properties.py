"""Property tests: whatever the history and the trigger, every request that leaves the
chain is valid under the four wire formats' rules, and no waiting call is lost."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_rules import wire_errors

from advisorchain import Chain, ToolCallingAdvisor, chain_tool, tool
from advisorchain.advisors import (
    ApprovalAdvisor,
    Approve,
    DeferredApprover,
    InMemoryApprovalStore,
    InMemoryChatMemoryStore,
    MemoryAdvisor,
    Reject,
)
from advisorchain.advisors.compaction import (
    ClearToolResults,
    CompactionAdvisor,
    Keep,
    Trigger,
    repair,
    waiting_calls,
)
from advisorchain.core.events import ResponseCompleted
from advisorchain.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from advisorchain.core.parts import ImagePart, ReasoningPart, TextPart
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse
from advisorchain.core.usage import Usage
from advisorchain.providers import ScriptedChatModel

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(24))
NAMES = ("lookup", "helper", "search_tools")


@st.composite
def histories(draw: st.DrawFn, *, waiting_tail: bool = True) -> list[Message]:
    """A conversation: turns of a user message, rounds of parallel calls (with reasoning,
    images in results, sub-chain calls), answers; maybe a waiting tail; maybe a bad row."""
    ids = itertools.count()
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(SystemMessage(content="You help."))
    turns = draw(st.integers(1, 8))
    for turn in range(turns):
        if draw(st.booleans()):
            messages.append(
                UserMessage(content=(TextPart(text=f"look {turn}"), ImagePart(data=PNG)))
            )
        else:
            messages.append(UserMessage(content=f"fact {turn} " + "w " * draw(st.integers(0, 80))))
        for _ in range(draw(st.integers(0, 3))):
            calls = tuple(
                ToolCall(id=f"c{next(ids)}", name=draw(st.sampled_from(NAMES)), arguments="{}")
                for _ in range(draw(st.integers(1, 3)))
            )
            thinking = draw(st.booleans())
            content = (
                (ReasoningPart(text="hmm", signature="sig", provider="anthropic"),)
                if thinking
                else None
            )
            messages.append(AssistantMessage(content=content, tool_calls=calls))
            for call in draw(st.permutations(calls)):
                if draw(st.integers(0, 4)) == 0:
                    result: Any = (TextPart(text="see"), ImagePart(data=PNG))
                else:
                    result = "r " * draw(st.integers(1, 120))
                messages.append(ToolMessage(tool_call_id=call.id, name=call.name, content=result))
        if turn < turns - 1 or draw(st.booleans()):
            messages.append(AssistantMessage(content=f"answer {turn}"))
    if waiting_tail and draw(st.booleans()):
        calls = tuple(
            ToolCall(id=f"w{next(ids)}", name="helper", arguments="{}")
            for _ in range(draw(st.integers(1, 3)))
        )
        if not isinstance(messages[-1], UserMessage) and not isinstance(messages[-1], ToolMessage):
            messages.append(UserMessage(content="one more"))
        messages.append(AssistantMessage(tool_calls=calls))
        finished = draw(st.integers(0, len(calls) - 1))
        for call in calls[:finished]:
            messages.append(ToolMessage(tool_call_id=call.id, name=call.name, content="done"))
    if draw(st.integers(0, 3)) == 0:  # a bad row: a lost result, or a stray one
        results = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        drop: bool = draw(st.booleans())
        if results and drop:
            del messages[draw(st.sampled_from(results))]
        else:
            users = [i for i, m in enumerate(messages) if isinstance(m, UserMessage)]
            at = draw(st.sampled_from(users)) + 1
            messages.insert(at, ToolMessage(tool_call_id="stray", name="lookup", content="?"))
    return messages


triggers = st.one_of(
    st.builds(Trigger, messages=st.integers(2, 30)),
    st.builds(Trigger, tokens=st.integers(1, 3000)),
    st.builds(Trigger, fraction=st.floats(0.05, 1.0), context_window=st.integers(100, 5000)),
)
keeps = st.one_of(
    st.builds(Keep, turns=st.integers(1, 4)), st.builds(Keep, tokens=st.integers(1, 2000))
)
clearings = st.one_of(
    st.none(),
    st.builds(
        ClearToolResults,
        trigger_tokens=st.integers(1, 2000),
        keep=st.integers(0, 3),
        clear_at_least=st.integers(0, 500),
    ),
)


def summarizer() -> ScriptedChatModel:
    return ScriptedChatModel(
        lambda r: ChatResponse(
            message=AssistantMessage(content=f"summary of {len(r.messages[-1].text)} chars"),
            usage=Usage(input_tokens=50, output_tokens=5, requests=1),
        ),
        model_name="summarizer",
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), triggers, keeps, clearings)
def test_every_view_is_valid_and_keeps_waiting_calls(
    history: list[Message], trigger: Trigger, keep: Keep, clearing: ClearToolResults | None
) -> None:
    waiting = waiting_calls([m for m in history if not isinstance(m, SystemMessage)])
    repaired = repair([m for m in history if not isinstance(m, SystemMessage)])
    assert not wire_errors(repaired, waiting=bool(waiting))  # the generator's own check
    advisor = CompactionAdvisor(
        summarizer(), trigger=trigger, keep=keep, clear_tool_results=clearing
    )

    async def views() -> list[tuple[Message, ...]]:
        sent = []
        for _ in range(2):  # the second request reuses the boundary of the first
            view, _, _ = await advisor.view(ChatRequest(messages=tuple(history)))
            sent.append(view.messages)
        return sent

    for messages in anyio.run(views):
        transcript = [m for m in messages if not isinstance(m, SystemMessage)]
        assert not wire_errors(transcript, waiting=bool(waiting)), transcript
        if waiting:
            last = [m for m in transcript if isinstance(m, AssistantMessage)][-1]
            assert {c.id for c in last.tool_calls} >= set(waiting)
            group = repaired[
                -(
                    len(repaired) - max(i for i, m in enumerate(repaired) if m is last or m == last)
                ) :
            ]
            assert transcript[-len(group) :] == list(group)
        # what is kept verbatim is the end of the repaired transcript
        kept = [
            m
            for m in transcript
            if not (isinstance(m, ToolMessage) and clearing and m.text == clearing.placeholder)
        ]
        assert all(
            m in repaired or m.text.startswith("[Summary") or m.text.startswith("Understood")
            for m in kept
        )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(waiting_tail=False), triggers, keeps, clearings, st.booleans())
def test_every_request_leaving_the_chain_is_valid(
    history: list[Message],
    trigger: Trigger,
    keep: Keep,
    clearing: ClearToolResults | None,
    streaming: bool,
) -> None:
    """Through a chain with a tool loop (parallel calls, a sub-chain tool), on both paths:
    every request a model receives passes the four validators."""
    errors: list[Any] = []

    def checked(script: Any) -> Any:
        def answer(request: ChatRequest) -> Any:
            found = wire_errors([m for m in request.messages if not isinstance(m, SystemMessage)])
            if found:
                errors.append((found, request.messages))
            return script(request)

        return answer

    calls = itertools.count()

    def parent(request: ChatRequest) -> Any:
        rounds = next(calls)  # the view may have summarized the turn's start away
        if rounds < 2:
            return [
                ToolCall(id=f"p{rounds}{i}", name=name, arguments='{"task": "x"}')
                for i, name in enumerate(("lookup", "helper"))
            ]
        return "final"

    child_model = ScriptedChatModel(checked(lambda r: "child answer"))
    child = Chain([CompactionAdvisor(summarizer(), trigger=trigger, keep=keep)], model=child_model)

    async def lookup(arguments: dict[str, Any], context: Any) -> str:
        return "looked up " * 30

    from advisorchain.core.tools import Tool

    tools = [
        Tool("lookup", "Look up", {"type": "object"}, lookup),
        chain_tool(child, "helper", "Help"),
    ]
    model = ScriptedChatModel(checked(parent))
    chain = Chain(
        [
            ToolCallingAdvisor(),
            CompactionAdvisor(
                summarizer(), trigger=trigger, keep=keep, clear_tool_results=clearing
            ),
        ],
        model=model,
        tools=tools,
    )
    prompt = [*history, UserMessage(content="and now?")]

    async def turn() -> ChatResponse:
        if not streaming:
            return await chain.call(prompt)
        final: ChatResponse | None = None
        async for event in chain.stream(prompt):
            if isinstance(event, ResponseCompleted):
                final = event.response
        assert final is not None
        return final

    response = anyio.run(turn)
    assert response.text == "final"
    assert not errors, errors[0]


@tool(requires_approval=True)
def pay(tag: str) -> str:
    """Pay (needs approval)."""
    return f"paid {tag}"


@tool
def note(tag: str) -> str:
    """Write a note."""
    return f"noted {tag}"


async def answer(chain: Chain, prompt: Any, streaming: bool, **options: Any) -> ChatResponse:
    if not streaming:
        return await chain.call(prompt, **options)
    final: ChatResponse | None = None
    async for event in chain.stream(prompt, **options):
        if isinstance(event, ResponseCompleted):
            final = event.response
    assert final is not None
    return final


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories(waiting_tail=False),
    triggers,
    keeps,
    clearings,
    st.lists(st.sampled_from(["pay", "note", "helper"]), min_size=1, max_size=4).filter(
        lambda names: "pay" in names
    ),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.booleans(),
    st.booleans(),
)
def test_deferred_calls_survive_compaction_through_the_resume(
    history: list[Message],
    trigger: Trigger,
    keep: Keep,
    clearing: ClearToolResults | None,
    names: list[str],
    approvals: list[bool],
    streaming: bool,
    with_memory: bool,
) -> None:
    """A turn defers calls (approval) with compaction in the chain; the resume
    (`decisions=`, the transcript given or memory's log) settles every one of them, and
    every model request, before and after, is valid for the four wire formats: on both
    paths, with and without memory."""
    errors: list[Any] = []
    sent: list[ChatRequest] = []

    def checked(script: Any) -> Any:
        def answer(request: ChatRequest) -> Any:
            sent.append(request)
            found = wire_errors([m for m in request.messages if not isinstance(m, SystemMessage)])
            if found:
                errors.append((found, request.messages))
            return script(request)

        return answer

    def parent(request: ChatRequest) -> Any:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text == "and now?":
            return [
                ToolCall.from_arguments(
                    name, {"tag": f"t{i}"} if name != "helper" else {"task": f"t{i}"}, id=f"d{i}"
                )
                for i, name in enumerate(names)
            ]
        return "final"

    child = Chain(
        [CompactionAdvisor(summarizer(), trigger=trigger, keep=keep)],
        model=ScriptedChatModel(checked(lambda r: "child answer")),
    )
    model = ScriptedChatModel(checked(parent))
    summarize = summarizer()
    memory_store = InMemoryChatMemoryStore()
    advisors: list[Any] = [MemoryAdvisor(memory_store)] if with_memory else []
    advisors += [
        ToolCallingAdvisor(),
        ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore()),
        CompactionAdvisor(
            summarize,
            trigger=trigger,
            keep=keep,
            clear_tool_results=clearing,
            store=memory_store if with_memory else None,
        ),
    ]
    chain = Chain(advisors, model=model, tools=[pay, note, chain_tool(child, "helper", "Help")])
    waiting = {f"d{i}" for i, name in enumerate(names) if name == "pay"}
    decisions = {
        call_id: Approve() if approvals[int(call_id[1:])] else Reject(f"no {call_id}")
        for call_id in waiting
    }

    async def turns() -> tuple[ChatResponse, ChatResponse]:
        if with_memory:
            await memory_store.append("c", [m for m in history if not isinstance(m, SystemMessage)])
            prompt: list[Message] = [UserMessage(content="and now?")]
            deferred = await answer(chain, prompt, streaming, conversation_id="c")
            marks.append(len(sent))
            resumed = await answer(chain, [], streaming, decisions=decisions, conversation_id="c")
        else:
            prompt = [*history, UserMessage(content="and now?")]
            deferred = await answer(chain, prompt, streaming)
            transcript = [*prompt, *deferred.messages]
            marks.append(len(sent))
            resumed = await answer(chain, transcript, streaming, decisions=decisions)
        return deferred, resumed

    marks: list[int] = []
    deferred, resumed = anyio.run(turns)
    assert not errors, errors[0]
    assert deferred.finish_reason == "deferred"
    assert {d.id for d in deferred.deferred} == waiting
    assert resumed.text == "final"
    settled = [m for m in resumed.messages if isinstance(m, ToolMessage)]
    assert sorted(m.tool_call_id for m in settled) == sorted(waiting)  # each once, none lost
    for message in settled:
        tag = message.tool_call_id[1:]
        if approvals[int(tag)]:
            assert message.text == f"paid t{tag}"
        else:
            assert message.is_error and f"no d{tag}" in message.text
    # the model saw every settled result: verbatim in the first request after the
    # resume, or in what the summarizer read to write the summary it was sent
    after = [r for r in sent[marks[0] :] if r.messages[-1].role == "tool"][0]
    seen = {m.tool_call_id: m.text for m in after.messages if isinstance(m, ToolMessage)}
    read = " ".join(r.messages[-1].text for r in summarize.requests)
    for message in settled:
        assert message.tool_call_id in seen or message.text in read, message
