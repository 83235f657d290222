"""advisors/_sql: identifier checks, the SQLite connection pool, the worker-thread runner."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from advisorchain.advisors import (
    ChatMemoryStoreError,
    PostgresApprovalStore,
    PostgresChatMemoryStore,
    SQLiteApprovalStore,
    SQLiteChatMemoryStore,
)
from advisorchain.advisors._sql.identifiers import (
    check_table_name,
    check_table_prefix,
    is_identifier,
)
from advisorchain.advisors._sql.sqlite import SQLiteConnections
from advisorchain.advisors._sql.threads import WorkerRunner


@pytest.mark.parametrize(
    "name", ["advisorchain_", "_x", "A1_b", "t" * 63], ids=["default", "underscore", "mixed", "63"]
)
def test_identifiers_that_pass(name: str) -> None:
    assert is_identifier(name)
    assert check_table_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "1abc", "a-b", "a b", "memory; DROP TABLE x", 'a"b', "é", "t" * 64, "a\x00"],
)
def test_identifiers_that_are_refused(name: str) -> None:
    assert not is_identifier(name)
    with pytest.raises(ValueError, match="invalid table name"):
        check_table_name(name)


def test_a_prefix_leaves_room_for_the_table_names() -> None:
    assert check_table_prefix("p" * 41) == "p" * 41
    with pytest.raises(ChatMemoryStoreError, match="invalid table prefix"):
        check_table_prefix("p" * 42, ChatMemoryStoreError)


def test_every_store_checks_its_table_name_the_same_way() -> None:
    bad = "x; DROP TABLE y"
    with pytest.raises(ValueError, match="invalid table prefix"):
        SQLiteApprovalStore(":memory:", table_prefix=bad)
    with pytest.raises(ValueError, match="invalid table prefix"):
        PostgresApprovalStore("postgresql://nowhere", table_prefix=bad)
    with pytest.raises(ChatMemoryStoreError, match="invalid table prefix"):
        PostgresChatMemoryStore("postgresql://nowhere", table_prefix=bad)
    with pytest.raises(ChatMemoryStoreError, match="invalid table name"):
        SQLiteChatMemoryStore(":memory:", table=bad)


def test_a_memory_database_is_one_connection_shared_in_turn() -> None:
    database = SQLiteConnections(":memory:")
    with database.transaction() as cursor:
        cursor.execute("CREATE TABLE t (n INTEGER)")
        cursor.execute("INSERT INTO t VALUES (1)")
    database.close_idle()  # never closes the memory database's connection
    with database.transaction(write=False) as cursor:
        assert cursor.execute("SELECT n FROM t").fetchall() == [(1,)]
    database.close()


def test_a_failed_transaction_is_rolled_back_and_the_connection_reused(tmp_path: Path) -> None:
    database = SQLiteConnections(tmp_path / "db.sqlite")
    with database.transaction() as cursor:
        cursor.execute("CREATE TABLE t (n INTEGER)")
        first = cursor.connection
    with pytest.raises(RuntimeError), database.transaction() as cursor:
        cursor.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("the caller failed")
    with database.transaction(write=False) as cursor:
        assert cursor.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
        assert cursor.connection is first
        assert cursor.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    database.close()


def test_a_closed_database_raises_the_stores_error(tmp_path: Path) -> None:
    database = SQLiteConnections(tmp_path / "db.sqlite", closed_error=ChatMemoryStoreError)
    database.close()
    with pytest.raises(ChatMemoryStoreError, match="closed"), database.transaction():
        pass


def test_write_transactions_are_serialized_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    setup = SQLiteConnections(path)
    with setup.transaction() as cursor:
        cursor.execute("CREATE TABLE counter (n INTEGER)")
        cursor.execute("INSERT INTO counter VALUES (0)")
    failures: list[BaseException] = []

    def increment(database: SQLiteConnections) -> None:
        try:
            for _ in range(25):
                with database.transaction(write=True) as cursor:  # read, then write
                    (n,) = cursor.execute("SELECT n FROM counter").fetchone()
                    cursor.execute("UPDATE counter SET n = ?", (n + 1,))
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    # Two pools stand for two processes; several threads share each pool.
    pools = [SQLiteConnections(path), SQLiteConnections(path)]
    threads = [threading.Thread(target=increment, args=(pools[i % 2],)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    with setup.transaction(write=False) as cursor:
        assert cursor.execute("SELECT n FROM counter").fetchone() == (150,)
    for database in (setup, *pools):
        database.close()


def test_a_read_transaction_sees_one_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    database = SQLiteConnections(path)
    with database.transaction() as cursor:
        cursor.execute("CREATE TABLE t (n INTEGER)")
    writer = sqlite3.connect(path, isolation_level=None)
    with database.transaction(write=False) as cursor:
        assert cursor.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
        writer.execute("INSERT INTO t VALUES (1)")  # committed meanwhile
        assert cursor.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
    writer.close()
    database.close()


@pytest.mark.anyio
async def test_the_runner_sets_up_once_even_when_first_calls_race() -> None:
    setups: list[str] = []
    arrived = threading.Semaphore(0)

    def count_arrival() -> None:  # `refuse` runs in each call's thread, before the setup
        arrived.release()

    def setup() -> None:
        for _ in range(5):  # hold the setup until every call has arrived
            assert arrived.acquire(timeout=10)
        setups.append(threading.current_thread().name)

    runner = WorkerRunner(setup, refuse=count_arrival)
    results: list[int] = []

    async def call(i: int) -> None:
        results.append(await runner.run(lambda: i))

    async with anyio.create_task_group() as group:
        for i in range(5):
            group.start_soon(call, i)
    assert len(setups) == 1
    assert sorted(results) == list(range(5))


@pytest.mark.anyio
async def test_a_failed_setup_is_tried_again_and_refusal_comes_first() -> None:
    attempts: list[int] = []
    closed = False

    def setup() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("disk not ready")

    def refuse() -> None:
        if closed:
            raise ChatMemoryStoreError("closed")

    runner = WorkerRunner(setup, refuse=refuse)
    with pytest.raises(OSError):
        await runner.run(lambda: None)
    assert await runner.run(lambda x: x * 2, 21) == 42
    closed = True
    with pytest.raises(ChatMemoryStoreError):
        await runner.run(lambda: None)
    assert len(attempts) == 2
