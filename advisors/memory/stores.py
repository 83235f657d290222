"""Where `MemoryAdvisor` keeps conversations: the `ChatMemoryStore` protocol and two stores.

`InMemoryChatMemoryStore` lives in the process (tests, single-process apps);
`SQLiteChatMemoryStore` persists to a file with the standard library's `sqlite3`, run in
anyio worker threads so the event loop never blocks on disk.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

import anyio.to_thread
from pydantic import TypeAdapter
from pydantic_core import PydanticSerializationError

from ...core.errors import AdvisorChainError
from ...core.messages import Message, SystemMessage
from .._storable import storable, without_surrogates

T = TypeVar("T")

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class ChatMemoryStoreError(AdvisorChainError):
    """A memory store cannot do what was asked (closed, bad configuration)."""


@runtime_checkable
class ChatMemoryStore(Protocol):
    """Keeps each conversation's messages, in order, keyed by conversation id.

    `append` adds a whole turn at once: an implementation must write the messages of one
    call atomically (all or none), so two turns never interleave message by message.

    A store may also offer `load_tail(conversation_id, last)`: every stored system message
    and the last `last` other messages, in stored order. `MemoryAdvisor` with
    `max_messages` uses it when present, so long conversations are not read whole.
    """

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        """Every message stored for the conversation, oldest first (empty if unknown)."""
        ...

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Add `messages` at the end of the conversation, atomically."""
        ...

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        ...


class InMemoryChatMemoryStore:
    """A `ChatMemoryStore` in a dict: fast, lost when the process ends."""

    def __init__(self) -> None:
        self._conversations: dict[str, list[Message]] = {}

    def __repr__(self) -> str:
        return f"InMemoryChatMemoryStore(conversations={len(self._conversations)})"

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        """Every message stored for the conversation, oldest first."""
        return tuple(self._conversations.get(conversation_id, ()))

    async def load_tail(self, conversation_id: str, last: int) -> tuple[Message, ...]:
        """The stored system messages and the last `last` other messages, in order."""
        return _tail(self._conversations.get(conversation_id, ()), last)

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Add `messages` at the end of the conversation."""
        if messages:
            self._conversations.setdefault(conversation_id, []).extend(messages)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        self._conversations.pop(conversation_id, None)


def check_storable(conversation_id: str) -> None:
    """Raise `ChatMemoryStoreError` for an id a database cannot hold (NUL, lone surrogate)."""
    if not storable(conversation_id):
        raise ChatMemoryStoreError(
            "the conversation id holds NUL or a lone surrogate, which the store cannot hold"
        )


def message_json(message: Message) -> str:
    """`message` as JSON for a database row; lone surrogates in its text (which UTF-8
    cannot encode) are stored as U+FFFD, as the providers send them."""
    try:
        return _MESSAGE.dump_json(message).decode()
    except PydanticSerializationError:
        data = without_surrogates(_MESSAGE.dump_python(message, mode="json", fallback=str))
        return json.dumps(data, ensure_ascii=False)


class SQLiteChatMemoryStore:
    """A `ChatMemoryStore` in an SQLite database (one row per message).

    `path` is a file (created if missing) or `":memory:"`. One connection is shared, used
    from anyio worker threads one operation at a time; each `append` is one `BEGIN
    IMMEDIATE` transaction, so several processes may share a file. `table` names the
    table (letters, digits and `_`). Close it with `close()` or `async with`.
    """

    def __init__(self, path: str | os.PathLike[str], *, table: str = "advisorchain_memory") -> None:
        if not _IDENTIFIER.fullmatch(table):
            raise ChatMemoryStoreError(f"invalid table name {table!r}: use letters, digits, '_'")
        self.path = os.fspath(path)
        self.table = table
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=30.0
        )
        with self._lock:
            connection = self._connection
            if self.path != ":memory:":
                connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS {table} ("
                " conversation_id TEXT NOT NULL,"
                " seq INTEGER NOT NULL,"
                " role TEXT NOT NULL,"
                " message TEXT NOT NULL,"
                " PRIMARY KEY (conversation_id, seq))"
            )

    def __repr__(self) -> str:
        return f"SQLiteChatMemoryStore(path={self.path!r}, table={self.table!r})"

    async def __aenter__(self) -> SQLiteChatMemoryStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Close the connection; later operations raise `ChatMemoryStoreError`."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def aclose(self) -> None:
        """`close()` in a worker thread (waits for a running operation to end)."""
        await anyio.to_thread.run_sync(self.close)

    async def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                if self._connection is None:
                    raise ChatMemoryStoreError("the SQLite memory store is closed")
                return operation(self._connection)

        return await anyio.to_thread.run_sync(locked)

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        """Every message stored for the conversation, oldest first."""
        if not storable(conversation_id):
            return ()  # nothing stored can have this id

        def load(connection: sqlite3.Connection) -> list[str]:
            rows = connection.execute(
                f"SELECT message FROM {self.table} WHERE conversation_id = ? ORDER BY seq",
                (conversation_id,),
            ).fetchall()
            return [row[0] for row in rows]

        rows = await self._run(load)
        return tuple(_MESSAGE.validate_json(row) for row in rows)

    async def load_tail(self, conversation_id: str, last: int) -> tuple[Message, ...]:
        """The stored system messages and the last `last` other messages, in order."""
        if not storable(conversation_id):
            return ()

        def load(connection: sqlite3.Connection) -> list[tuple[int, str]]:
            system = connection.execute(
                f"SELECT seq, message FROM {self.table}"
                " WHERE conversation_id = ? AND role = 'system'",
                (conversation_id,),
            ).fetchall()
            recent = connection.execute(
                f"SELECT seq, message FROM {self.table}"
                " WHERE conversation_id = ? AND role != 'system' ORDER BY seq DESC LIMIT ?",
                (conversation_id, max(0, last)),
            ).fetchall()
            return sorted(system + recent)

        rows = await self._run(load)
        return tuple(_MESSAGE.validate_json(text) for _, text in rows)

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Add `messages` at the end of the conversation, in one transaction."""
        if not messages:
            return
        check_storable(conversation_id)
        encoded = [(m.role, message_json(m)) for m in messages]

        def append(connection: sqlite3.Connection) -> None:
            connection.execute("BEGIN IMMEDIATE")
            try:
                (last,) = connection.execute(
                    f"SELECT COALESCE(MAX(seq), -1) FROM {self.table} WHERE conversation_id = ?",
                    (conversation_id,),
                ).fetchone()
                connection.executemany(
                    f"INSERT INTO {self.table} (conversation_id, seq, role, message)"
                    " VALUES (?, ?, ?, ?)",
                    [
                        (conversation_id, last + 1 + i, role, text)
                        for i, (role, text) in enumerate(encoded)
                    ],
                )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

        await self._run(append)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        if not storable(conversation_id):
            return

        def clear(connection: sqlite3.Connection) -> None:
            connection.execute(
                f"DELETE FROM {self.table} WHERE conversation_id = ?", (conversation_id,)
            )

        await self._run(clear)


def _tail(messages: Sequence[Message], last: int) -> tuple[Message, ...]:
    others = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)]
    keep = set(others[max(0, len(others) - last) :] if last > 0 else [])
    return tuple(m for i, m in enumerate(messages) if isinstance(m, SystemMessage) or i in keep)


__all__ = [
    "ChatMemoryStore",
    "ChatMemoryStoreError",
    "InMemoryChatMemoryStore",
    "SQLiteChatMemoryStore",
]
