"""The SQL behind the SQLite and PostgreSQL approval stores (one implementation, two dialects).

Each operation is one short transaction on a blocking DB-API connection, run in a worker
thread (`anyio.to_thread`), so the stores work under asyncio and trio alike. A claim
locks the approval's row first (`BEGIN IMMEDIATE` in SQLite, `SELECT ... FOR UPDATE` in
PostgreSQL), so of two concurrent claims exactly one sees `pending`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Protocol, TypeVar

from ...core.checks import require_callable, require_number
from .._sql.identifiers import check_table_prefix
from .._sql.threads import WorkerRunner
from .._storable import storable
from .store import (
    DEFAULT_CLAIM_TIMEOUT,
    check_claimable,
    check_record,
    dump_decision,
    dump_result,
    dump_state,
    load_state,
    pending_call,
)
from .types import (
    ApprovalAlreadyResolved,
    ApprovalNotFound,
    Approve,
    AuditRecord,
    InvalidApprovalRecord,
    PendingRecord,
    Reject,
    StandingRule,
    StoredResult,
    json_data,
    rule_audit,
)

T = TypeVar("T")


class Cursor(Protocol):
    """The part of a DB-API cursor the stores use."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SQLApprovalStore:
    """An `ApprovalStore` over SQL; subclasses supply connections and dialect details.

    Tables are created on first use: `{prefix}approvals`, `{prefix}approval_calls`,
    `{prefix}approval_audit`, `{prefix}approval_rules`.
    """

    placeholder = "?"
    lock_row = ""
    serial = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(
        self,
        *,
        table_prefix: str = "advisorchain_",
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.prefix = check_table_prefix(table_prefix)
        require_number(claim_timeout, "claim_timeout", positive=True)
        require_callable(clock, "clock", "clock() -> seconds since the epoch")
        self.claim_timeout = claim_timeout
        self.clock = clock
        self._runner = WorkerRunner(self._create_tables)

    # -- supplied by the dialects --------------------------------------------------------

    def transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction; `write` transactions are serialized."""
        raise NotImplementedError

    def setup_lock(self, cursor: Cursor) -> None:
        """Serialize concurrent table creation (PostgreSQL); nothing for SQLite."""

    # -- the async API -------------------------------------------------------------------

    async def _run(self, fn: Callable[[], T]) -> T:
        return await self._runner.run_checked(fn, InvalidApprovalRecord, "the approval store")

    async def save(self, record: PendingRecord) -> None:
        """Store a new pending approval (`InvalidApprovalRecord` if it cannot be held)."""
        check_record(record)
        ids = [record.id, record.conversation_id, *(c.call.id for c in record.calls)]
        if not all(storable(i) for i in ids):
            raise InvalidApprovalRecord(
                f"approval {record.id!r}: an id holds NUL or a lone surrogate, which the "
                "database cannot store"
            )
        try:
            await self._run(partial(self._save, record))
        except Exception as exc:
            # two workers saving one id at once: the second insert breaks the primary key
            if not any(c.__name__ == "IntegrityError" for c in type(exc).__mro__):
                raise
            failure = InvalidApprovalRecord(f"approval {record.id!r} already exists")
        else:
            return
        raise failure

    async def get(self, approval_id: str) -> PendingRecord | None:
        """The approval with this id, or `None`."""
        if not storable(approval_id):
            return None  # nothing stored can have this id
        return await self._run(partial(self._get_tx, approval_id))

    async def waiting(self, conversation_id: str | None = None) -> list[PendingRecord]:
        """Approvals still waiting for decisions, oldest first."""
        if not storable(conversation_id):
            return []
        return await self._run(partial(self._waiting, conversation_id))

    async def claim(
        self,
        approval_id: str,
        token: str,
        decisions: Mapping[str, Approve | Reject],
        audit: Sequence[AuditRecord],
    ) -> PendingRecord:
        """Atomically claim the approval (see `ApprovalStore.claim`)."""
        if not storable(approval_id):
            raise ApprovalNotFound(f"no pending approval with id {approval_id!r}")
        return await self._run(partial(self._claim, approval_id, token, decisions, audit))

    async def start_call(self, approval_id: str, call_id: str, token: str) -> bool:
        """Mark an approved call as started; `False` if it was started before."""
        return await self._run(partial(self._start_call, approval_id, call_id, token))

    async def finish_call(
        self, approval_id: str, call_id: str, token: str, result: StoredResult
    ) -> None:
        """Store a call's result."""
        await self._run(partial(self._finish_call, approval_id, call_id, token, result))

    async def complete(self, approval_id: str, token: str) -> None:
        """Mark the approval resolved."""
        await self._run(partial(self._complete, approval_id, token))

    async def record(self, audit: Sequence[AuditRecord]) -> None:
        """Append audit records."""
        await self._run(partial(self._record_tx, audit))

    async def audit(self, approval_id: str | None = None) -> list[AuditRecord]:
        """Audit records, oldest first, of one approval or of all."""
        if not storable(approval_id):
            return []
        return await self._run(partial(self._audit, approval_id))

    async def add_rule(self, rule: StandingRule, audit: AuditRecord) -> None:
        """Store a standing rule and its audit record, in one transaction."""
        if not (storable(rule.id) and storable(rule.conversation_id)):
            raise InvalidApprovalRecord(
                "a standing rule's conversation id holds NUL or a lone surrogate"
            )
        await self._run(partial(self._add_rule, rule, audit))

    async def rules(self, conversation_id: str) -> list[StandingRule]:
        """The conversation's rules that are not revoked, oldest first."""
        if not storable(conversation_id):
            return []
        return await self._run(partial(self._rules, conversation_id))

    async def revoke_rule(self, rule_id: str, by: str, at: float) -> StandingRule | None:
        """Revoke a rule and audit it; `None` if unknown or already revoked."""
        if not storable(rule_id):
            return None
        return await self._run(partial(self._revoke_rule, rule_id, by, at))

    # -- the SQL -------------------------------------------------------------------------

    def _sql(self, text: str) -> str:
        return text.replace("{p}", self.prefix).replace("?", self.placeholder)

    def _create_tables(self) -> None:
        with self.transaction(write=True) as cur:
            self.setup_lock(cur)
            for statement in (
                """CREATE TABLE IF NOT EXISTS {p}approvals (
                    id TEXT PRIMARY KEY, status TEXT NOT NULL, conversation_id TEXT,
                    created_at DOUBLE PRECISION NOT NULL, state TEXT NOT NULL,
                    claim_token TEXT, claimed_until DOUBLE PRECISION,
                    completed_at DOUBLE PRECISION)""",
                """CREATE TABLE IF NOT EXISTS {p}approval_calls (
                    approval_id TEXT NOT NULL, call_id TEXT NOT NULL, position INTEGER NOT NULL,
                    tool_name TEXT NOT NULL, description TEXT NOT NULL, arguments TEXT NOT NULL,
                    details TEXT NOT NULL, state TEXT NOT NULL, decision TEXT, result TEXT,
                    PRIMARY KEY (approval_id, call_id))""",
                f"""CREATE TABLE IF NOT EXISTS {{p}}approval_audit (
                    seq {self.serial}, approval_id TEXT NOT NULL, call_id TEXT NOT NULL,
                    tool_name TEXT NOT NULL, decision TEXT NOT NULL, decided_by TEXT NOT NULL,
                    decided_at DOUBLE PRECISION NOT NULL, arguments TEXT NOT NULL,
                    edited_arguments TEXT, reason TEXT, conversation_id TEXT)""",
                """CREATE TABLE IF NOT EXISTS {p}approval_rules (
                    id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, tool_name TEXT NOT NULL,
                    arguments TEXT, created_by TEXT NOT NULL,
                    created_at DOUBLE PRECISION NOT NULL, revoked_at DOUBLE PRECISION,
                    revoked_by TEXT)""",
            ):
                cur.execute(self._sql(statement))

    def _save(self, record: PendingRecord) -> None:
        with self.transaction(write=True) as cur:
            cur.execute(self._sql("SELECT 1 FROM {p}approvals WHERE id = ?"), (record.id,))
            if cur.fetchone() is not None:
                raise InvalidApprovalRecord(f"approval {record.id!r} already exists")
            cur.execute(
                self._sql(
                    "INSERT INTO {p}approvals (id, status, conversation_id, created_at, state) "
                    "VALUES (?, ?, ?, ?, ?)"
                ),
                (
                    record.id,
                    record.status,
                    record.conversation_id,
                    record.created_at,
                    dump_state(record),
                ),
            )
            for position, c in enumerate(record.calls):
                cur.execute(
                    self._sql(
                        "INSERT INTO {p}approval_calls (approval_id, call_id, position, "
                        "tool_name, description, arguments, details, state, decision, result) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    ),
                    (
                        record.id,
                        c.call.id,
                        position,
                        c.call.name,
                        c.call.description,
                        json.dumps(json_data(c.call.arguments)),
                        json.dumps(json_data(c.call.details)),
                        c.state,
                        dump_decision(c.decision),
                        dump_result(c.result),
                    ),
                )

    def _get_tx(self, approval_id: str) -> PendingRecord | None:
        with self.transaction(write=False) as cur:
            return self._get(cur, approval_id)

    def _get(self, cur: Cursor, approval_id: str) -> PendingRecord | None:
        cur.execute(
            self._sql(
                "SELECT status, conversation_id, created_at, state, claimed_until "
                "FROM {p}approvals WHERE id = ?"
            ),
            (approval_id,),
        )
        row = cur.fetchone()
        if row is None:
            return None
        status, conversation_id, created_at, state, claimed_until = row
        round_calls = load_state(state)
        cur.execute(
            self._sql(
                "SELECT call_id, tool_name, description, arguments, details, state, decision, "
                "result FROM {p}approval_calls WHERE approval_id = ? ORDER BY position"
            ),
            (approval_id,),
        )
        calls = tuple(pending_call(*r) for r in cur.fetchall())
        return PendingRecord(
            id=approval_id,
            status=status,
            conversation_id=conversation_id,
            created_at=created_at,
            calls=calls,
            round=round_calls,
            claimed_until=claimed_until,
        )

    def _waiting(self, conversation_id: str | None) -> list[PendingRecord]:
        query = "SELECT id FROM {p}approvals WHERE status = 'pending'"
        params: tuple[Any, ...] = ()
        if conversation_id is not None:
            query += " AND conversation_id = ?"
            params = (conversation_id,)
        with self.transaction(write=False) as cur:
            cur.execute(self._sql(query + " ORDER BY created_at, id"), params)
            ids = [row[0] for row in cur.fetchall()]
            records = [self._get(cur, i) for i in ids]
        return [r for r in records if r is not None]

    def _claim(
        self,
        approval_id: str,
        token: str,
        decisions: Mapping[str, Approve | Reject],
        audit: Sequence[AuditRecord],
    ) -> PendingRecord:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql("SELECT id FROM {p}approvals WHERE id = ?" + self.lock_row),
                (approval_id,),
            )
            if cur.fetchone() is None:
                raise ApprovalNotFound(f"no pending approval with id {approval_id!r}")
            record = self._get(cur, approval_id)
            assert record is not None
            now = self.clock()
            check_claimable(record, now)
            if record.status == "pending":
                for call_id, decision in decisions.items():
                    state = "rejected" if isinstance(decision, Reject) else "approved"
                    cur.execute(
                        self._sql(
                            "UPDATE {p}approval_calls SET state = ?, decision = ? "
                            "WHERE approval_id = ? AND call_id = ? AND state = 'pending'"
                        ),
                        (state, dump_decision(decision), approval_id, call_id),
                    )
                self._record(cur, audit)
            cur.execute(
                self._sql(
                    "UPDATE {p}approvals SET status = 'running', claim_token = ?, "
                    "claimed_until = ? WHERE id = ?"
                ),
                (token, now + self.claim_timeout, approval_id),
            )
            claimed = self._get(cur, approval_id)
            assert claimed is not None
            return claimed

    def _owned(self) -> str:
        return self._sql(
            "EXISTS (SELECT 1 FROM {p}approvals WHERE id = ? AND status = 'running' "
            "AND claim_token = ?)"
        )

    def _start_call(self, approval_id: str, call_id: str, token: str) -> bool:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql(
                    "UPDATE {p}approval_calls SET state = 'started' "
                    "WHERE approval_id = ? AND call_id = ? AND state = 'approved' AND "
                )
                + self._owned(),
                (approval_id, call_id, approval_id, token),
            )
            return bool(cur.rowcount == 1)

    def _finish_call(
        self, approval_id: str, call_id: str, token: str, result: StoredResult
    ) -> None:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql(
                    "UPDATE {p}approval_calls SET state = 'done', result = ? "
                    "WHERE approval_id = ? AND call_id = ? AND state IN ('started', 'rejected') "
                    "AND "
                )
                + self._owned(),
                (dump_result(result), approval_id, call_id, approval_id, token),
            )
            if cur.rowcount != 1:
                raise ApprovalAlreadyResolved(f"call {call_id!r} is no longer claimed here")

    def _complete(self, approval_id: str, token: str) -> None:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql(
                    "UPDATE {p}approvals SET status = 'completed', claimed_until = NULL, "
                    "completed_at = ? WHERE id = ? AND status = 'running' AND claim_token = ?"
                ),
                (self.clock(), approval_id, token),
            )
            if cur.rowcount != 1:
                raise ApprovalAlreadyResolved(f"approval {approval_id!r} is no longer claimed here")

    def _record_tx(self, audit: Sequence[AuditRecord]) -> None:
        with self.transaction(write=True) as cur:
            self._record(cur, audit)

    def _record(self, cur: Cursor, audit: Sequence[AuditRecord]) -> None:
        for a in audit:
            cur.execute(
                self._sql(
                    "INSERT INTO {p}approval_audit (approval_id, call_id, tool_name, decision, "
                    "decided_by, decided_at, arguments, edited_arguments, reason, "
                    "conversation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                (
                    a.approval_id,
                    a.call_id,
                    a.tool_name,
                    a.decision,
                    a.decided_by,
                    a.decided_at,
                    json.dumps(json_data(a.arguments)),
                    None
                    if a.edited_arguments is None
                    else json.dumps(json_data(a.edited_arguments)),
                    a.reason,
                    a.conversation_id,
                ),
            )

    _RULE_COLUMNS = (
        "id, conversation_id, tool_name, arguments, created_by, created_at, revoked_at, revoked_by"
    )

    def _add_rule(self, rule: StandingRule, audit: AuditRecord) -> None:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql(
                    f"INSERT INTO {{p}}approval_rules ({self._RULE_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                (
                    rule.id,
                    rule.conversation_id,
                    rule.name,
                    None if rule.arguments is None else json.dumps(json_data(rule.arguments)),
                    rule.created_by,
                    rule.created_at,
                    rule.revoked_at,
                    rule.revoked_by,
                ),
            )
            self._record(cur, [audit])

    def _rules(self, conversation_id: str) -> list[StandingRule]:
        with self.transaction(write=False) as cur:
            cur.execute(
                self._sql(
                    f"SELECT {self._RULE_COLUMNS} FROM {{p}}approval_rules "
                    "WHERE conversation_id = ? AND revoked_at IS NULL ORDER BY created_at, id"
                ),
                (conversation_id,),
            )
            return [_rule(row) for row in cur.fetchall()]

    def _revoke_rule(self, rule_id: str, by: str, at: float) -> StandingRule | None:
        with self.transaction(write=True) as cur:
            cur.execute(
                self._sql(
                    "UPDATE {p}approval_rules SET revoked_at = ?, revoked_by = ? "
                    "WHERE id = ? AND revoked_at IS NULL"
                ),
                (at, by, rule_id),
            )
            if cur.rowcount != 1:
                return None
            cur.execute(
                self._sql(f"SELECT {self._RULE_COLUMNS} FROM {{p}}approval_rules WHERE id = ?"),
                (rule_id,),
            )
            revoked = _rule(cur.fetchone())
            self._record(cur, [rule_audit(revoked, "revoked", by)])
            return revoked

    def _audit(self, approval_id: str | None) -> list[AuditRecord]:
        query = (
            "SELECT approval_id, call_id, tool_name, decision, decided_by, decided_at, "
            "arguments, edited_arguments, reason, conversation_id FROM {p}approval_audit"
        )
        params: tuple[Any, ...] = ()
        if approval_id is not None:
            query += " WHERE approval_id = ?"
            params = (approval_id,)
        with self.transaction(write=False) as cur:
            cur.execute(self._sql(query + " ORDER BY seq"), params)
            rows = cur.fetchall()
        return [
            AuditRecord(
                approval_id=r[0],
                call_id=r[1],
                tool_name=r[2],
                decision=r[3],
                decided_by=r[4],
                decided_at=r[5],
                arguments=json.loads(r[6]),
                edited_arguments=None if r[7] is None else json.loads(r[7]),
                reason=r[8],
                conversation_id=r[9],
            )
            for r in rows
        ]


def _rule(row: Sequence[Any]) -> StandingRule:
    rule_id, conversation_id, name, arguments, created_by, created_at, revoked_at, revoked_by = row
    return StandingRule(
        id=rule_id,
        conversation_id=conversation_id,
        name=name,
        arguments=None if arguments is None else json.loads(arguments),
        created_by=created_by,
        created_at=created_at,
        revoked_at=revoked_at,
        revoked_by=revoked_by,
    )


__all__ = ["Cursor", "SQLApprovalStore"]
