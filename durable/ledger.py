"""The effects-once ledger: a tool with effects runs at most once per call, whatever retries.

Durable engines run steps at least once: a worker that dies after a tool took effect but
before the engine recorded the step runs the step again on another worker. The ledger
closes that gap for tools that are neither `idempotent` nor `read_only`
(`needs_ledger`): before such a tool runs inside a step, the step claims
`(run_id, call_id)`; when it finishes, it records the result (`complete`). A retried step
then finds one of three things (`claim`'s answer):

- `Claimed()`: nobody claimed the call before; this step runs the tool, then `complete`s.
- `Done(result)`: the call ran and its result was recorded; the step answers with that
  result and does not run the tool again.
- `Unknown()`: the call was claimed but never completed (the worker died while the tool
  ran, or after it ran and before `complete`): the tool may or may not have taken effect.
  The step answers with `UNKNOWN_OUTCOME` (outcome `"unknown"`) and does not run it; the
  model reads that it must not assume either way. This is the approval store's guarantee
  (claimed and done marks, `unknown` after a crash) on every engine.

`run_once` does all of it for one tool call; the engines' tool steps call it. A claim
carries the call's fingerprint (`call_fingerprint`: tool name and arguments), so a
different call under an id already used is refused (`LedgerConflict`) rather than
answered with another call's result.

Three backends share the `EffectLedger` protocol: `MemoryLedger` (one process, for
tests), `SQLiteLedger` (processes sharing a file) and `PostgresLedger` (workers sharing a
server; the `postgres` extra). The SQL ones use the stores' pooled blocking connections in
worker threads (`advisors._sql`), so they work under asyncio and trio; a claim is one
`INSERT ... ON CONFLICT DO NOTHING`, so of two racing claims (threads, processes, hosts)
exactly one gets `Claimed()`. Their table is `{prefix}effects`, created on first use.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Protocol, TypeAlias, TypeVar, cast, get_args, runtime_checkable

import anyio.to_thread

from ..advisors._sql.identifiers import check_table_prefix
from ..advisors._sql.postgres_pool import ConnectionPool
from ..advisors._sql.sqlite import SQLiteConnections
from ..advisors._sql.threads import WorkerRunner
from ..advisors._storable import storable
from ..advisors.approval.sql_store import Cursor
from ..advisors.approval.store import dump_result, load_result
from ..advisors.approval.types import StoredResult
from ..core.errors import AdvisorChainError
from ..core.invocation import ToolOutcome, ToolResult
from ..core.tools import Tool
from .steps import UNKNOWN_OUTCOME, call_fingerprint
from .steps import Claim as StepClaim

T = TypeVar("T")


class LedgerError(AdvisorChainError):
    """The ledger cannot answer: an id it cannot hold, a completion without a claim, a
    damaged row."""


class LedgerConflict(LedgerError):
    """A claim's fingerprint differs from the one recorded under the same `(run_id,
    call_id)`: another call reuses the ids, and it is neither run nor given the first
    call's result."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """The caller owns the call: run it, then `complete` it."""


@dataclass(frozen=True, slots=True)
class Done:
    """The call ran; `result` is what it answered (do not run it again)."""

    result: StoredResult


@dataclass(frozen=True, slots=True)
class Unknown:
    """The call was claimed and never completed: it may or may not have taken effect."""


Claim: TypeAlias = Claimed | Done | Unknown
"""What `EffectLedger.claim` answers."""


@runtime_checkable
class EffectLedger(Protocol):
    """Claims and results of tool calls with effects, keyed by `(run_id, call_id)`.

    `run_id` names one durable run (a workflow and its turn); `call_id` a tool call in it.
    """

    async def claim(self, run_id: str, call_id: str, fingerprint: str) -> Claim:
        """Claim the call atomically: `Claimed()` for the first claim, then `Done(result)`
        once it was completed, else `Unknown()`. `LedgerConflict` if `fingerprint`
        differs from the first claim's."""
        ...

    async def complete(self, run_id: str, call_id: str, result: StoredResult) -> StoredResult:
        """Record the claimed call's result and return what the ledger holds: `result`, or
        the result recorded first when the call was completed already (first writer wins).
        `LedgerError` if the call was never claimed."""
        ...

    async def release(self, run_id: str, call_id: str) -> None:
        """Forget a claim that has no result (the call deferred: it took no effect yet),
        so the call can be claimed again. A completed call stays completed."""
        ...

    async def aclose(self) -> None:
        """Close idle connections; the ledger stays usable."""
        ...


# -- one tool call ---------------------------------------------------------------------


def needs_ledger(tool: Tool) -> bool:
    """Whether a call of `tool` goes through the ledger: it is neither `idempotent` nor
    `read_only` (those may simply run again)."""
    return not (tool.idempotent or tool.read_only)


def stored(result: ToolResult) -> StoredResult:
    """What the ledger records of a result: its content and outcome, as the model reads it."""
    return StoredResult(content=result.content, outcome=result.outcome)


def restored(result: StoredResult) -> ToolResult:
    """The `ToolResult` a recorded result answers with."""
    return ToolResult(content=result.content, outcome=_outcome(result.outcome))


async def run_once(
    ledger: EffectLedger,
    run_id: str,
    call_id: str,
    fingerprint: str,
    run: Callable[[], Awaitable[ToolResult]],
) -> ToolResult:
    """Run a call with effects at most once: claim it, `run()` it if the claim is ours,
    record the result; a recorded result answers without running; a claim that was never
    completed answers `UNKNOWN_OUTCOME` without recording it (the claim's owner, if it is
    alive after all, records the real result: first writer wins, and only the owner
    writes).

    A deferred result releases the claim (the call took no effect yet; its resume runs it).
    If `run()` raises, the claim stays: a retry reads `unknown`, since the call may have
    taken effect before it failed.
    """
    claim = await ledger.claim(run_id, call_id, fingerprint)
    if isinstance(claim, Done):
        return restored(claim.result)
    if isinstance(claim, Unknown):
        # not recorded: if the claim's owner is alive after all, its result is the truth
        return ToolResult(content=UNKNOWN_OUTCOME, outcome="unknown")
    result = await run()
    if result.outcome == "deferred":
        await ledger.release(run_id, call_id)
        return result
    kept = await ledger.complete(run_id, call_id, stored(result))
    if kept.outcome == result.outcome and kept.content == result.content:
        return result  # keeps `value`, `metadata` and the rest for the links above
    return restored(kept)


def _outcome(text: str) -> ToolOutcome:
    for outcome in get_args(ToolOutcome):
        if outcome == text:
            return cast(ToolOutcome, outcome)
    return "unknown"


def _check_ids(run_id: str, call_id: str) -> None:
    for name, value in (("run_id", run_id), ("call_id", call_id)):
        if not isinstance(value, str) or not value or not storable(value):
            raise LedgerError(f"{name} must be a non-empty string without NUL or lone surrogates")


class StepLedger:
    """An `EffectLedger` seen as the step seam's `steps.EffectsLedger` (what
    `steps.StepExecutor` takes): `claim(run_id, call_id)` answers a `steps.Claim` whose
    status is `claimed`, `done` (with the step output recorded) or `unknown`;
    `complete(run_id, call_id, result)` records a step output's JSON.

    A claim is bound to the call's fingerprint (`call_fingerprint` of the tool's name and
    arguments): a different call under an id already claimed answers `conflict`, never
    the other call's recorded result.
    """

    def __init__(self, ledger: EffectLedger) -> None:
        if not isinstance(ledger, EffectLedger):
            raise TypeError(f"ledger must be an EffectLedger, not {type(ledger).__name__}")
        self.ledger = ledger

    def __repr__(self) -> str:
        return f"StepLedger({self.ledger!r})"

    async def claim(self, run_id: str, call_id: str, fingerprint: str) -> StepClaim:
        """The seam's `Claim` for this call (see `EffectLedger.claim`)."""
        try:
            found = await self.ledger.claim(run_id, call_id, fingerprint)
        except LedgerConflict:
            return StepClaim(status="conflict")
        if isinstance(found, Claimed):
            return StepClaim(status="claimed")
        if isinstance(found, Done):
            return StepClaim(status="done", result=str(found.result.content))
        return StepClaim(status="unknown")

    async def complete(self, run_id: str, call_id: str, result: str) -> None:
        """Record the step output's JSON `result` (first writer wins)."""
        await self.ledger.complete(run_id, call_id, StoredResult(content=result, outcome="ok"))


# -- in memory -------------------------------------------------------------------------


@dataclass
class _Entry:
    fingerprint: str
    result: StoredResult | None = None


class MemoryLedger:
    """An `EffectLedger` in this process's memory: for tests and single-process runs
    (a worker that dies takes it along, so it guards retries, not crashes)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryLedger({len(self._entries)} calls)"

    async def claim(self, run_id: str, call_id: str, fingerprint: str) -> Claim:
        """See `EffectLedger.claim`."""
        _check_ids(run_id, call_id)
        with self._lock:
            entry = self._entries.get((run_id, call_id))
            if entry is None:
                self._entries[(run_id, call_id)] = _Entry(fingerprint)
                return Claimed()
        return _answer(run_id, call_id, fingerprint, entry.fingerprint, entry.result)

    async def complete(self, run_id: str, call_id: str, result: StoredResult) -> StoredResult:
        """See `EffectLedger.complete`."""
        _check_ids(run_id, call_id)
        with self._lock:
            entry = self._entries.get((run_id, call_id))
            if entry is None:
                raise LedgerError(f"call {call_id!r} of run {run_id!r} was never claimed")
            if entry.result is None:
                entry.result = result
            return entry.result

    async def release(self, run_id: str, call_id: str) -> None:
        """See `EffectLedger.release`."""
        with self._lock:
            entry = self._entries.get((run_id, call_id))
            if entry is not None and entry.result is None:
                del self._entries[(run_id, call_id)]

    async def aclose(self) -> None:
        """Nothing to close."""


def _answer(
    run_id: str, call_id: str, fingerprint: str, recorded: str, result: StoredResult | None
) -> Claim:
    if recorded != fingerprint:
        raise LedgerConflict(
            f"call {call_id!r} of run {run_id!r} was claimed before with other arguments "
            "or another tool"
        )
    return Unknown() if result is None else Done(result)


# -- SQL -------------------------------------------------------------------------------


class SQLLedger:
    """An `EffectLedger` over SQL; `SQLiteLedger` and `PostgresLedger` supply connections.

    One table, `{prefix}effects`: a row per claimed call (fingerprint, state `claimed` or
    `done`, result as JSON, times). Each operation is one short transaction in a worker
    thread.
    """

    placeholder = "?"

    def __init__(self, *, table_prefix: str, clock: Callable[[], float] = time.time) -> None:
        self.prefix = check_table_prefix(table_prefix, LedgerError)
        self.clock = clock
        self._runner = WorkerRunner(self._create_table)

    def transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction."""
        raise NotImplementedError

    def setup_lock(self, cursor: Cursor) -> None:
        """Serialize concurrent table creation (PostgreSQL); nothing for SQLite."""

    async def _run(self, fn: Callable[[], T]) -> T:
        return await self._runner.run_checked(fn, LedgerError, "the effects ledger")

    def _sql(self, text: str) -> str:
        return text.replace("{p}", self.prefix).replace("?", self.placeholder)

    def _create_table(self) -> None:
        with self.transaction(write=True) as cur:
            self.setup_lock(cur)
            cur.execute(
                self._sql(
                    """CREATE TABLE IF NOT EXISTS {p}effects (
                    run_id TEXT NOT NULL, call_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
                    state TEXT NOT NULL, result TEXT, claimed_at DOUBLE PRECISION NOT NULL,
                    completed_at DOUBLE PRECISION, PRIMARY KEY (run_id, call_id))"""
                )
            )

    async def claim(self, run_id: str, call_id: str, fingerprint: str) -> Claim:
        """See `EffectLedger.claim`."""
        _check_ids(run_id, call_id)
        if not storable(fingerprint):
            raise LedgerError("a fingerprint must hold no NUL or lone surrogates")
        return await self._run(partial(self._claim, run_id, call_id, fingerprint))

    async def complete(self, run_id: str, call_id: str, result: StoredResult) -> StoredResult:
        """See `EffectLedger.complete`."""
        _check_ids(run_id, call_id)
        return await self._run(partial(self._complete, run_id, call_id, result))

    async def release(self, run_id: str, call_id: str) -> None:
        """See `EffectLedger.release`."""
        _check_ids(run_id, call_id)
        await self._run(partial(self._release, run_id, call_id))

    async def aclose(self) -> None:
        """Close idle connections (the dialects do)."""

    def _claim(self, run_id: str, call_id: str, fingerprint: str) -> Claim:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql(
                    "INSERT INTO {p}effects (run_id, call_id, fingerprint, state, claimed_at) "
                    "VALUES (?, ?, ?, 'claimed', ?) ON CONFLICT (run_id, call_id) DO NOTHING"
                ),
                (run_id, call_id, fingerprint, self.clock()),
            )
            if cur.rowcount == 1:
                return Claimed()
            recorded, result = self._read(cur, run_id, call_id)
        return _answer(run_id, call_id, fingerprint, recorded, result)

    def _read(self, cur: Cursor, run_id: str, call_id: str) -> tuple[str, StoredResult | None]:
        cur.execute(
            self._sql(
                "SELECT fingerprint, state, result FROM {p}effects WHERE run_id = ? AND call_id = ?"
            ),
            (run_id, call_id),
        )
        row = cur.fetchone()
        if row is None:
            raise LedgerError(f"call {call_id!r} of run {run_id!r} was never claimed")
        fingerprint, state, result = row
        return fingerprint, load_result(result) if state == "done" else None

    def _complete(self, run_id: str, call_id: str, result: StoredResult) -> StoredResult:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql(
                    "UPDATE {p}effects SET state = 'done', result = ?, completed_at = ? "
                    "WHERE run_id = ? AND call_id = ? AND state = 'claimed'"
                ),
                (dump_result(result), self.clock(), run_id, call_id),
            )
            if cur.rowcount == 1:
                return result
            _, kept = self._read(cur, run_id, call_id)
        assert kept is not None  # not `claimed`, so `done`
        return kept

    def _release(self, run_id: str, call_id: str) -> None:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql(
                    "DELETE FROM {p}effects WHERE run_id = ? AND call_id = ? AND state = 'claimed'"
                ),
                (run_id, call_id),
            )


class SQLiteLedger(SQLLedger):
    """An `EffectLedger` in a SQLite file, shared by every process that opens the same path
    (WAL mode; writes begin with `BEGIN IMMEDIATE`, so racing claims are serialized)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table_prefix: str = "advisorchain_",
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 30.0,
    ) -> None:
        super().__init__(table_prefix=table_prefix, clock=clock)
        self._database = SQLiteConnections(path, busy_timeout=busy_timeout)
        self.path = self._database.path

    def __repr__(self) -> str:
        return f"SQLiteLedger({self.path!r})"

    def transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction on a pooled connection."""
        return self._database.transaction(write=write)

    async def aclose(self) -> None:
        """Close the idle connections; the ledger stays usable."""
        await anyio.to_thread.run_sync(self._database.close_idle)


class PostgresLedger(SQLLedger):
    """An `EffectLedger` in PostgreSQL, for workers on several hosts (the `postgres` extra).

    `dsn` is a libpq connection string or URL (keep passwords out of code: libpq also reads
    `PGPASSWORD` and `~/.pgpass`). Racing claims meet at the primary key: the second
    `INSERT ... ON CONFLICT DO NOTHING` waits for the first to commit and inserts nothing.
    """

    placeholder = "%s"

    def __init__(
        self,
        dsn: str,
        *,
        table_prefix: str = "advisorchain_",
        clock: Callable[[], float] = time.time,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(table_prefix=table_prefix, clock=clock)
        self._pool = ConnectionPool(
            dsn, user="PostgresLedger", size=pool_size, connect_timeout=connect_timeout
        )

    def __repr__(self) -> str:
        return f"PostgresLedger(table_prefix={self.prefix!r})"

    def transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction on a pooled connection."""
        return self._pool.transaction(write=write)

    def setup_lock(self, cursor: Cursor) -> None:
        """Serialize table creation between workers starting at once."""
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix + "effects",))

    async def aclose(self) -> None:
        """Close the idle connections."""
        await anyio.to_thread.run_sync(self._pool.close_idle)


__all__ = [
    "UNKNOWN_OUTCOME",
    "Claim",
    "Claimed",
    "Done",
    "EffectLedger",
    "LedgerConflict",
    "LedgerError",
    "MemoryLedger",
    "PostgresLedger",
    "SQLLedger",
    "SQLiteLedger",
    "StepLedger",
    "StoredResult",
    "Unknown",
    "call_fingerprint",
    "needs_ledger",
    "restored",
    "run_once",
    "stored",
]
