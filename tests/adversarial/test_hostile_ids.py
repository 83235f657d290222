"""Ids that come from URLs, forms and models (quotes, NUL, SQL, lone surrogates, 100 KB)
through every approval store and every chat memory store: a typed error or the right
record, never a raw driver error, and nothing else in the store touched."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from advisorchain import AdvisorChainError, AssistantMessage, ToolMessage, UserMessage
from advisorchain.advisors import (
    Approve,
    ChatMemoryStore,
    InMemoryChatMemoryStore,
    PostgresChatMemoryStore,
    SQLiteChatMemoryStore,
)

from postgres_support import drop_tables
from test_approval_deferred import Bank, StoreFactory, call, fresh_chain, stores

__all__ = ["stores"]  # the approval-store fixture (memory, SQLite, PostgreSQL)


@pytest.fixture
def anyio_backend() -> str:
    """Stores run their drivers in worker threads: one event loop is enough here."""
    return "asyncio"


HOSTILE_IDS = {
    "quotes": "call_\"1' OR '1'='1",
    "sql": "x'); DROP TABLE approvals; --",
    "nul": "call\x001",
    "surrogate": "call_\udcff",
    "newline": "call\r\n1",
    "100 KB": "c" * 100_000,
    "percent": "%27%22%00",
    "unicode": "\u202ecall_\U0001f600",
}
"""What a form field or a URL path segment can carry (and a model can write as a call id)."""

# PostgreSQL text cannot hold NUL or lone surrogates, SQLite cannot hold lone surrogates:
# such an id cannot name anything stored, so it must be refused as not found.
NEVER_STORED = {"nul", "surrogate"}

KNOWN: dict[tuple[str, str], set[str]] = {}
"""Ids whose store's driver error escapes untyped. Found by this suite (surrogates in
SQLite and PostgreSQL, NUL in PostgreSQL: UnicodeEncodeError, psycopg.DataError); the
stores now answer "not found" for such ids, or refuse them with a typed error."""


@pytest.mark.anyio
async def test_resume_with_a_hostile_approval_id_is_refused(
    stores: StoreFactory, request: pytest.FixtureRequest
) -> None:
    """A transcript whose record names a hostile approval id: refused, never a driver error."""
    bank = Bank()
    chain, _ = fresh_chain("before", stores(), [[call("transfer", "c1", to="bob", amount=5)]])
    pending = await chain.call("pay bob", tools=bank.tools, tool_context={"tenant": "t"})
    asked = pending.messages[0]
    assert isinstance(asked, AssistantMessage) and asked.provider_data is not None
    raw: dict[str, BaseException] = {}
    for kind, approval_id in HOSTILE_IDS.items():
        record = dict(asked.provider_data["advisorchain"]["deferred"]["c1"])
        record["metadata"] = {**record["metadata"], "approval_id": approval_id}
        forged = asked.model_copy(
            update={"provider_data": {"advisorchain": {"deferred": {"c1": record}}}}
        )
        worker = Bank()
        chain, model = fresh_chain("before", stores(), ["Refused."])
        try:
            resumed = await chain.call(
                [UserMessage(content="pay bob"), forged],
                decisions={"c1": Approve()},
                tools=worker.tools,
                tool_context={"tenant": "t"},
            )
        except Exception as exc:
            raw[kind] = exc
            continue
        assert worker.sent == []
        first = resumed.messages[0]
        assert isinstance(first, ToolMessage) and first.is_error
    store = request.node.callspec.params["stores"]
    assert set(raw) == KNOWN.get(("approval", store), set()), raw


@pytest.mark.anyio
async def test_a_hostile_call_id_from_the_model_is_deferred_and_resumed(
    stores: StoreFactory, request: pytest.FixtureRequest
) -> None:
    raw: dict[str, BaseException] = {}
    for kind, call_id in HOSTILE_IDS.items():
        try:
            await suspend_and_resume(stores, kind, call_id)
        except Exception as exc:
            raw[kind] = exc
    # The chain rewrites every hostile call id the model sends into a valid one before any
    # link sees it (issue 15 item 1), so no store ever receives one: nothing fails.
    assert raw == {}, raw


async def suspend_and_resume(stores: StoreFactory, kind: str, call_id: str) -> None:
    bank = Bank()
    chain, _ = fresh_chain("before", stores(), [[call("transfer", call_id, to="bob", amount=5)]])
    try:
        pending = await chain.call("pay bob", tools=bank.tools, tool_context={"tenant": "t"})
    except AdvisorChainError:
        assert kind in NEVER_STORED  # refused with a typed error, not a driver error
        return
    (waiting,) = pending.deferred
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", waiting.id), waiting.id
    call_id = waiting.id
    worker = Bank()
    chain, _ = fresh_chain("before", stores(), ["Paid."])
    resumed = await chain.call(
        [UserMessage(content="pay bob"), *pending.messages],
        decisions={call_id: Approve()},
        tools=worker.tools,
        tool_context={"tenant": "t"},
    )
    assert resumed.text == "Paid."
    assert [(to, amount) for to, amount, _, _ in worker.sent] == [("bob", 5)]
    first = resumed.messages[0]
    assert isinstance(first, ToolMessage) and first.tool_call_id == call_id


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def memory_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ChatMemoryStore]:
    if request.param == "memory":
        yield InMemoryChatMemoryStore()
    elif request.param == "sqlite":
        async with SQLiteChatMemoryStore(tmp_path / "memory.db") as sqlite:
            yield sqlite
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        prefix = f"t{uuid.uuid4().hex[:10]}_"
        store = PostgresChatMemoryStore(dsn, table_prefix=prefix)
        try:
            yield store
        finally:
            await store.aclose()
            await anyio.to_thread.run_sync(drop_tables, dsn, f"{prefix}memory")


@pytest.mark.anyio
async def test_memory_stores_keep_hostile_conversation_ids_apart(
    memory_store: ChatMemoryStore, request: pytest.FixtureRequest
) -> None:
    await memory_store.append("neighbour", [UserMessage(content="keep me")])
    raw: dict[str, BaseException] = {}
    for kind, conversation in HOSTILE_IDS.items():
        try:
            await memory_store.append(conversation, [UserMessage(content=f"hostile {kind}")])
        except AdvisorChainError:
            assert kind in NEVER_STORED
            continue
        except Exception as exc:
            raw[kind] = exc
            continue
        assert await memory_store.load(conversation) == (UserMessage(content=f"hostile {kind}"),)
        await memory_store.clear(conversation)
        assert await memory_store.load(conversation) == ()
    assert await memory_store.load("neighbour") == (UserMessage(content="keep me"),)
    store = request.node.callspec.params["memory_store"]
    assert set(raw) == KNOWN.get(("memory", store), set()), raw
