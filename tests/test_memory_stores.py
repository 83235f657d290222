from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    DocumentPart,
    ImagePart,
    Message,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ChatMemoryStore,
    ChatMemoryStoreError,
    InMemoryChatMemoryStore,
    MemoryAdvisor,
    PostgresChatMemoryStore,
    SQLiteChatMemoryStore,
)
from advisorchain.providers import ScriptedChatModel

from postgres_support import drop_tables

EVERY_KIND: list[Message] = [
    SystemMessage(content="sys"),
    UserMessage(content="héllo ✓"),
    AssistantMessage(
        content=None,
        tool_calls=(
            ToolCall(id="c1", name="lookup", arguments='{"q": "x"}'),
            ToolCall(id="c2", name="lookup", arguments="{not json"),
        ),
    ),
    ToolMessage(tool_call_id="c1", name="lookup", content="found"),
    ToolMessage(tool_call_id="c2", name="lookup", content="Error: bad JSON", is_error=True),
    AssistantMessage(content="answer"),
]


@pytest.fixture(params=["memory", "sqlite-memory", "sqlite-file", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ChatMemoryStore]:
    if request.param == "memory":
        yield InMemoryChatMemoryStore()
        return
    if request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        prefix = f"t{uuid.uuid4().hex[:10]}_"
        async with PostgresChatMemoryStore(dsn, table_prefix=prefix) as postgres_store:
            yield postgres_store
        await anyio.to_thread.run_sync(drop_tables, dsn, postgres_store.table)
        return
    path = ":memory:" if request.param == "sqlite-memory" else tmp_path / "memory.db"
    async with SQLiteChatMemoryStore(path) as sqlite_store:
        yield sqlite_store


@pytest.mark.anyio
async def test_round_trip_of_every_message_kind(store: ChatMemoryStore) -> None:
    assert isinstance(store, ChatMemoryStore)
    assert await store.load("c") == ()
    await store.append("c", EVERY_KIND[:3])
    await store.append("c", EVERY_KIND[3:])
    await store.append("c", [])
    assert list(await store.load("c")) == EVERY_KIND


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(24))

WITH_PARTS: list[Message] = [
    UserMessage(
        content=(
            TextPart(text="Read this"),
            ImagePart(data=PNG),
            ImagePart(url="https://example.com/a.png"),
            DocumentPart(data=b"%PDF-1.4 \x00\xff", name="a.pdf"),
        )
    ),
    AssistantMessage(
        content=(
            ReasoningPart(text="thinking", signature="sig", provider="anthropic"),
            ReasoningPart(
                provider="anthropic", provider_data={"type": "redacted_thinking", "data": "x"}
            ),
        ),
        tool_calls=(
            ToolCall(
                id="c1", name="look", provider_data={"openai": {"extra_content": {"k": None}}}
            ),
        ),
        provider_data={"acme": [1, None]},
    ),
    ToolMessage(
        tool_call_id="c1", name="look", content=(TextPart(text="seen"), ImagePart(data=PNG))
    ),
    AssistantMessage(content="It is a chart."),
]


@pytest.mark.anyio
async def test_round_trip_of_content_parts_and_provider_data(store: ChatMemoryStore) -> None:
    await store.append("c", WITH_PARTS)
    assert list(await store.load("c")) == WITH_PARTS
    load_tail = getattr(store, "load_tail", None)
    if load_tail is not None:
        assert list(await load_tail("c", 2)) == WITH_PARTS[2:]


@pytest.mark.anyio
async def test_conversations_are_separate_and_clear_forgets_one(store: ChatMemoryStore) -> None:
    await store.append("a", [UserMessage(content="for a")])
    await store.append("b", [UserMessage(content="for b")])
    await store.clear("a")
    assert await store.load("a") == ()
    assert list(await store.load("b")) == [UserMessage(content="for b")]
    await store.clear("never-seen")
    await store.append("a", [UserMessage(content="again")])
    assert list(await store.load("a")) == [UserMessage(content="again")]


@pytest.mark.anyio
async def test_concurrent_appends_keep_each_turn_whole(store: ChatMemoryStore) -> None:
    async def turn(n: int) -> None:
        await store.append("c", [UserMessage(content=f"u{n}"), AssistantMessage(content=f"a{n}")])

    async with anyio.create_task_group() as group:
        for n in range(20):
            group.start_soon(turn, n)
    stored = await store.load("c")
    assert len(stored) == 40
    for user, answer in zip(stored[::2], stored[1::2], strict=True):
        assert isinstance(user, UserMessage) and isinstance(answer, AssistantMessage)
        assert user.content[1:] == (answer.content or "")[1:]


