from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChainConfigurationError,
    ChatRequest,
    ChatResponse,
    InvalidDecisions,
    Message,
    ResponseCompleted,
    Result,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    ToolResult,
    UserMessage,
    chain_tool,
    tool,
)
from advisorchain.advisors import (
    ConversationIdError,
    InMemoryChatMemoryStore,
    MemoryAdvisor,
    trim_history,
)
from advisorchain.providers import ScriptedChatModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=call_id)


def _chain(
    model: ScriptedChatModel, store: InMemoryChatMemoryStore, **options: int | None
) -> Chain:
    return Chain(
        [MemoryAdvisor(store, **options), ToolCallingAdvisor()],  # type: ignore[arg-type]
        model=model,
        tools=[add],
    )


def _roles(messages: Sequence[Message]) -> list[str]:
    return [m.role for m in messages]


# -- multi-turn conversations -------------------------------------------------------------


@pytest.mark.anyio
async def test_second_turn_sees_the_first_with_its_tool_round() -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel([_call("add", "c1", a=2, b=3), "It is 5.", "You asked 2+3."])
    chain = _chain(model, store)

    first = await chain.call("What is 2+3?", conversation_id="conv")
    assert first.text == "It is 5."
    second = await chain.call("What did I ask?", conversation_id="conv")
    assert second.text == "You asked 2+3."

    sent = model.requests[2].messages
    assert _roles(sent) == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[0] == UserMessage(content="What is 2+3?")
    assert isinstance(sent[1], AssistantMessage) and sent[1].tool_calls[0].id == "c1"
    assert sent[2] == ToolMessage(tool_call_id="c1", name="add", content="5")
    assert sent[4] == UserMessage(content="What did I ask?")
    stored = await store.load("conv")
    assert list(stored) == [*sent, AssistantMessage(content="You asked 2+3.")]


@pytest.mark.anyio
async def test_three_turns_accumulate_in_order() -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(["a1", "a2", "a3"])
    chain = _chain(model, store)
    for text in ("u1", "u2", "u3"):
        await chain.call(text, conversation_id="c")
    assert [getattr(m, "content", None) for m in await store.load("c")] == [
        "u1",
        "a1",
        "u2",
        "a2",
        "u3",
        "a3",
    ]
    assert [m.content for m in model.requests[2].messages] == ["u1", "a1", "u2", "a2", "u3"]


@pytest.mark.anyio
async def test_conversation_id_from_tool_context() -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(["a1", "a2"])
    chain = Chain([MemoryAdvisor(store, conversation_id_key="session")], model=model)
    await chain.call("u1", tool_context={"session": "s-1"})
    await chain.call("u2", tool_context={"session": "s-1"})
    assert _roles(model.requests[1].messages) == ["user", "assistant", "user"]
    assert model.requests[1].conversation_id == "s-1"
    assert len(await store.load("s-1")) == 4


@pytest.mark.anyio
async def test_request_conversation_id_wins_over_tool_context() -> None:
    store = InMemoryChatMemoryStore()
    chain = Chain([MemoryAdvisor(store)], model=ScriptedChatModel(["a"]))
    await chain.call("u", conversation_id="explicit", tool_context={"conversation_id": "ctx"})
    assert await store.load("ctx") == ()
    assert len(await store.load("explicit")) == 2


@pytest.mark.anyio
async def test_without_conversation_id_the_turn_passes_through() -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(["a1", "a2"])
    chain = Chain([MemoryAdvisor(store)], model=model)
    await chain.call("u1")
    await chain.call("u2")
    assert _roles(model.requests[1].messages) == ["user"]
    assert store._conversations == {}


@pytest.mark.anyio
async def test_require_conversation_id_raises_a_typed_error() -> None:
    chain = Chain(
        [MemoryAdvisor(InMemoryChatMemoryStore(), require_conversation_id=True)],
        model=ScriptedChatModel(["a"]),
    )
    with pytest.raises(ConversationIdError, match="needs a conversation id"):
        await chain.call("u")


