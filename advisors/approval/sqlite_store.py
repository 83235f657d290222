"""`SQLiteApprovalStore`: pending approvals in a SQLite file (standard library only)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import anyio.to_thread

from .._sql.identifiers import check_table_prefix
from .._sql.sqlite import SQLiteConnections
from .sql_store import Cursor, SQLApprovalStore
from .store import DEFAULT_CLAIM_TIMEOUT

DEFAULT_PATH = "approvals.db"
"""Where deferred approvals go when an `ApprovalAdvisor` is given no store."""


class SQLiteApprovalStore(SQLApprovalStore):
    """An `ApprovalStore` in a SQLite file, shared by every process that opens the same path.

    Each operation runs in a worker thread, in one transaction on a pooled connection
    (`_sql.sqlite`, shared with the SQLite memory store); write transactions begin with
    `BEGIN IMMEDIATE`, so concurrent claims (threads or processes) are serialized and
    exactly one wins. The database runs in WAL mode. `aclose()` closes idle connections.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        table_prefix: str = "advisorchain_",
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 30.0,
    ) -> None:
        check_table_prefix(table_prefix)
        super().__init__(table_prefix=table_prefix, claim_timeout=claim_timeout, clock=clock)
        self._database = SQLiteConnections(path, busy_timeout=busy_timeout)
        self.path = self._database.path
        self.busy_timeout = busy_timeout

    def __repr__(self) -> str:
        return f"SQLiteApprovalStore({self.path!r})"

    def transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction on a pooled connection."""
        return self._database.transaction(write=write)

    async def aclose(self) -> None:
        """Close the idle connections; the store stays usable."""
        await anyio.to_thread.run_sync(self._database.close_idle)


__all__ = ["DEFAULT_PATH", "SQLiteApprovalStore"]