@pytest.mark.anyio
async def test_sqlite_store_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with SQLiteChatMemoryStore(path) as first:
        await first.append("c", EVERY_KIND)
    async with SQLiteChatMemoryStore(path) as second:
        assert list(await second.load("c")) == EVERY_KIND


@pytest.mark.anyio
async def test_a_conversation_continues_after_a_restart(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    path = tmp_path / "memory.db"
    model = ScriptedChatModel([ToolCall.from_arguments("add", {"a": 1, "b": 1}), "2", "yes"])
    async with SQLiteChatMemoryStore(path) as store:
        chain = Chain([MemoryAdvisor(store), ToolCallingAdvisor()], model=model, tools=[add])
        await chain.call("1+1?", conversation_id="c")
    async with SQLiteChatMemoryStore(path) as store:
        chain = Chain([MemoryAdvisor(store), ToolCallingAdvisor()], model=model, tools=[add])
        await chain.call("Sure?", conversation_id="c")
    assert [m.role for m in model.requests[2].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


@pytest.mark.anyio
async def test_a_closed_sqlite_store_raises_a_typed_error() -> None:
    store = SQLiteChatMemoryStore(":memory:")
    await store.aclose()
    with pytest.raises(ChatMemoryStoreError, match="closed"):
        await store.load("c")
    store.close()  # closing twice is harmless


def test_sqlite_table_name_is_checked() -> None:
    with pytest.raises(ChatMemoryStoreError, match="invalid table name"):
        SQLiteChatMemoryStore(":memory:", table="memory; DROP TABLE x")


@pytest.mark.anyio
async def test_two_tables_in_one_file_are_separate(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with (
        SQLiteChatMemoryStore(path, table="one") as one,
        SQLiteChatMemoryStore(path, table="two") as two,
    ):
        await one.append("c", [UserMessage(content="in one")])
        assert await two.load("c") == ()
        assert "one" in repr(one)


@pytest.mark.anyio
async def test_load_tail_keeps_every_system_message_and_the_last_others(
    store: ChatMemoryStore,
) -> None:
    history: list[Message] = [
        SystemMessage(content="s1"),
        UserMessage(content="u1"),
        AssistantMessage(content="a1"),
        SystemMessage(content="s2"),
        UserMessage(content="u2"),
        AssistantMessage(content="a2"),
    ]
    await store.append("c", history)
    load_tail = store.load_tail  # type: ignore[attr-defined]
    others = [m for m in history if not isinstance(m, SystemMessage)]
    for last in range(len(others) + 2):
        kept = others[max(0, len(others) - last) :] if last else []
        expected = [m for m in history if isinstance(m, SystemMessage) or m in kept]
        assert list(await load_tail("c", last)) == expected, last
    assert await load_tail("unknown", 3) == ()


class _LoadOnly:
    """A store with only the protocol's required methods (no `load_tail`)."""

    def __init__(self) -> None:
        self.inner = InMemoryChatMemoryStore()

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        return await self.inner.load(conversation_id)

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        await self.inner.append(conversation_id, messages)

    async def clear(self, conversation_id: str) -> None:
        await self.inner.clear(conversation_id)


@pytest.mark.anyio
async def test_a_tail_loading_store_sends_the_same_window(store: ChatMemoryStore) -> None:
    plain = _LoadOnly()
    turns: list[Message] = [SystemMessage(content="sys")]
    for n in range(4):
        call = ToolCall(id=f"c{n}", name="add", arguments="{}")
        turns += [
            UserMessage(content=f"u{n}"),
            AssistantMessage(tool_calls=(call,)),
            ToolMessage(tool_call_id=f"c{n}", name="add", content="2"),
            AssistantMessage(content=f"a{n}"),
        ]
    await store.append("c", turns)
    await plain.append("c", turns)
    for max_messages in range(len(turns) + 2):  # each turn also grows both histories alike
        sent = []
        for memory_store in (store, plain):
            model = ScriptedChatModel(["ok"])
            chain = Chain([MemoryAdvisor(memory_store, max_messages=max_messages)], model=model)
            await chain.call("next", conversation_id="c")
            sent.append(model.requests[0].messages)
        assert sent[0] == sent[1], max_messages


@pytest.mark.anyio
async def test_awkward_text_round_trips(store: ChatMemoryStore) -> None:
    awkward: list[Message] = [
        UserMessage(content="nul \x00 byte, quote ' and \" and \\ backslash; DROP TABLE x"),
        AssistantMessage(content="😀 " + "long " * 20_000),
    ]
    await store.append('it\'s "odd" ✓', awkward)
    assert list(await store.load('it\'s "odd" ✓')) == awkward
