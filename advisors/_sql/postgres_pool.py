"""Blocking psycopg 3 connections for anyio worker threads, shared by the PostgreSQL stores.

The stores use psycopg's blocking connections in `anyio.to_thread` rather than its asyncio
connections, so they work under asyncio and trio. psycopg is the `postgres` extra.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...core.extras import install_hint
from .idle import IdleConnections


def load_psycopg(user: str) -> Any:
    """The `psycopg` module, or an ImportError that names `user` and the `postgres` extra."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"{user} needs psycopg 3: {install_hint('postgres')}") from exc
    return psycopg


class ConnectionPool(IdleConnections[Any]):
    """Autocommit connections to `dsn`, opened on demand; up to `size` idle ones are kept.

    Call its methods from worker threads: connecting and closing block. After `close()`
    idle connections are closed at once and busy ones when they are released.
    """

    def __init__(self, dsn: str, *, user: str, size: int, connect_timeout: float) -> None:
        super().__init__()
        self._module = load_psycopg(user)
        self._dsn = dsn
        self.size = size
        self.connect_timeout = connect_timeout

    def acquire(self) -> Any:
        """An open connection: an idle one, else a new one."""
        with self._lock:
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed:
                    return connection
        return self._module.connect(
            self._dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
        )

    def release(self, connection: Any) -> None:
        """Keep `connection` for reuse if there is room, else close it."""
        with self._lock:
            if not self.closed and len(self._idle) < self.size and not connection.closed:
                self._idle.append(connection)
                return
        connection.close()

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Any]:
        """A cursor inside one transaction on a pooled connection (`write` changes nothing:
        PostgreSQL's row locks and advisory locks serialize writers).

        A connection left inside a failed transaction is closed rather than reused.
        """
        connection = self.acquire()
        healthy = False
        try:
            with connection.transaction(), connection.cursor() as cursor:
                yield cursor
            healthy = True
        finally:
            if healthy or connection.info.transaction_status == 0:
                self.release(connection)
            else:
                connection.close()

    def close_idle(self) -> None:
        """Close the idle connections; the pool stays usable."""
        self._close_idle(refuse_more=False)

    def close(self) -> None:
        """Close the idle connections and stop keeping released ones."""
        self._close_idle(refuse_more=True)


__all__ = ["ConnectionPool", "load_psycopg"]
