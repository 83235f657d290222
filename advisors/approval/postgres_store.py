"""`PostgresApprovalStore`: pending approvals in PostgreSQL, for several workers.

Needs the `postgres` extra (psycopg 3). It uses psycopg's blocking connections in anyio
worker threads rather than its asyncio connections, so it works under asyncio and trio.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio.to_thread

from .sql_store import Cursor, SQLApprovalStore
from .store import DEFAULT_CLAIM_TIMEOUT


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "PostgresApprovalStore needs psycopg 3: pip install 'advisorchain[postgres]'"
        ) from exc
    return psycopg


class PostgresApprovalStore(SQLApprovalStore):
    """An `ApprovalStore` in PostgreSQL: many workers, one source of truth.

    `dsn` is a libpq connection string or URL (keep passwords out of code: libpq also
    reads `PGPASSWORD` and `~/.pgpass`). Claims lock the approval's row with
    `SELECT ... FOR UPDATE`, so two workers resuming the same approval execute its calls
    once. Up to `pool_size` idle connections are kept; `aclose()` closes them.
    """

    placeholder = "%s"
    lock_row = " FOR UPDATE"
    serial = "BIGSERIAL PRIMARY KEY"

    def __init__(
        self,
        dsn: str,
        *,
        table_prefix: str = "advisorchain_",
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        clock: Callable[[], float] = time.time,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(table_prefix=table_prefix, claim_timeout=claim_timeout, clock=clock)
        self._module = _psycopg()
        self._dsn = dsn
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._idle: list[Any] = []
        self._pool_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PostgresApprovalStore(table_prefix={self.prefix!r})"

    def _acquire(self) -> Any:
        with self._pool_lock:
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed:
                    return connection
        return self._module.connect(
            self._dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
        )

    def _release(self, connection: Any) -> None:
        with self._pool_lock:
            if len(self._idle) < self.pool_size and not connection.closed:
                self._idle.append(connection)
                return
        connection.close()

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Cursor]:
        """A cursor inside one transaction on a pooled connection."""
        connection = self._acquire()
        healthy = False
        try:
            with connection.transaction(), connection.cursor() as cursor:
                yield cursor
            healthy = True
        finally:
            if healthy or connection.info.transaction_status == 0:
                self._release(connection)
            else:
                connection.close()

    def setup_lock(self, cursor: Cursor) -> None:
        """Serialize table creation between workers starting at once."""
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix + "approvals",))

    async def aclose(self) -> None:
        """Close the idle connections."""
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            await anyio.to_thread.run_sync(connection.close)
