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

import pydantic_core

from ...core.deferred import Approve, Reject, Remember
from ...core.errors import AdvisorChainError, ResumeConflict
from ...core.parts import DocumentPart, ImagePart, TextPart

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class ApprovalAlreadyResolved(ResumeConflict):
    """A pending approval was already resumed (or is being resumed by another worker)."""


class ApprovalNotFound(AdvisorChainError, LookupError):
    """A store was asked to claim an approval id it does not hold."""


APPROVAL = "approval"
"""The kind of a call deferred for a human decision (`DeferredCall.kind`)."""


class InvalidApprovalRecord(AdvisorChainError, ValueError):
    """A store was asked to save a pending approval it cannot hold (two of its calls
    share an id, an approval with its id exists already, a value JSON cannot hold), or
    a stored row cannot be read back (damaged by another writer)."""


def _json_value(value: Any) -> Any:
    """The JSON form of a validated value that JSON has no type for (a date, a `Decimal`,
    a model, an enum: as pydantic writes it); raises `TypeError` for anything else."""
    try:
        return pydantic_core.to_jsonable_python(value)
    except ValueError as exc:
        raise TypeError(str(exc)) from None


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_value
)
"""The canonical JSON of fingerprints, built once (`json.dumps` with options builds one per
call). Validated values and their JSON form have the same canonical text: `date(2026, 1,
2)` and `"2026-01-02"` alike."""


