"""The values of approvals: requests, decisions, pending records, audit records, errors."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from ...core.errors import AdvisorChainError
from ...core.messages import Message
from ...core.parts import DocumentPart, ImagePart, TextPart

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class ApprovalAlreadyResolved(AdvisorChainError):
    """A pending approval was already resumed (or is being resumed by another worker)."""


class InvalidApprovalDecisions(AdvisorChainError, ValueError):
    """`Chain.resume` got decisions that do not answer exactly the pending calls."""


class InvalidApprovalRecord(AdvisorChainError, ValueError):
    """A store was asked to save a pending approval it cannot hold: two of its calls
    share an id, or an approval with its id exists already."""


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
)
"""The canonical JSON of fingerprints, built once (`json.dumps` with options builds one per
call)."""


def arguments_fingerprint(arguments: Mapping[str, Any]) -> str:
    """A digest of a call's arguments (key order does not count): what a decision is bound to.

    Arguments that cannot be serialized get a fingerprint that matches nothing.
    """
    try:
        text = _CANONICAL.encode(arguments)
    except (TypeError, ValueError, RecursionError):
        return f"unmatchable:{uuid.uuid4().hex}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call; with `arguments`, run it with these instead (validated again).

    `by` names who decided, for the audit record.
    """

    arguments: Mapping[str, Any] | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run the call; the model reads `reason`."""

    reason: str = "rejected"
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Defer:
    """Decide later: the turn ends as `approval_pending` and `Chain.resume` continues it."""


Decision: TypeAlias = Approve | Reject | Defer
"""What an approver answers for one call."""

Decisions: TypeAlias = Mapping[str, Decision] | Sequence[Decision]
"""An approver's answer: decisions by call id, or one per call in the request's order."""


@dataclass(frozen=True, slots=True)
class ApprovalCall:
    """One tool call waiting for a decision, as an approver sees it.

    `details` are values the policy chose to show (never the tool context otherwise).
    """

    call_id: str
    tool_name: str
    description: str
    arguments: Mapping[str, Any]
    details: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def fingerprint(self) -> str:
        """`arguments_fingerprint(arguments)`: a decision on this call applies to a call
        with exactly these arguments."""
        return arguments_fingerprint(self.arguments)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """The calls of one round that need a decision, shown together."""

    calls: tuple[ApprovalCall, ...]
    conversation_id: str | None = None


AuditDecision: TypeAlias = Literal["approved", "edited", "rejected"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """One decision on one call: who, when, what was asked, what was run, and why.

    `approval_id` is the pending approval's id, or the id of the inline round.
    `decided_at` is seconds since the epoch.
    """

    approval_id: str
    call_id: str
    tool_name: str
    decision: AuditDecision
    decided_by: str
    decided_at: float
    arguments: Mapping[str, Any]
    edited_arguments: Mapping[str, Any] | None = None
    reason: str | None = None
    conversation_id: str | None = None


def audit_record(
    approval_id: str,
    call: ApprovalCall,
    decision: Approve | Reject,
    *,
    default_by: str,
    conversation_id: str | None,
) -> AuditRecord:
    """The audit record of `decision` on `call`."""
    if isinstance(decision, Reject):
        kind: AuditDecision = "rejected"
        edited = None
        reason: str | None = decision.reason
    else:
        edited = dict(decision.arguments) if decision.arguments is not None else None
        kind = "edited" if edited is not None else "approved"
        reason = None
    return AuditRecord(
        approval_id=approval_id,
        call_id=call.call_id,
        tool_name=call.tool_name,
        decision=kind,
        decided_by=decision.by or default_by,
        decided_at=time.time(),
        arguments=dict(call.arguments),
        edited_arguments=edited,
        reason=reason,
        conversation_id=conversation_id,
    )


CallState: TypeAlias = Literal["pending", "approved", "rejected", "started", "done"]
"""Where a pending call is: waiting, decided, claimed for execution, or finished."""

ApprovalStatus: TypeAlias = Literal["pending", "running", "completed"]
"""Where a pending approval is: waiting, being resumed (claimed), or resolved."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredResult:
    """A finished call's result, as the model reads it: text, or content parts."""

    content: str | tuple[TextPart | ImagePart | DocumentPart, ...]
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """A call of a pending approval and its progress."""

    call: ApprovalCall
    state: CallState = "pending"
    decision: Approve | Reject | None = None
    result: StoredResult | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingRecord:
    """Everything needed to continue a suspended turn, in another process if need be.

    `messages` is the transcript up to the round's assistant message followed by the
    results of its calls that did not wait; `options` are the turn's `ChatOptions` as
    plain values; `tool_names` the tools the turn had. Never the tool context.
    """

    id: str
    status: ApprovalStatus
    conversation_id: str | None
    created_at: float
    messages: tuple[Message, ...]
    options: Mapping[str, Any]
    tool_names: tuple[str, ...]
    calls: tuple[PendingCall, ...]
    claimed_until: float | None = None

    def call(self, call_id: str) -> PendingCall | None:
        """The pending call with this id, or `None`."""
        return next((c for c in self.calls if c.call.call_id == call_id), None)
