"""`PostgresApprovalStore`: pending approvals in PostgreSQL, for several workers.

Needs the `postgres` extra (psycopg 3). It uses psycopg's blocking connections in anyio
worker threads rather than its asyncio connections, so it works under asyncio and trio.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import anyio.to_thread

from .._sql.identifiers import check_table_prefix
from .._sql.postgres_pool import ConnectionPool
from .sql_store import Cursor, SQLApprovalStore
from .store import DEFAULT_CLAIM_TIMEOUT


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
        check_table_prefix(table_prefix)
        super().__init__(table_prefix=table_prefix, claim_timeout=claim_timeout, clock=clock)
        self._pool = ConnectionPool(
            dsn, user="PostgresApprovalStore", size=pool_size, connect_timeout=connect_timeout
        )

    def __repr__(self) -> str:
        return f"PostgresApprovalStore(table_prefix={self.prefix!r})"

    @property
    def pool_size(self) -> int:
        """How many idle connections are kept."""
        return self._pool.size

    @property
    def connect_timeout(self) -> float:
        """Seconds to wait for a new connection."""
        return self._pool.connect_timeout

    def transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction on a pooled connection."""
        return self._pool.transaction(write=write)

    def setup_lock(self, cursor: Cursor) -> None:
        """Serialize table creation between workers starting at once."""
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix + "approvals",))

    async def aclose(self) -> None:
        """Close the idle connections."""
        await anyio.to_thread.run_sync(self._pool.close_idle)


__all__ = ["PostgresApprovalStore"]