def json_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` (a call's validated values) in JSON form, as an approver is shown them
    and a store keeps them: dates and `Decimal`s as text, models as objects (what pydantic
    writes in JSON mode); a value with no JSON form as its `repr`."""
    value: dict[str, Any] = pydantic_core.to_jsonable_python(dict(arguments), fallback=repr)
    return value


def arguments_fingerprint(arguments: Mapping[str, Any]) -> str:
    """A digest of a call's arguments (key order does not count): what a decision is bound to.

    Validated values count as their JSON form (`json_arguments`), so the fingerprint of
    what a call runs with is that of what its approver was shown. Arguments that cannot
    be serialized get a fingerprint that matches nothing.
    """
    text = canonical_arguments(arguments)
    if text is None:
        return f"unmatchable:{uuid.uuid4().hex}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def canonical_arguments(arguments: Mapping[str, Any]) -> str | None:
    """The canonical JSON that `arguments_fingerprint` digests, or `None` when the
    arguments cannot be serialized (they then match nothing): two argument objects have
    the same fingerprint exactly when they have the same canonical JSON."""
    try:
        return _CANONICAL.encode(json_data(arguments))
    except (TypeError, ValueError, RecursionError):
        return None


def json_data(value: Any) -> Any:
    """`value` as JSON data, the same way for every store: mappings, lists and numbers as
    they are (`NaN` stays a float), tuples as lists, sets as lists in canonical order,
    and other values (dates, `Decimal`, `UUID`, bytes as base64, enums, pydantic models)
    as pydantic writes them in JSON. So a value and its stored-and-read-back copy have
    the same fingerprint. `ValueError` for a value pydantic cannot write."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Mapping):
        return {
            k if isinstance(k, str) else str(json_data(k)): json_data(v) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [json_data(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((json_data(v) for v in value), key=_CANONICAL.encode)
    return pydantic_core.to_jsonable_python(value, bytes_mode="base64")


@dataclass(frozen=True, slots=True)
class Defer:
    """Decide later: the call is deferred (kind `"approval"`); a resume decides it with
    `Approve()` or `Reject(reason)`."""


Decision: TypeAlias = Approve | Reject | Defer
"""What an approver answers for one call."""

Decisions: TypeAlias = Mapping[str, Decision] | Sequence[Decision]
"""An approver's answer: decisions by call id, or one per call in the request's order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalCall:
    """One tool call waiting for a decision, as an approver sees it.

    `id` is the call's id (`ToolCall.id`, what a decision is keyed by), `name` the tool's
    name (`ToolCall.name`, `ToolInvocation.name`), `arguments` the validated arguments the
    decision applies to. `details` are values the policy chose to show (never the tool
    context otherwise).
    """

    id: str
    name: str
    arguments: Mapping[str, Any]
    description: str = ""
    details: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def call_id(self) -> str:
        """Deprecated alias of `id` (0.1's name)."""
        return self.id

    @property
    def tool_name(self) -> str:
        """Deprecated alias of `name` (0.1's name)."""
        return self.name

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


AuditDecision: TypeAlias = Literal["approved", "edited", "rejected", "allowed", "revoked"]
"""`approved`, `edited`, `rejected`: a decision on one call. `allowed` and `revoked`: a
standing rule was made or revoked (`approval_id` is the rule's id, `call_id` the call whose
decision made it, or empty)."""


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
        call_id=call.id,
        tool_name=call.name,
        decision=kind,
        decided_by=decision.by or default_by,
        decided_at=time.time(),
        arguments=dict(call.arguments),
        edited_arguments=edited,
        reason=reason,
        conversation_id=conversation_id,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class StandingRule:
    """ "Always allow this tool (optionally with these exact arguments) in this conversation".

    Kept in the approval store; a call it matches runs without asking the approver (the
    decision is still audited, `decided_by` naming the rule). `arguments` is `None` for
    every call of `name`; else only calls whose validated arguments have `fingerprint`.
    `revoked_at` is set once it is revoked (it then matches nothing).
    """

    id: str
    conversation_id: str
    name: str
    created_by: str
    created_at: float
    arguments: Mapping[str, Any] | None = None
    revoked_at: float | None = None
    revoked_by: str | None = None

    @property
    def fingerprint(self) -> str | None:
        """The fingerprint of `arguments`, or `None` when the rule allows any arguments."""
        return None if self.arguments is None else arguments_fingerprint(self.arguments)

    def allows(self, name: str, arguments: Mapping[str, Any]) -> bool:
        """Whether a call of `name` with `arguments` runs under this rule."""
        if self.revoked_at is not None or name != self.name:
            return False
        expected = self.fingerprint
        return expected is None or expected == arguments_fingerprint(arguments)


def rule_audit(
    rule: StandingRule, decision: Literal["allowed", "revoked"], by: str, call_id: str = ""
) -> AuditRecord:
    """The audit record of making (`allowed`) or revoking a standing rule."""
    what = "every call" if rule.arguments is None else "calls with these exact arguments"
    return AuditRecord(
        approval_id=rule.id,
        call_id=call_id,
        tool_name=rule.name,
        decision=decision,
        decided_by=by,
        decided_at=time.time(),
        arguments=dict(rule.arguments or {}),
        reason=f"standing rule for {what} of {rule.name!r} in this conversation",
        conversation_id=rule.conversation_id,
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
    """A call of a pending approval and its progress.

    Flat to read: `id`, `name` and `arguments` are those of the call (`call` holds them,
    with the description and details the approver was shown); a decision for it is keyed
    by `id`. `state` is where it is (`pending` until a resume decides it).
    """

    call: ApprovalCall
    state: CallState = "pending"
    decision: Approve | Reject | None = None
    result: StoredResult | None = None

    @property
    def id(self) -> str:
        """The call's id: the key of its decision in `chain.call(..., decisions=...)`."""
        return self.call.id

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.call.name

    @property
    def arguments(self) -> Mapping[str, Any]:
        """The arguments a decision on this call applies to."""
        return self.call.arguments


@dataclass(frozen=True, slots=True)
class RoundCall:
    """One call of a deferred call's round, as the model sent it: what a resume's
    transcript must hold, exactly (id, tool, fingerprint of the arguments)."""

    id: str
    name: str
    fingerprint: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingRecord:
    """A deferred call, as the store keeps it until a resume settles it.

    What `store.get(id)` returns: `id` is the `approval_id` of the call's
    `DeferredCall.metadata`; `calls` holds the call (`id`, `name`, `arguments` as the
    approver was shown them, its state, decision and result). `round` are the calls of
    its round (ids, tools, argument fingerprints): a resume whose transcript's round
    differs is refused. Never the transcript, the options or the tool context: the
    caller (or a memory) keeps the transcript.
    """

    id: str
    status: ApprovalStatus
    conversation_id: str | None
    created_at: float
    calls: tuple[PendingCall, ...]
    round: tuple[RoundCall, ...] = ()
    claimed_until: float | None = None

    def call(self, call_id: str) -> PendingCall | None:
        """The pending call with this id, or `None`."""
        return next((c for c in self.calls if c.id == call_id), None)


__all__ = [
    "APPROVAL",
    "ApprovalAlreadyResolved",
    "ApprovalCall",
    "ApprovalNotFound",
    "ApprovalRequest",
    "ApprovalStatus",
    "Approve",
    "AuditDecision",
    "AuditRecord",
    "CallState",
    "Decision",
    "Decisions",
    "Defer",
    "InvalidApprovalRecord",
    "PendingCall",
    "PendingRecord",
    "Reject",
    "Remember",
    "RoundCall",
    "StandingRule",
    "StoredResult",
    "arguments_fingerprint",
    "audit_record",
    "canonical_arguments",
    "rule_audit",
]
