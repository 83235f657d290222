"""`sqlite3` connections to one database, pooled, for the SQLite stores' worker threads.

One strategy for every SQLite store: each operation takes a connection from the pool for
one transaction and gives it back. Write transactions begin with `BEGIN IMMEDIATE`, so
concurrent writers (threads or processes sharing the file) are serialized by SQLite's own
lock, waiting up to `busy_timeout` seconds; reads begin with a deferred `BEGIN`, so a read
of several statements sees one snapshot. A file runs in WAL mode (readers do not block the
writer). `":memory:"` is a database per connection, so its pool holds exactly one
connection, which operations take in turn.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .idle import IdleConnections

MEMORY = ":memory:"


class SQLiteConnections(IdleConnections[sqlite3.Connection]):
    """Connections to the SQLite database at `path`, opened on demand, reused.

    Up to `size` idle connections are kept (a `":memory:"` database has one connection,
    never closed before `close()`). Call the methods from worker threads: connecting,
    waiting for a lock and closing block. After `close()` idle connections are closed at
    once and busy ones when they are released; `transaction` then raises `closed_error`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        size: int = 4,
        closed_error: type[Exception] = RuntimeError,
    ) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout
        self.size = max(1, size)
        self._closed_error = closed_error
        # A memory database lives in its one connection: operations take it in turn.
        self._only: threading.Lock | None = threading.Lock() if self.path == MEMORY else None

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        if self.path != MEMORY:
            connection.execute("PRAGMA journal_mode=WAL")
        return connection

    def _acquire(self) -> sqlite3.Connection:
        with self._lock:
            if self.closed:
                raise self._closed_error(f"the SQLite database {self.path!r} is closed")
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _release(self, connection: sqlite3.Connection, *, healthy: bool) -> None:
        with self._lock:
            # A memory database cannot be reopened: its one connection is always kept.
            keep = self.path == MEMORY or (healthy and len(self._idle) < self.size)
            if keep and not self.closed:
                self._idle.append(connection)
                return
        connection.close()

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[sqlite3.Cursor]:
        """A cursor inside one transaction: committed if the block ends, else rolled back.

        A connection whose rollback fails is closed rather than reused.
        """
        if self._only is not None:
            self._only.acquire()
        try:
            connection = self._acquire()
            healthy = False
            try:
                cursor = connection.cursor()
                cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield cursor
                except BaseException:
                    connection.rollback()
                    raise
                connection.commit()
                healthy = True
            except BaseException:
                healthy = not connection.in_transaction
                raise
            finally:
                self._release(connection, healthy=healthy)
        finally:
            if self._only is not None:
                self._only.release()

    def close_idle(self) -> None:
        """Close the idle connections; the pool stays usable (a memory database keeps its)."""
        if self.path != MEMORY:
            self._close_idle(refuse_more=False)

    def close(self) -> None:
        """Close the idle connections and refuse new transactions."""
        self._close_idle(refuse_more=True)


__all__ = ["MEMORY", "SQLiteConnections"]
