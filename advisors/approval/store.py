"""`ApprovalStore`: where pending approvals and audit records live; the in-memory store.

A pending approval moves through a small state machine that makes execution
exactly-once even with several workers:

- `pending` --claim--> `running` (decisions recorded, audit written, a claim token and a
  lease `claimed_until` set) --complete--> `completed`.
- Each call: `pending` --claim--> `approved` | `rejected`; `approved` --start_call-->
  `started` --finish_call--> `done`; `rejected` --finish_call--> `done`.

A claim is atomic: of two concurrent claims one wins, the other raises
`ApprovalAlreadyResolved`. A `running` approval whose lease ran out (its worker crashed)
may be claimed again: calls that were `started` but never finished are then reported
with an `unknown` outcome instead of being run twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter

from ...core.parts import ToolPart
from .types import (
    ApprovalAlreadyResolved,
    ApprovalCall,
    ApprovalNotFound,
    Approve,
    AuditRecord,
    InvalidApprovalRecord,
    PendingCall,
    PendingRecord,
    Reject,
    RoundCall,
    StandingRule,
    StoredResult,
    json_data,
    rule_audit,
)

_RESULT_PARTS: TypeAdapter[tuple[ToolPart, ...]] = TypeAdapter(tuple[ToolPart, ...])

DEFAULT_CLAIM_TIMEOUT = 300.0
"""Seconds a resume may hold a claim before another worker may take it over."""


@runtime_checkable
class ApprovalStore(Protocol):
    """Persistence of pending approvals and audit records (see the module's state machine)."""

    async def save(self, record: PendingRecord) -> None:
        """Store a new pending approval.

        Raises `InvalidApprovalRecord` when two of its calls share an id (a decision
        names a call by its id) or its id is taken.
        """
        ...

    async def get(self, approval_id: str) -> PendingRecord | None:
        """The approval with this id, or `None`."""
        ...

    async def waiting(self, conversation_id: str | None = None) -> list[PendingRecord]:
        """Approvals still waiting for decisions (status `pending`), oldest first."""
        ...

    async def claim(
        self,
        approval_id: str,
        token: str,
        decisions: Mapping[str, Approve | Reject],
        audit: Sequence[AuditRecord],
    ) -> PendingRecord:
        """Atomically claim the approval for one resume; record decisions and audit.

        Raises `ApprovalNotFound`, or `ApprovalAlreadyResolved` when it is completed or
        claimed by a live resume. Taking over an expired claim keeps the first decisions.
        """
        ...

    async def start_call(self, approval_id: str, call_id: str, token: str) -> bool:
        """Mark an approved call as started; `False` if it was started before (a crash)."""
        ...

    async def finish_call(
        self, approval_id: str, call_id: str, token: str, result: StoredResult
    ) -> None:
        """Store a call's result."""
        ...

    async def complete(self, approval_id: str, token: str) -> None:
        """Mark the approval resolved."""
        ...

    async def record(self, audit: Sequence[AuditRecord]) -> None:
        """Append audit records (inline decisions)."""
        ...

    async def audit(self, approval_id: str | None = None) -> list[AuditRecord]:
        """Audit records, oldest first, of one approval or of all."""
        ...

    async def add_rule(self, rule: StandingRule, audit: AuditRecord) -> None:
        """Store a standing rule and its `allowed` audit record, in one transaction."""
        ...

    async def rules(self, conversation_id: str) -> list[StandingRule]:
        """The conversation's standing rules that are not revoked, oldest first."""
        ...

    async def revoke_rule(self, rule_id: str, by: str, at: float) -> StandingRule | None:
        """Revoke a rule and audit it (`revoked`); the revoked rule, or `None` if there is
        no such rule or it was revoked before."""
        ...


class InMemoryApprovalStore:
    """An `ApprovalStore` in this process's memory: for tests and single-process apps.

    Every method runs without awaiting inside, so each is atomic on the event loop.
    """

    def __init__(
        self,
        *,
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.claim_timeout = claim_timeout
        self.clock = clock
        self._records: dict[str, PendingRecord] = {}
        self._tokens: dict[str, str] = {}
        self._audit: list[AuditRecord] = []
        self._rules: dict[str, StandingRule] = {}

    def __repr__(self) -> str:
        return f"InMemoryApprovalStore(approvals={len(self._records)})"

    async def save(self, record: PendingRecord) -> None:
        """Store a new pending approval (`InvalidApprovalRecord` if it cannot be held)."""
        check_record(record)
        if record.id in self._records:
            raise InvalidApprovalRecord(f"approval {record.id!r} already exists")
        self._records[record.id] = record

    async def get(self, approval_id: str) -> PendingRecord | None:
        """The approval with this id, or `None`."""
        return self._records.get(approval_id)

    async def waiting(self, conversation_id: str | None = None) -> list[PendingRecord]:
        """Approvals still waiting for decisions, oldest first."""
        found = [
            r
            for r in self._records.values()
            if r.status == "pending"
            and (conversation_id is None or r.conversation_id == conversation_id)
        ]
        return sorted(found, key=lambda r: r.created_at)

    async def claim(
        self,
        approval_id: str,
        token: str,
        decisions: Mapping[str, Approve | Reject],
        audit: Sequence[AuditRecord],
    ) -> PendingRecord:
        """Atomically claim the approval (see `ApprovalStore.claim`)."""
        record = self._records.get(approval_id)
        if record is None:
            raise ApprovalNotFound(f"no pending approval with id {approval_id!r}")
        now = self.clock()
        check_claimable(record, now)
        calls = record.calls
        if record.status == "pending":
            calls = tuple(decide(c, decisions.get(c.call.id)) for c in calls)
            self._audit.extend(audit)
        claimed = replace(
            record, status="running", calls=calls, claimed_until=now + self.claim_timeout
        )
        self._records[approval_id] = claimed
        self._tokens[approval_id] = token
        return claimed

    async def start_call(self, approval_id: str, call_id: str, token: str) -> bool:
        """Mark an approved call as started; `False` if it was started before."""
        record = self._owned(approval_id, token)
        call = record.call(call_id)
        if call is None or call.state != "approved":
            return False
        self._put_call(record, replace(call, state="started"))
        return True

    async def finish_call(
        self, approval_id: str, call_id: str, token: str, result: StoredResult
    ) -> None:
        """Store a call's result."""
        record = self._owned(approval_id, token)
        call = record.call(call_id)
        if call is None or call.state not in ("started", "rejected"):
            raise ApprovalAlreadyResolved(f"call {call_id!r} is not running")
        self._put_call(record, replace(call, state="done", result=result))

    async def complete(self, approval_id: str, token: str) -> None:
        """Mark the approval resolved."""
        record = self._owned(approval_id, token)
        self._records[approval_id] = replace(record, status="completed", claimed_until=None)

    async def record(self, audit: Sequence[AuditRecord]) -> None:
        """Append audit records."""
        self._audit.extend(audit)

    async def audit(self, approval_id: str | None = None) -> list[AuditRecord]:
        """Audit records, oldest first."""
        return [a for a in self._audit if approval_id is None or a.approval_id == approval_id]

    async def add_rule(self, rule: StandingRule, audit: AuditRecord) -> None:
        """Store a standing rule and its audit record."""
        self._rules[rule.id] = rule
        self._audit.append(audit)

    async def rules(self, conversation_id: str) -> list[StandingRule]:
        """The conversation's rules that are not revoked, oldest first."""
        return [
            r
            for r in self._rules.values()
            if r.conversation_id == conversation_id and r.revoked_at is None
        ]

    async def revoke_rule(self, rule_id: str, by: str, at: float) -> StandingRule | None:
        """Revoke a rule and audit it; `None` if unknown or already revoked."""
        rule = self._rules.get(rule_id)
        if rule is None or rule.revoked_at is not None:
            return None
        revoked = self._rules[rule_id] = replace(rule, revoked_at=at, revoked_by=by)
        self._audit.append(rule_audit(revoked, "revoked", by))
        return revoked

    def _owned(self, approval_id: str, token: str) -> PendingRecord:
        record = self._records.get(approval_id)
        if record is None:
            raise ApprovalNotFound(f"no pending approval with id {approval_id!r}")
        if record.status != "running" or self._tokens.get(approval_id) != token:
            raise ApprovalAlreadyResolved(f"approval {approval_id!r} is no longer claimed here")
        return record

    def _put_call(self, record: PendingRecord, call: PendingCall) -> None:
        calls = tuple(call if c.call.id == call.call.id else c for c in record.calls)
        self._records[record.id] = replace(record, calls=calls)


def check_record(record: PendingRecord) -> None:
    """Raise `InvalidApprovalRecord` if two calls of `record` share an id."""
    seen: set[str] = set()
    for c in record.calls:
        if c.call.id in seen:
            raise InvalidApprovalRecord(
                f"approval {record.id!r} has two calls with the id {c.call.id!r}: "
                "a decision could not tell them apart"
            )
        seen.add(c.call.id)


def check_claimable(record: PendingRecord, now: float) -> None:
    """Raise `ApprovalAlreadyResolved` unless `record` may be claimed at `now`."""
    if record.status == "completed":
        raise ApprovalAlreadyResolved(f"approval {record.id!r} was already resolved")
    if record.status == "running" and (record.claimed_until or 0.0) > now:
        raise ApprovalAlreadyResolved(f"approval {record.id!r} is being resumed by another worker")


def decide(call: PendingCall, decision: Approve | Reject | None) -> PendingCall:
    """`call` with `decision` recorded."""
    if decision is None:
        return call
    if isinstance(decision, Reject):
        return replace(call, state="rejected", decision=decision)
    return replace(call, state="approved", decision=decision)


# -- the JSON forms the SQL stores keep -------------------------------------------------------


def dump_state(record: PendingRecord) -> str:
    """The round of `record` as JSON (ids, tools and fingerprints of its calls)."""
    return json.dumps({"round": [[c.id, c.name, c.fingerprint] for c in record.round]})


def load_state(text: str) -> tuple[RoundCall, ...]:
    """The round from `dump_state`'s JSON (empty for a record of an older version, whose
    resume is then refused: its round cannot match)."""
    state = json.loads(text)
    return tuple(RoundCall(str(i), str(n), str(f)) for i, n, f in state.get("round") or ())


def dump_decision(decision: Approve | Reject | None) -> str | None:
    """A decision as JSON."""
    if decision is None:
        return None
    if isinstance(decision, Reject):
        return json.dumps({"kind": "reject", "reason": decision.reason, "by": decision.by})
    arguments = json_data(decision.arguments) if decision.arguments is not None else None
    values: dict[str, Any] = {"kind": "approve", "arguments": arguments, "by": decision.by}
    if decision.remember is not None:
        values["remember"] = decision.remember
    return json.dumps(values)


def load_decision(text: str | None) -> Approve | Reject | None:
    """A decision from `dump_decision`'s JSON."""
    if text is None:
        return None
    data = json.loads(text)
    if data["kind"] == "reject":
        return Reject(data["reason"], by=data["by"])
    return Approve(data["arguments"], by=data["by"], remember=data.get("remember"))


def dump_result(result: StoredResult | None) -> str | None:
    """A stored result as JSON."""
    if result is None:
        return None
    content: Any = result.content
    if not isinstance(content, str):
        content = _RESULT_PARTS.dump_python(content, mode="json")
    return json.dumps({"content": content, "outcome": result.outcome})


def load_result(text: str | None) -> StoredResult | None:
    """A stored result from `dump_result`'s JSON."""
    if text is None:
        return None
    data = json.loads(text)
    content = data["content"]
    if not isinstance(content, str):  # parts; 0.1 stored text only
        content = _RESULT_PARTS.validate_python(content)
    return StoredResult(content=content, outcome=data["outcome"])


def pending_call(
    call_id: str,
    tool_name: str,
    description: str,
    arguments: str,
    details: str,
    state: str,
    decision: str | None,
    result: str | None,
) -> PendingCall:
    """A `PendingCall` from a row of stored columns."""
    return PendingCall(
        call=ApprovalCall(
            id=call_id,
            name=tool_name,
            description=description,
            arguments=json.loads(arguments),
            details=json.loads(details),
        ),
        state=state,  # type: ignore[arg-type]
        decision=load_decision(decision),
        result=load_result(result),
    )


__all__ = [
    "DEFAULT_CLAIM_TIMEOUT",
    "ApprovalStore",
    "InMemoryApprovalStore",
    "check_claimable",
    "check_record",
    "decide",
    "dump_decision",
    "dump_result",
    "dump_state",
    "load_decision",
    "load_result",
    "load_state",
    "pending_call",
]
