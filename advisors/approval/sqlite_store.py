"""`SQLiteApprovalStore`: pending approvals in a SQLite file (standard library only)."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .sql_store import Cursor, SQLApprovalStore
from .store import DEFAULT_CLAIM_TIMEOUT

DEFAULT_PATH = "approvals.db"
"""Where deferred approvals go when an `ApprovalAdvisor` is given no store."""


class SQLiteApprovalStore(SQLApprovalStore):
    """An `ApprovalStore` in a SQLite file, shared by every process that opens the same path.

    Each operation opens its own connection in a worker thread; write transactions begin
    with `BEGIN IMMEDIATE`, so concurrent claims (threads or processes) are serialized and
    exactly one wins. The database runs in WAL mode.
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
        super().__init__(table_prefix=table_prefix, claim_timeout=claim_timeout, clock=clock)
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout

    def __repr__(self) -> str:
        return f"SQLiteApprovalStore({self.path!r})"

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Cursor]:
        """A cursor inside one transaction on a fresh connection."""
        connection = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        try:
            cursor = connection.cursor()
            if not self._ready:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield cursor
            except BaseException:
                connection.rollback()
                raise
            connection.commit()
        finally:
            connection.close()

    async def aclose(self) -> None:
        """Nothing to release: connections live for one operation."""