@pytest.mark.anyio
async def test_a_non_string_id_is_a_typed_error_that_hides_the_value() -> None:
    chain = Chain([MemoryAdvisor(InMemoryChatMemoryStore())], model=ScriptedChatModel(["a"]))
    with pytest.raises(ConversationIdError) as caught:
        await chain.call("u", tool_context={"conversation_id": 987654321})
    assert "987654321" not in str(caught.value)
    assert "int" in str(caught.value)


def test_memory_must_sit_outside_the_tool_loop() -> None:
    with pytest.raises(ChainConfigurationError, match="before ToolCallingAdvisor"):
        Chain(
            [ToolCallingAdvisor(), MemoryAdvisor(InMemoryChatMemoryStore())],
            model=ScriptedChatModel([]),
        )


def test_negative_max_messages_is_refused() -> None:
    with pytest.raises(ValueError, match="max_messages"):
        MemoryAdvisor(InMemoryChatMemoryStore(), max_messages=-1)


# -- system messages ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_system_message_is_stored_once_and_stays_first() -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(["a1", "a2", "a3", "a4"])
    chain = Chain([MemoryAdvisor(store)], model=model)
    system = SystemMessage(content="Be brief.")

    await chain.call([system, UserMessage(content="u1")], conversation_id="c")
    await chain.call("u2", conversation_id="c")  # no system: the stored one is used
    await chain.call([system, UserMessage(content="u3")], conversation_id="c")  # same again

    assert model.requests[1].messages[0] == system
    assert _roles(model.requests[1].messages) == ["system", "user", "assistant", "user"]
    assert _roles(model.requests[2].messages).count("system") == 1
    assert model.requests[2].messages[0] == system
    stored = await store.load("c")
    assert sum(isinstance(m, SystemMessage) for m in stored) == 1

    changed = SystemMessage(content="Be verbose.")
    await chain.call([changed, UserMessage(content="u4")], conversation_id="c")
    sent = model.requests[3].messages
    assert sent[0] == changed and system not in sent
    assert [m for m in await store.load("c") if isinstance(m, SystemMessage)] == [system, changed]


@pytest.mark.anyio
async def test_the_latest_stored_system_message_is_used() -> None:
    store = InMemoryChatMemoryStore()
    await store.append(
        "c",
        [
            SystemMessage(content="old"),
            UserMessage(content="u1"),
            AssistantMessage(content="a1"),
            SystemMessage(content="new"),
            UserMessage(content="u2"),
            AssistantMessage(content="a2"),
        ],
    )
    model = ScriptedChatModel(["a3"])
    await Chain([MemoryAdvisor(store, max_messages=2)], model=model).call("u3", conversation_id="c")
    assert [getattr(m, "content", None) for m in model.requests[0].messages] == [
        "new",
        "u2",
        "a2",
        "u3",
    ]


# -- trimming -------------------------------------------------------------------------------


def _tool_turn(n: int, calls: int) -> list[Message]:
    ids = [f"t{n}-{i}" for i in range(calls)]
    return [
        UserMessage(content=f"u{n}"),
        AssistantMessage(tool_calls=tuple(_call("add", i, a=1, b=1) for i in ids)),
        *(ToolMessage(tool_call_id=i, name="add", content="2") for i in ids),
        AssistantMessage(content=f"a{n}"),
    ]


HISTORY: list[Message] = [*_tool_turn(1, 2), *_tool_turn(2, 1)]
# u1 A(t1-0,t1-1) T T a1 | u2 A(t2-0) T a2  -> 5 + 4 = 9 messages


