"""`PostgresChatMemoryStore` as several workers use it: store objects sharing one database.

The store contract (round trips, ordering, `load_tail`, concurrent appends) runs over every
store in test_memory_stores.py; these tests need the real server
(`ADVISORCHAIN_TEST_POSTGRES_DSN`, see `.ci/postgres.sh`).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Callable

import anyio
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    Message,
    SystemMessage,
    ToolCall,
    ToolCallingAdvisor,
    UserMessage,
    tool,
)
from advisorchain.advisors import ChatMemoryStoreError, MemoryAdvisor, PostgresChatMemoryStore
from advisorchain.providers import ScriptedChatModel

Workers = Callable[[], PostgresChatMemoryStore]
"""Makes a new store object (a "worker") on the same table."""


def run_sql(dsn: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(sql)


@pytest.fixture
async def workers(postgres_dsn: str) -> AsyncIterator[Workers]:
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    made: list[PostgresChatMemoryStore] = []

    def worker() -> PostgresChatMemoryStore:
        store = PostgresChatMemoryStore(postgres_dsn, table_prefix=prefix)
        made.append(store)
        return store

    yield worker
    for store in made:
        await store.aclose()
    await anyio.to_thread.run_sync(run_sql, postgres_dsn, f"DROP TABLE IF EXISTS {prefix}memory")


def turn(worker: int, n: int, size: int = 3) -> list[Message]:
    """One turn whose messages all name it: `size` messages, user first."""
    name = f"w{worker}t{n}"
    rest = [AssistantMessage(content=f"{name}:{i}") for i in range(1, size)]
    return [UserMessage(content=f"{name}:0"), *rest]


@pytest.mark.anyio
async def test_two_workers_see_each_others_turns(workers: Workers) -> None:
    one, two = workers(), workers()
    await one.append("c", [SystemMessage(content="sys"), *turn(1, 0)])
    await two.append("c", turn(2, 0))
    expected = [SystemMessage(content="sys"), *turn(1, 0), *turn(2, 0)]
    assert list(await one.load("c")) == expected
    assert list(await two.load("c")) == expected
    assert list(await one.load_tail("c", 2)) == [SystemMessage(content="sys"), *turn(2, 0)[1:]]
    await two.clear("c")
    assert await one.load("c") == ()


@pytest.mark.anyio
async def test_concurrent_appends_from_two_workers_never_interleave(workers: Workers) -> None:
    stores = [workers(), workers()]

    async def append_turns(worker: int) -> None:
        for n in range(15):
            await stores[worker].append("c", turn(worker, n))

    async with anyio.create_task_group() as group:
        for worker in (0, 1):
            for _ in range(2):  # two tasks per worker, so each store also overlaps itself
                group.start_soon(append_turns, worker)
    stored = await stores[0].load("c")
    assert len(stored) == 2 * 2 * 15 * 3
    for start in range(0, len(stored), 3):
        names = {str(m.content).split(":")[0] for m in stored[start : start + 3]}
        assert len(names) == 1, stored[start : start + 3]
        assert [str(m.content).split(":")[1] for m in stored[start : start + 3]] == ["0", "1", "2"]
    assert {str(m.content).split(":")[0][:2] for m in stored} == {"w0", "w1"}


@pytest.mark.anyio
async def test_workers_starting_at_once_create_the_table_once(workers: Workers) -> None:
    stores = [workers() for _ in range(6)]
    async with anyio.create_task_group() as group:
        for worker, store in enumerate(stores):
            group.start_soon(store.append, f"c{worker}", turn(worker, 0))
    for worker, store in enumerate(stores):
        assert list(await store.load(f"c{worker}")) == turn(worker, 0)


@pytest.mark.anyio
async def test_a_conversation_started_by_one_worker_continues_on_another(
    workers: Workers,
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedChatModel([ToolCall.from_arguments("add", {"a": 1, "b": 1}), "2", "yes"])
    first = Chain([MemoryAdvisor(workers()), ToolCallingAdvisor()], model=model, tools=[add])
    await first.call("1+1?", conversation_id="c")
    second = Chain([MemoryAdvisor(workers()), ToolCallingAdvisor()], model=model, tools=[add])
    response = await second.call("Sure?", conversation_id="c")
    assert response.message.content == "yes"
    assert [m.role for m in model.requests[2].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert [m.role for m in await workers().load("c")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]


@pytest.mark.anyio
async def test_a_failed_append_stores_none_of_the_turn(workers: Workers, postgres_dsn: str) -> None:
    store = workers()
    await store.append("c", turn(0, 0))
    check = f"ALTER TABLE {store.table} ADD CONSTRAINT no_boom CHECK (message NOT LIKE '%boom%')"
    await anyio.to_thread.run_sync(run_sql, postgres_dsn, check)
    with pytest.raises(Exception, match="no_boom"):
        await store.append("c", [UserMessage(content="fine"), AssistantMessage(content="boom")])
    await store.append("c", turn(0, 1))  # the store still works after the failure
    assert list(await store.load("c")) == [*turn(0, 0), *turn(0, 1)]


@pytest.mark.anyio
async def test_tables_with_different_prefixes_are_separate(
    workers: Workers, postgres_dsn: str
) -> None:
    store = workers()
    other_prefix = f"o{uuid.uuid4().hex[:10]}_"
    async with PostgresChatMemoryStore(postgres_dsn, table_prefix=other_prefix) as other:
        try:
            await other.append("c", turn(0, 0))
            assert await store.load("c") == ()
        finally:
            drop = f"DROP TABLE IF EXISTS {other.table}"
            await anyio.to_thread.run_sync(run_sql, postgres_dsn, drop)
    assert repr(other) == f"PostgresChatMemoryStore(table='{other_prefix}memory')"


@pytest.mark.anyio
async def test_a_closed_store_raises_a_typed_error(workers: Workers) -> None:
    store = workers()
    await store.append("c", turn(0, 0))
    await store.aclose()
    for operation in (store.load("c"), store.load_tail("c", 1), store.clear("c")):
        with pytest.raises(ChatMemoryStoreError, match="closed"):
            await operation
    with pytest.raises(ChatMemoryStoreError, match="closed"):
        await store.append("c", turn(0, 1))
    store.close()  # closing twice is harmless
    assert list(await workers().load("c")) == turn(0, 0)


@pytest.mark.anyio
async def test_a_conversation_id_with_nul_is_a_typed_error(workers: Workers) -> None:
    with pytest.raises(ChatMemoryStoreError, match="NUL"):
        await workers().append("a\x00b", turn(0, 0))


def test_the_table_prefix_is_checked() -> None:
    for prefix in ("memory; DROP TABLE x", "", "1abc", "x" * 60):
        with pytest.raises(ChatMemoryStoreError, match="invalid table prefix"):
            PostgresChatMemoryStore("postgresql://localhost/x", table_prefix=prefix)


def test_the_store_names_its_extra_when_psycopg_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"PostgresChatMemoryStore.*pip install '\.\[postgres\]'"):
        PostgresChatMemoryStore("postgresql://localhost/x")


def test_postgres_tests_fail_in_ci_without_a_server(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.delenv("ADVISORCHAIN_TEST_POSTGRES_DSN", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run"):
        request.getfixturevalue("postgres_dsn")
