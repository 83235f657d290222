"""`PostgresChatMemoryStore`: conversations in PostgreSQL, so any worker can continue one.

Needs the `postgres` extra (psycopg 3), used through blocking connections in anyio worker
threads (asyncio and trio alike), like `PostgresApprovalStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio.to_thread

from ...core.messages import Message
from .._sql.identifiers import check_table_prefix
from .._sql.postgres_pool import ConnectionPool
from .._sql.threads import WorkerRunner
from .._storable import storable
from .store import (
    ChatMemoryStoreError,
    CompactionBoundary,
    check_storable,
    message_json,
    next_seq,
    read_message,
)

T = TypeVar("T")


class PostgresChatMemoryStore:
    """A `ChatMemoryStore` in PostgreSQL (one row per message), shared by many workers.

    `dsn` is a libpq connection string or URL (keep passwords out of code: libpq also
    reads `PGPASSWORD` and `~/.pgpass`). The table `{table_prefix}memory` is created on
    first use, with `{table_prefix}memory_boundaries` for `CompactionAdvisor`'s boundaries
    (appended, never updated). Each `append` is one transaction holding a
    per-conversation advisory lock, so turns appended at once by several workers never
    interleave. Up to `pool_size` idle
    connections are kept. Close it with `close()`, `aclose()` or `async with`.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table_prefix: str = "advisorchain_",
        pool_size: int = 4,
        connect_timeout: float = 10.0,
    ) -> None:
        check_table_prefix(table_prefix, ChatMemoryStoreError)
        self.table = f"{table_prefix}memory"
        self._pool = ConnectionPool(
            dsn, user="PostgresChatMemoryStore", size=pool_size, connect_timeout=connect_timeout
        )
        self._runner = WorkerRunner(self._create_table, refuse=self._refuse_when_closed)

    def __repr__(self) -> str:
        return f"PostgresChatMemoryStore(table={self.table!r})"

    async def __aenter__(self) -> PostgresChatMemoryStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Close the connections; later operations raise `ChatMemoryStoreError`.

        A connection in use by a running operation is closed when the operation ends.
        """
        self._pool.close()

    async def aclose(self) -> None:
        """`close()` in a worker thread."""
        await anyio.to_thread.run_sync(self.close)

    def _refuse_when_closed(self) -> None:
        if self._pool.closed:
            raise ChatMemoryStoreError("the PostgreSQL memory store is closed")

    async def _run(self, conversation_id: str, operation: Callable[[Any], T]) -> T:
        if "\x00" in conversation_id:
            raise ChatMemoryStoreError("a conversation id for PostgreSQL cannot contain NUL")

        def run() -> T:
            with self._pool.transaction() as cursor:
                return operation(cursor)

        return await self._runner.run(run)

    def _create_table(self) -> None:
        with self._pool.transaction() as cursor:
            # Concurrent CREATE TABLE IF NOT EXISTS can collide; workers take turns.
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                " conversation_id TEXT NOT NULL,"
                " seq BIGINT NOT NULL,"
                " role TEXT NOT NULL,"
                " message TEXT NOT NULL,"
                " PRIMARY KEY (conversation_id, seq))"
            )
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table}_boundaries ("
                " conversation_id TEXT NOT NULL,"
                " seq BIGINT NOT NULL,"
                " boundary TEXT NOT NULL,"
                " PRIMARY KEY (conversation_id, seq))"
            )

    def _lock_conversation(self, cursor: Any, conversation_id: str) -> None:
        # Held until the transaction ends. A hash collision only serializes two conversations.
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))",
            (self.table, conversation_id),
        )

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        """Every message stored for the conversation, oldest first."""
        if not storable(conversation_id):
            return ()  # nothing stored can have this id

        def load(cursor: Any) -> list[str]:
            cursor.execute(
                f"SELECT message FROM {self.table} WHERE conversation_id = %s ORDER BY seq",
                (conversation_id,),
            )
            return [row[0] for row in cursor.fetchall()]

        rows = await self._run(conversation_id, load)
        return tuple(read_message(row) for row in rows)

    async def load_tail(self, conversation_id: str, last: int) -> tuple[Message, ...]:
        """The stored system messages and the last `last` other messages, in order."""
        if not storable(conversation_id):
            return ()

        def load(cursor: Any) -> list[str]:
            cursor.execute(
                "SELECT message FROM ("
                f" SELECT seq, message FROM {self.table}"
                "  WHERE conversation_id = %s AND role = 'system'"
                " UNION ALL"
                f" (SELECT seq, message FROM {self.table}"
                "  WHERE conversation_id = %s AND role <> 'system' ORDER BY seq DESC LIMIT %s)"
                ") AS kept ORDER BY seq",
                (conversation_id, conversation_id, max(0, last)),
            )
            return [row[0] for row in cursor.fetchall()]

        rows = await self._run(conversation_id, load)
        return tuple(read_message(row) for row in rows)

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Add `messages` at the end of the conversation, in one transaction."""
        if not messages:
            return
        check_storable(conversation_id)
        encoded = [(m.role, message_json(m)) for m in messages]

        def append(cursor: Any) -> None:
            self._lock_conversation(cursor, conversation_id)
            cursor.execute(
                f"SELECT COALESCE(MAX(seq), -1) FROM {self.table} WHERE conversation_id = %s",
                (conversation_id,),
            )
            (last,) = cursor.fetchone()
            first = next_seq(last, len(encoded))
            cursor.executemany(
                f"INSERT INTO {self.table} (conversation_id, seq, role, message)"
                " VALUES (%s, %s, %s, %s)",
                [
                    (conversation_id, first + i, role, text)
                    for i, (role, text) in enumerate(encoded)
                ],
            )

        await self._run(conversation_id, append)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation (after any append to it that is under way)."""
        if not storable(conversation_id):
            return

        def clear(cursor: Any) -> None:
            self._lock_conversation(cursor, conversation_id)
            cursor.execute(
                f"DELETE FROM {self.table} WHERE conversation_id = %s", (conversation_id,)
            )
            cursor.execute(
                f"DELETE FROM {self.table}_boundaries WHERE conversation_id = %s",
                (conversation_id,),
            )

        await self._run(conversation_id, clear)

    async def save_boundary(self, conversation_id: str, boundary: CompactionBoundary) -> None:
        """Record a compaction boundary as the conversation's latest (the log is not
        touched)."""
        check_storable(conversation_id)
        text = boundary.to_json()

        def save(cursor: Any) -> None:
            self._lock_conversation(cursor, conversation_id)
            cursor.execute(
                f"INSERT INTO {self.table}_boundaries (conversation_id, seq, boundary)"
                f" SELECT %s, COALESCE(MAX(seq), -1) + 1, %s FROM {self.table}_boundaries"
                " WHERE conversation_id = %s",
                (conversation_id, text, conversation_id),
            )

        await self._run(conversation_id, save)

    async def load_boundary(self, conversation_id: str) -> CompactionBoundary | None:
        """The conversation's latest compaction boundary, or `None`."""
        if not storable(conversation_id):
            return None

        def load(cursor: Any) -> str | None:
            cursor.execute(
                f"SELECT boundary FROM {self.table}_boundaries WHERE conversation_id = %s"
                " ORDER BY seq DESC LIMIT 1",
                (conversation_id,),
            )
            row = cursor.fetchone()
            return None if row is None else str(row[0])

        text = await self._run(conversation_id, load)
        return None if text is None else CompactionBoundary.from_json(text)


__all__ = ["PostgresChatMemoryStore"]
