"""`SQLiteChatMemoryStore`: conversations in a SQLite file (standard library only).

The blocking `sqlite3` calls run in anyio worker threads (`_sql.threads`), on pooled
connections (`_sql.sqlite`), so the event loop never blocks on disk.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import anyio.to_thread

from ...core.messages import Message
from .._sql.identifiers import check_table_name
from .._sql.sqlite import SQLiteConnections
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


class SQLiteChatMemoryStore:
    """A `ChatMemoryStore` in an SQLite database (one row per message).

    `path` is a file (created if missing) or `":memory:"`. Each operation runs in a worker
    thread on a pooled connection, in one transaction; each `append` is one `BEGIN
    IMMEDIATE` transaction, so several processes may share a file. `table` names the
    table (letters, digits and `_`), created on first use, with `{table}_boundaries`
    beside it for `CompactionAdvisor`'s boundaries (appended, never updated). Close it
    with `close()` or `async with`; later operations raise `ChatMemoryStoreError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "advisorchain_memory",
        busy_timeout: float = 30.0,
    ) -> None:
        self.table = check_table_name(table, ChatMemoryStoreError)
        self._database = SQLiteConnections(
            path, busy_timeout=busy_timeout, closed_error=ChatMemoryStoreError
        )
        self.path = self._database.path
        self._runner = WorkerRunner(self._create_table)

    def __repr__(self) -> str:
        return f"SQLiteChatMemoryStore(path={self.path!r}, table={self.table!r})"

    async def __aenter__(self) -> SQLiteChatMemoryStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Close the connections; later operations raise `ChatMemoryStoreError`.

        A connection in use by a running operation is closed when the operation ends.
        """
        self._database.close()

    async def aclose(self) -> None:
        """`close()` in a worker thread."""
        await anyio.to_thread.run_sync(self.close)

    def _create_table(self) -> None:
        with self._database.transaction() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                " conversation_id TEXT NOT NULL,"
                " seq INTEGER NOT NULL,"
                " role TEXT NOT NULL,"
                " message TEXT NOT NULL,"
                " PRIMARY KEY (conversation_id, seq))"
            )
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table}_boundaries ("
                " conversation_id TEXT NOT NULL,"
                " seq INTEGER NOT NULL,"
                " boundary TEXT NOT NULL,"
                " PRIMARY KEY (conversation_id, seq))"
            )

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        """Every message stored for the conversation, oldest first."""
        if not storable(conversation_id):
            return ()  # nothing stored can have this id

        def load() -> list[str]:
            with self._database.transaction(write=False) as cursor:
                rows = cursor.execute(
                    f"SELECT message FROM {self.table} WHERE conversation_id = ? ORDER BY seq",
                    (conversation_id,),
                ).fetchall()
            return [row[0] for row in rows]

        rows = await self._runner.run(load)
        return tuple(read_message(row) for row in rows)

    async def load_tail(self, conversation_id: str, last: int) -> tuple[Message, ...]:
        """The stored system messages and the last `last` other messages, in order."""
        if not storable(conversation_id):
            return ()

        def load() -> list[tuple[int, str]]:
            with self._database.transaction(write=False) as cursor:
                system = cursor.execute(
                    f"SELECT seq, message FROM {self.table}"
                    " WHERE conversation_id = ? AND role = 'system'",
                    (conversation_id,),
                ).fetchall()
                recent = cursor.execute(
                    f"SELECT seq, message FROM {self.table}"
                    " WHERE conversation_id = ? AND role != 'system' ORDER BY seq DESC LIMIT ?",
                    (conversation_id, max(0, last)),
                ).fetchall()
            rows = system + recent
            if any(type(seq) is not int for seq, _ in rows):
                raise ChatMemoryStoreError("the conversation's stored sequence numbers are damaged")
            return sorted(rows)

        rows = await self._runner.run(load)
        return tuple(read_message(text) for _, text in rows)

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Add `messages` at the end of the conversation, in one transaction."""
        if not messages:
            return
        check_storable(conversation_id)
        encoded = [(m.role, message_json(m)) for m in messages]

        def append() -> None:
            with self._database.transaction(write=True) as cursor:
                (last,) = cursor.execute(
                    f"SELECT COALESCE(MAX(seq), -1) FROM {self.table} WHERE conversation_id = ?",
                    (conversation_id,),
                ).fetchone()
                first = next_seq(last, len(encoded))
                cursor.executemany(
                    f"INSERT INTO {self.table} (conversation_id, seq, role, message)"
                    " VALUES (?, ?, ?, ?)",
                    [
                        (conversation_id, first + i, role, text)
                        for i, (role, text) in enumerate(encoded)
                    ],
                )

        await self._runner.run(append)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        if not storable(conversation_id):
            return

        def clear() -> None:
            with self._database.transaction(write=True) as cursor:
                cursor.execute(
                    f"DELETE FROM {self.table} WHERE conversation_id = ?", (conversation_id,)
                )
                cursor.execute(
                    f"DELETE FROM {self.table}_boundaries WHERE conversation_id = ?",
                    (conversation_id,),
                )

        await self._runner.run(clear)

    async def save_boundary(self, conversation_id: str, boundary: CompactionBoundary) -> None:
        """Record a compaction boundary as the conversation's latest (the log is not
        touched)."""
        check_storable(conversation_id)
        text = boundary.to_json()

        def save() -> None:
            with self._database.transaction(write=True) as cursor:
                cursor.execute(
                    f"INSERT INTO {self.table}_boundaries (conversation_id, seq, boundary)"
                    f" SELECT ?, COALESCE(MAX(seq), -1) + 1, ? FROM {self.table}_boundaries"
                    " WHERE conversation_id = ?",
                    (conversation_id, text, conversation_id),
                )

        await self._runner.run(save)

    async def load_boundary(self, conversation_id: str) -> CompactionBoundary | None:
        """The conversation's latest compaction boundary, or `None`."""
        if not storable(conversation_id):
            return None

        def load() -> str | None:
            with self._database.transaction(write=False) as cursor:
                row = cursor.execute(
                    f"SELECT boundary FROM {self.table}_boundaries WHERE conversation_id = ?"
                    " ORDER BY seq DESC LIMIT 1",
                    (conversation_id,),
                ).fetchone()
            return None if row is None else str(row[0])

        text = await self._runner.run(load)
        return None if text is None else CompactionBoundary.from_json(text)


__all__ = ["SQLiteChatMemoryStore"]