@pytest.mark.parametrize(
    ("max_messages", "expected_start"),
    [
        (None, 0),
        (9, 0),
        (100, 0),
        (8, 5),  # cut at A(t1-*): moves on to the next user message
        (7, 5),  # cut at a tool result
        (5, 5),  # cut at a tool result
        (4, 5),  # exactly the second turn
        (3, 6),  # no user message fits: starts at the tool-call message, keeps its result
        (2, 8),  # cut at a tool result: the final answer alone
        (1, 8),
        (0, 9),
    ],
)
def test_trim_boundaries(max_messages: int | None, expected_start: int) -> None:
    assert trim_history(HISTORY, max_messages) == HISTORY[expected_start:]


def test_trim_never_starts_with_a_tool_result() -> None:
    only_results = [ToolMessage(tool_call_id=f"x{i}", name="add", content="2") for i in range(3)]
    assert trim_history(only_results, 2) == []


def _is_valid(window: Sequence[Message]) -> bool:
    open_calls: set[str] = set()
    for m in window:
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in open_calls:
                return False
            open_calls.discard(m.tool_call_id)
        else:
            if open_calls:
                return False  # a call left without its result
            if isinstance(m, AssistantMessage):
                open_calls = {c.id for c in m.tool_calls}
    return not open_calls


def test_trim_never_orphans_on_random_histories() -> None:
    rng = random.Random(7)
    for case in range(200):
        history: list[Message] = []
        for n in range(rng.randint(1, 6)):
            turn = _tool_turn(case * 10 + n, rng.randint(0, 3))
            if len(turn) == 3:  # zero calls: a plain answer
                turn = [turn[0], turn[2]]
            history += turn
        assert _is_valid(history)
        for limit in range(len(history) + 2):
            window = trim_history(history, limit)
            assert len(window) <= limit
            assert _is_valid(window), (case, limit)
            assert window == history[len(history) - len(window) :]


@pytest.mark.anyio
async def test_trimmed_history_sent_keeps_system_and_tool_pairs() -> None:
    store = InMemoryChatMemoryStore()
    system = SystemMessage(content="sys")
    await store.append("c", [system, *HISTORY])
    model = ScriptedChatModel(["a3"])
    chain = _chain(model, store, max_messages=3)
    await chain.call("u3", conversation_id="c")
    sent = model.requests[0].messages
    assert sent[0] == system
    assert list(sent[1:-1]) == HISTORY[6:]
    assert sent[-1] == UserMessage(content="u3")
    assert _is_valid(sent[1:])
    assert len(await store.load("c")) == 1 + len(HISTORY) + 2  # the store keeps everything


# -- isolation and concurrency ------------------------------------------------------------


@pytest.mark.anyio
async def test_two_conversations_are_isolated() -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(lambda r: f"echo {r.messages[-1].content}")
    chain = _chain(model, store)
    await chain.call("alice-1", conversation_id="alice")
    await chain.call("bob-1", conversation_id="bob")
    await chain.call("alice-2", conversation_id="alice")
    assert [m.content for m in model.requests[2].messages] == [
        "alice-1",
        "echo alice-1",
        "alice-2",
    ]
    assert [getattr(m, "content", None) for m in await store.load("bob")] == [
        "bob-1",
        "echo bob-1",
    ]


@pytest.mark.anyio
async def test_concurrent_turns_on_different_conversations_overlap() -> None:
    store = InMemoryChatMemoryStore()
    in_model = {"a": anyio.Event(), "b": anyio.Event()}

    async def reply(request: ChatRequest) -> str:
        me = request.conversation_id
        assert me is not None
        in_model[me].set()
        other = "b" if me == "a" else "a"
        await in_model[other].wait()  # deadlocks unless both turns are in flight at once
        return f"answer {me}"

    chain = _chain(ScriptedChatModel(reply), store)

    async def turn(conversation: str) -> None:
        await chain.call(f"question {conversation}", conversation_id=conversation)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(turn, "a")
            group.start_soon(turn, "b")
    assert [m.content for m in await store.load("a")] == ["question a", "answer a"]
    assert [m.content for m in await store.load("b")] == ["question b", "answer b"]


@pytest.mark.anyio
async def test_concurrent_turns_on_one_conversation_are_serialized() -> None:
    store = InMemoryChatMemoryStore()
    release = anyio.Event()
    seen: list[list[str]] = []

    async def reply(request: ChatRequest) -> str:
        seen.append([str(getattr(m, "content", "")) for m in request.messages])
        if len(seen) == 1:
            await release.wait()
        return f"answer {len(seen)}"

    memory = MemoryAdvisor(store)
    chain = Chain([memory], model=ScriptedChatModel(reply))

    async def turn(text: str) -> None:
        await chain.call(text, conversation_id="same")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(turn, "first")
            await anyio.wait_all_tasks_blocked()
            group.start_soon(turn, "second")
            await anyio.wait_all_tasks_blocked()
            assert len(seen) == 1  # the second turn waits for the first
            release.set()
    assert seen[1] == ["first", "answer 1", "second"]
    assert memory._locks == {}  # no lock kept once the conversation is idle


@pytest.mark.anyio
async def test_a_failed_turn_saves_nothing_and_releases_the_conversation() -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel([RuntimeError("provider down"), "fine"])
    memory = MemoryAdvisor(store)
    chain = Chain([memory, ToolCallingAdvisor()], model=model)
    with pytest.raises(RuntimeError, match="provider down"):
        await chain.call("u1", conversation_id="c")
    assert await store.load("c") == ()
    await chain.call("u2", conversation_id="c")
    assert [m.content for m in await store.load("c")] == ["u2", "fine"]
    assert memory._locks == {}


# -- streaming ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stream_saves_the_turn_when_it_completes() -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel([_call("add", "c1", a=1, b=2), "The sum is 3.", "Yes."])
    chain = _chain(model, store)
    events = [e async for e in chain.stream("1+2?", conversation_id="c")]
    assert isinstance(events[-1], ResponseCompleted)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The sum is 3."
    assert _roles(await store.load("c")) == ["user", "assistant", "tool", "assistant"]

    [e async for e in chain.stream("Sure?", conversation_id="c")]
    assert _roles(model.requests[2].messages) == ["user", "assistant", "tool", "assistant", "user"]
    assert (await store.load("c"))[-1] == AssistantMessage(content="Yes.")


@pytest.mark.anyio
async def test_an_abandoned_stream_saves_nothing() -> None:
    store = InMemoryChatMemoryStore()
    memory = MemoryAdvisor(store)
    chain = Chain([memory, ToolCallingAdvisor()], model=ScriptedChatModel(["a long answer"]))
    stream = chain.stream("u", conversation_id="c")
    first = await stream.__anext__()
    assert isinstance(first, TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]
    assert await store.load("c") == ()
    assert memory._locks == {}


@pytest.mark.anyio
async def test_a_failed_stream_saves_nothing() -> None:
    store = InMemoryChatMemoryStore()
    chain = Chain(
        [MemoryAdvisor(store), ToolCallingAdvisor()],
        model=ScriptedChatModel([RuntimeError("stream broke")]),
    )
    with pytest.raises(RuntimeError, match="stream broke"):
        [e async for e in chain.stream("u", conversation_id="c")]
    assert await store.load("c") == ()


@pytest.mark.anyio
async def test_stream_without_conversation_id_passes_through() -> None:
    store = InMemoryChatMemoryStore()
    chain = Chain([MemoryAdvisor(store)], model=ScriptedChatModel(["hi"]))
    events = [e async for e in chain.stream("u")]
    assert isinstance(events[-1], ResponseCompleted)
    assert store._conversations == {}


# -- deferred calls: memory keeps the transcript a resume continues ------------------------


@tool
def build(report: str) -> ToolResult:
    """Start building a report (the result arrives later)."""
    return ToolResult.defer("external", {"report": report})


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_deferred_turn_is_stored_and_resumed_from_memory_once(streaming: bool) -> None:
    store = InMemoryChatMemoryStore()
    await store.append("c", [UserMessage(content="hello"), AssistantMessage(content="hi")])
    model = ScriptedChatModel([_call("build", "b1", report="q3"), "The report has 3 pages."])
    chain = Chain([MemoryAdvisor(store), ToolCallingAdvisor()], model=model, tools=[build])

    async def run(*prompt: Any, **options: Any) -> ChatResponse:
        if not streaming:
            return await chain.call(*prompt, conversation_id="c", **options)
        events = [e async for e in chain.stream(*prompt, conversation_id="c", **options)]
        completed = events[-1]
        assert isinstance(completed, ResponseCompleted)
        return completed.response

    deferred = await run("build the q3 report")
    assert deferred.finish_reason == "deferred"
    stored = await store.load("c")
    assert stored[2:] == (UserMessage(content="build the q3 report"), *deferred.messages)

    # memory supplies the transcript: no prompt, the decisions only
    done = await run(decisions={"b1": Result({"pages": 3})})
    assert done.text == "The report has 3 pages."
    settled = done.messages[0]
    assert isinstance(settled, ToolMessage) and settled.tool_call_id == "b1"
    assert model.requests[-1].messages == (*stored, settled)
    assert await store.load("c") == (*stored, *done.messages)  # the resumed turn, once

    # a second resume: the call no longer waits; nothing runs, nothing is stored
    with pytest.raises(InvalidDecisions, match="not a call that waits"):
        await run(decisions={"b1": Result({"pages": 4})})
    assert await store.load("c") == (*stored, *done.messages)
    assert len(model.requests) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_sub_agent_sharing_the_advisor_and_the_conversation_runs_without_memory(
    streamed: bool,
) -> None:
    store = InMemoryChatMemoryStore()
    memory = MemoryAdvisor(store)
    child_model = ScriptedChatModel(["child says hi"])
    child = Chain([memory, ToolCallingAdvisor()], model=child_model)
    helper = chain_tool(child, "helper", "Helps.", context_keys=["conversation_id"])
    parent = Chain(
        [memory, ToolCallingAdvisor()],
        model=ScriptedChatModel([ToolCall.from_arguments("helper", {"task": "x"}, id="c1"), "ok"]),
        tools=[helper],
    )
    context = {"conversation_id": "conv-1"}
    with anyio.fail_after(10):  # it waited for itself on the stream path
        if streamed:
            events = [e async for e in parent.stream("hi", tool_context=context)]
            assert isinstance(events[-1], ResponseCompleted)
        else:
            await parent.call("hi", tool_context=context)
    assert child_model.requests[0].messages == (UserMessage(content="x"),)
    stored = await store.load("conv-1")
    assert [m.text for m in stored] == ["hi", "", "child says hi", "ok"]
    assert memory._locks == {}


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_sub_agent_sharing_the_advisor_keeps_its_own_conversation(streamed: bool) -> None:
    store = InMemoryChatMemoryStore()
    memory = MemoryAdvisor(store)
    child = Chain([memory, ToolCallingAdvisor()], model=ScriptedChatModel(["one", "two"]))
    helper = chain_tool(child, "helper", "Helps.", context_keys=["conversation_id"])
    call = ToolCall.from_arguments("helper", {"task": "x"}, id="c1")
    parent = Chain(
        [memory, ToolCallingAdvisor()],
        model=ScriptedChatModel([call, "ok", call, "ok"]),
        tools=[helper],
    )
    for _ in range(2):
        kw = {"conversation_id": "parent", "tool_context": {"conversation_id": "child"}}
        with anyio.fail_after(10):
            if streamed:
                [e async for e in parent.stream("hi", **kw)]  # type: ignore[arg-type]
            else:
                await parent.call("hi", **kw)  # type: ignore[arg-type]
    assert [m.text for m in await store.load("child")] == ["x", "one", "x", "two"]
    assert [m.text for m in await store.load("parent")][:4] == ["hi", "", "one", "ok"]
