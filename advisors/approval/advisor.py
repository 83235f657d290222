"""`ApprovalAdvisor`: a human between the model's request and a tool's effect."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias, TypeGuard, cast, get_args

import anyio

from ...core.advisor import Advisor, ToolNext
from ...core.arguments import parse_argument_object
from ...core.checks import require_callable, require_number
from ...core.context import ToolContext
from ...core.invocation import ToolInvocation, ToolOutcome, ToolResult
from ...core.manager import rejected
from ...core.messages import ToolCall
from ...core.request import ChatRequest
from ...core.scrub import safe_str
from ...core.tools import InvalidToolArguments, Tool, ValidatedArguments
from .approvers import Approver, DeferredApprover
from .rules import UNKNOWN_OUTCOME, allow, edited_result, remember, remembered_arguments
from .sqlite_store import SQLiteApprovalStore
from .store import ApprovalStore, InMemoryApprovalStore
from .types import (
    APPROVAL,
    ApprovalAlreadyResolved,
    ApprovalCall,
    ApprovalRequest,
    Approve,
    Decision,
    Defer,
    PendingCall,
    PendingRecord,
    Reject,
    RoundCall,
    StandingRule,
    StoredResult,
    arguments_fingerprint,
    audit_record,
    canonical_arguments,
    json_arguments,
)

Policy: TypeAlias = Callable[[Tool, Mapping[str, Any], ToolContext], "bool | Mapping[str, Any]"]
"""Whether a call needs approval: `(tool, arguments, tool context) -> bool`, or a mapping
of values to show the approver (which also means "needs approval"). `arguments` are the
validated values the tool would run with (`ValidatedArguments`)."""

_log = logging.getLogger("advisorchain.approval")

_FAIL_CLOSED = "advisorchain"
"""Who the audit names when the advisor rejected a call because the approver failed."""

ARGUMENTS_CHANGED = (
    "the call's arguments differ from the arguments the approver saw, so it is not run"
)
"""Why a call whose decision was taken on other arguments is refused."""

TRANSCRIPT_CHANGED = (
    "the resumed transcript differs from the one that was deferred (another call, tool or "
    "arguments), so the call is not run"
)
"""Why a resumed call whose transcript is not the deferred one is refused."""


@dataclass
class _Round:
    """The decisions for one round's calls, shared by the round's concurrent executions."""

    request: ChatRequest
    ready: bool = False
    done: anyio.Event | None = None
    """Made by the first call that has to wait for the decisions (most rounds have none)."""
    decisions: dict[str, Decision] = field(default_factory=dict)
    shown: dict[str, _Shown] = field(default_factory=dict)
    """What the approver saw of each call, by id."""


@dataclass(frozen=True, slots=True)
class _Shown:
    """A call as the approver saw it, and the arguments object it was made from."""

    source: Mapping[str, Any]
    call: ApprovalCall

    def matches(self, arguments: Mapping[str, Any]) -> bool:
        """Whether `arguments` are those the approver saw (the same object, or the same
        fingerprint)."""
        if arguments is self.source:
            return True
        # Equal fingerprints are equal canonical JSON texts: compared without the digests.
        text = canonical_arguments(arguments)
        return text is not None and text == canonical_arguments(self.call.arguments)


@dataclass
class TurnApprovals:
    """What one advisor keeps in a turn's `request.context`."""

    rounds: dict[tuple[object, ...], _Round] = field(default_factory=dict)


class ApprovalAdvisor(Advisor):
    """Asks an `Approver` before tool calls that need approval run.

    Which calls: those of tools declared `requires_approval=True`, or those for which
    `policy(tool, arguments, tool_context)` is true. Other calls run without waiting.
    With `auto_approve_read_only=True`, calls of tools declared `read_only=True` never
    wait either (whatever the policy says).

    Standing rules: `allow(conversation_id, name, arguments=..., by=...)` (or an
    approver's `Approve(remember="tool" | "arguments")`) keeps "always allow this tool
    (with exactly these arguments, if given) in this conversation" in `store`, audited as
    `allowed`; `revoke(rule_id, by=...)` ends it, audited as `revoked`. A call of a turn
    with that conversation id that a rule allows is approved without asking the approver
    (audited as `approved`, `decided_by` naming the rule): the store is read once per
    round that has calls needing approval, and only when the turn has a conversation id.

    Control flow, in `call_tool` (which the tool loop runs for every execution): a call
    that needs approval waits for its round's decisions. The first such call of a round to
    arrive asks the approver once for all the round's calls that need approval (the
    invocation's `round_calls`), and stores the decisions in the turn's `request.context`;
    the round's other calls, running concurrently, wait for the same decisions. Then:
    `Approve()` runs the call, `Approve(arguments=...)` runs it with the edited arguments
    (validated again; its result starts with a note that tells the model the arguments it
    ran with, `EDITED_NOTE`), `Reject(reason)` answers it with a `rejected` error
    result that tells the model the reason, without running it. An approver that raises,
    takes longer than `timeout` seconds, or answers a call with anything but a decision
    rejects that call (fail closed), and logs a WARNING on the `advisorchain.approval`
    logger: the approver, the tool names and call ids, and why (an exception's type and
    message); never the arguments. A sync `CallbackApprover` function runs in a worker
    thread, so `timeout` bounds it too: an answer after the timeout is ignored.

    `Defer()` (what `DeferredApprover` always answers) saves a `PendingRecord` in `store`
    (the call as shown, with its id and arguments fingerprint, and the fingerprints of
    its round's calls; never the transcript nor the tool context) and answers the call
    `ToolResult.defer("approval", {"approval_id": ..., ...})`: the loop finishes the
    round's other calls and ends the turn with `finish_reason="deferred"`, the call in
    `response.deferred`. The caller (or a `MemoryAdvisor`) keeps the transcript; a later
    `chain.call(transcript, decisions={call_id: Approve() | Reject(reason)})`, in any
    process, settles it: this hook checks the resumed call against the record (same id,
    tool and arguments, and a round with exactly the same calls: else the call is refused,
    logged and audited, and not run), claims it atomically (`ApprovalAlreadyResolved`
    for a resume racing a live one), audits the decision, marks an approved call started
    before it runs and stores its result (a claim taken over after a crash between start
    and finish reports it `unknown`, never runs it twice). A call settled before answers a
    later resume with its stored result: it never runs twice, nothing is audited again.
    An approved call whose result is itself deferred (a sub-chain that waits) is recorded
    alike, so its resume runs once too.

    The approver, the policy and the standing rules see a call's validated arguments (the
    values the tool runs with; the approver in JSON form, `json_arguments`). A decision
    applies only to the call the approver saw, id and arguments (bound by
    `arguments_fingerprint`): a call that arrives with other arguments (changed by an
    earlier hook) is refused with a `rejected` result, logged and audited, and not run.
    Calls of one round that share an id (which the chain's innermost step never lets
    through) are rejected without asking.

    Every decision is written to `store` as an `AuditRecord`. The default store is a
    SQLite file (`approvals.db`) with a `DeferredApprover`, memory otherwise. The advisor
    has only a `call_tool` hook, so it works at any position: before the chain's
    `ToolCallingAdvisor` or after it (inside the loop), as the project's canonical
    `[LoggingAdvisor(), ToolCallingAdvisor(), ApprovalAdvisor(...)]` places it.
    """

    def __init__(
        self,
        approver: Approver,
        *,
        policy: Policy | None = None,
        store: ApprovalStore | None = None,
        timeout: float | None = None,
        auto_approve_read_only: bool = False,
    ) -> None:
        if not isinstance(approver, Approver):
            raise TypeError(f"{approver!r} is not an Approver (it needs `async decide(request)`)")
        require_number(timeout, "timeout", positive=True, optional=True)
        if store is not None and not isinstance(store, ApprovalStore):
            raise TypeError(
                f"store must be an ApprovalStore, such as SQLiteApprovalStore(path), not "
                f"{store!r:.80}"
            )
        if policy is not None:
            require_callable(
                policy, "policy", "policy(tool, arguments, tool_context) -> bool or details"
            )
        self.approver = approver
        self.policy = policy
        self.timeout = timeout
        self.auto_approve_read_only = auto_approve_read_only
        self._store = store
        self._key = f"advisorchain.approval.{uuid.uuid4().hex}"

    def __repr__(self) -> str:
        return f"ApprovalAdvisor({self.approver!r})"

    @property
    def store(self) -> ApprovalStore:
        """Where pending approvals and audit records go."""
        if self._store is None:
            if isinstance(self.approver, DeferredApprover):
                self._store = SQLiteApprovalStore()
            else:
                self._store = InMemoryApprovalStore()
        return self._store

    def turn(self, request: ChatRequest) -> TurnApprovals:
        """This advisor's state for the turn of `request`."""
        state = request.context.get(self._key)
        if not isinstance(state, TurnApprovals):
            state = request.context[self._key] = TurnApprovals()
        return state

    # -- each tool execution ----------------------------------------------------------------

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        """Run, edit, reject or defer one call, after its round's decisions; settle a
        resumed call against its record."""
        if invocation.decision is not None:
            return await self._resumed(invocation, next)
        if self._details(invocation.tool, invocation.arguments, invocation.context) is None:
            return await next(invocation)
        turn = self.turn(invocation.request)
        decision, shown = await self._decision(turn, invocation)
        if isinstance(decision, Approve) and (
            shown is None or not shown.matches(invocation.arguments)
        ):
            return await self._refuse(invocation)
        if isinstance(decision, Defer) and shown is not None:
            return await self._defer(invocation, shown.call)
        if not isinstance(decision, Approve):
            return rejected(decision.reason if isinstance(decision, Reject) else "rejected")
        if decision.arguments is None:
            result = await next(invocation)
            if result.outcome == "deferred":  # approved, but the call waits (a sub-chain)
                return await self._hold(invocation, result)
            return result
        edited = invocation.with_arguments(decision.arguments)
        result = await next(edited)
        if result.outcome == "deferred":
            return await self._hold(edited, result)
        return edited_result(result, invocation.arguments, edited.arguments)

    async def _defer(self, invocation: ToolInvocation, shown: ApprovalCall) -> ToolResult:
        """Record a deferred call in the store; the deferred result that names it."""
        approval_id = await self._record(invocation, shown)
        return ToolResult.defer(
            APPROVAL,
            {
                "approval_id": approval_id,
                "name": shown.name,
                "description": shown.description,
                "arguments": dict(shown.arguments),
                "details": dict(shown.details),
            },
            content="Waiting for approval.",
            accepts=("approve", "reject"),
        )

    async def _hold(self, invocation: ToolInvocation, result: ToolResult) -> ToolResult:
        """An approved call whose result is deferred: recorded, so its resume runs once."""
        shown = ApprovalCall(
            id=invocation.call.id,
            name=invocation.name,
            description=invocation.tool.description,
            arguments=json_arguments(invocation.arguments),
        )
        approval_id = await self._record(invocation, shown)
        return replace(result, metadata={**result.metadata, "approval_id": approval_id})

    async def _record(self, invocation: ToolInvocation, shown: ApprovalCall) -> str:
        approval_id = f"approval_{uuid.uuid4().hex}"
        await self.store.save(
            PendingRecord(
                id=approval_id,
                status="pending",
                conversation_id=invocation.request.conversation_id,
                created_at=time.time(),
                calls=(PendingCall(call=shown),),
                round=_round_of(invocation),
            )
        )
        return approval_id

    async def _resumed(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        """Settle a resumed call: check it against its record, claim it, run it once."""
        decision = invocation.decision
        deferred = invocation.deferred
        metadata = deferred.metadata if deferred is not None else {}
        approval_id = metadata.get("approval_id")
        ours = deferred is not None and deferred.kind == APPROVAL
        runs = isinstance(decision, (Approve, Mapping))
        if not isinstance(approval_id, str):
            gated = self._details(invocation.tool, invocation.arguments, invocation.context)
            if ours or (runs and gated is not None):  # never approved: never run
                return await self._refuse(invocation, TRANSCRIPT_CHANGED)
            return await next(invocation)
        found = await self.store.get(approval_id)
        pending = found.calls[0] if found is not None and len(found.calls) == 1 else None
        if (
            found is None
            or pending is None
            or pending.id != invocation.call.id
            or pending.name != invocation.name
            or pending.call.fingerprint != arguments_fingerprint(invocation.arguments)
            or found.round != _round_of(invocation)
        ):
            known = approval_id if found is not None else None  # else a fresh round's id
            return await self._refuse(invocation, TRANSCRIPT_CHANGED, known)
        if found.status == "completed":  # settled before: its result, never a second run
            stored = pending.result
            if stored is None:
                raise ApprovalAlreadyResolved(f"approval {approval_id!r} was already resolved")
            return ToolResult(content=stored.content, outcome=_outcome(stored.outcome))
        audit = []
        if ours and isinstance(decision, (Approve, Reject)):
            given: Approve | Reject = decision
            audit.append(
                audit_record(
                    approval_id,
                    pending.call,
                    given,
                    default_by="resume",
                    conversation_id=found.conversation_id,
                )
            )
        else:  # approved before its result was deferred: the decision is the inner one's
            given = decision if isinstance(decision, Reject) else Approve(by="resume")
        token = uuid.uuid4().hex
        claimed = await self.store.claim(approval_id, token, {pending.id: given}, audit)
        if found.status == "pending" and isinstance(given, Approve) and audit:
            kept = remembered_arguments(invocation.tool, given)
            await remember(self.store, pending.call, kept, found.conversation_id, "resume")
        call = claimed.calls[0]
        if call.state == "done" and call.result is not None:
            result = ToolResult(content=call.result.content, outcome=_outcome(call.result.outcome))
        elif call.state == "rejected" and isinstance(call.decision, Reject):
            result = rejected(call.decision.reason)
            await self._finish(approval_id, call, token, result)
        elif call.state == "approved" and isinstance(call.decision, Approve):
            if not await self.store.start_call(approval_id, call.id, token):
                raise ApprovalAlreadyResolved(f"approval {approval_id!r} is no longer claimed here")
            edited = call.decision.arguments if ours else None
            ran = invocation if edited is None else invocation.with_arguments(edited)
            result = await next(ran)
            if ran is not invocation:
                result = edited_result(result, invocation.arguments, ran.arguments)
            await self._finish(approval_id, call, token, result)
        else:  # started before a crash: its outcome is unknown, it is not run again
            result = ToolResult(content=UNKNOWN_OUTCOME, outcome="unknown")
            await self._finish(approval_id, call, token, result)
        await self.store.complete(approval_id, token)
        return result

    async def _finish(
        self, approval_id: str, call: PendingCall, token: str, result: ToolResult
    ) -> None:
        await self.store.finish_call(
            approval_id,
            call.id,
            token,
            StoredResult(content=result.content, outcome=result.outcome),
        )

    def _details(
        self, tool: Tool, arguments: Mapping[str, Any], context: ToolContext
    ) -> Mapping[str, Any] | None:
        """`None` if the call needs no approval, else the values to show the approver."""
        if self.auto_approve_read_only and tool.read_only:
            return None
        if self.policy is None:
            return {} if tool.requires_approval else None
        try:
            verdict = self.policy(tool, arguments, context)
        except Exception as exc:
            _log.warning(
                "approval policy failed for %s (call %s), asking the approver: %s: %.500s",
                tool.name,
                context.call_id,
                type(exc).__name__,
                exc,
            )
            return {}  # fail closed: a broken policy means "ask"
        if isinstance(verdict, Mapping):
            return verdict
        return {} if verdict else None

    async def _decision(
        self, turn: TurnApprovals, invocation: ToolInvocation
    ) -> tuple[Decision, _Shown | None]:
        """The round's decision on this call, and the call as the approver saw it."""
        # A round is its request object (the loop makes a new one per round): call ids alone
        # may repeat across rounds with some models, and must never reuse a decision.
        round_request = invocation.request
        key = (id(round_request), *[c.id for c in invocation.round_calls or (invocation.call,)])
        shared = turn.rounds.get(key)
        if shared is None or shared.request is not round_request:
            shared = turn.rounds[key] = _Round(round_request)
            try:
                shared.decisions, shared.shown = await self._ask(turn, invocation)
            finally:
                shared.ready = True
                if shared.done is not None:
                    shared.done.set()
        elif not shared.ready:
            if shared.done is None:
                shared.done = anyio.Event()
            await shared.done.wait()
        call_id = invocation.call.id
        decision = shared.decisions.get(call_id, Reject("the approval failed"))
        return decision, shared.shown.get(call_id)

    async def _ask(
        self, turn: TurnApprovals, invocation: ToolInvocation
    ) -> tuple[dict[str, Decision], dict[str, _Shown]]:
        """Ask the approver about the round's calls that need it: the decisions, and the
        calls as it saw them, by call id.

        Calls that share an id (which the chain's innermost step never lets through, but
        a tool loop driven by hand might) are not shown: a decision names a call by its
        id, so they are all rejected.
        """
        request = invocation.request
        round_calls = invocation.round_calls or (invocation.call,)
        ids = [c.id for c in round_calls]
        counts = Counter(ids) if len(set(ids)) < len(ids) else None  # None: no id repeats
        items: list[ApprovalCall] = []
        ambiguous: list[ApprovalCall] = []
        shown: dict[str, _Shown] = {}
        for call in round_calls:
            found = self._approval_call(invocation, call)
            if found is None:
                continue
            source, item = found
            if counts is None or counts[call.id] == 1:
                items.append(item)
                shown[item.id] = _Shown(source, item)
            else:
                ambiguous.append(item)
        conversation_id = request.conversation_id
        decisions: dict[str, Decision] = {}
        asked = items
        if items and conversation_id is not None:
            asked = await self._apply_rules(items, conversation_id, decisions, request)
        if asked:
            approval = ApprovalRequest(calls=tuple(asked), conversation_id=conversation_id)
            decisions.update(await self._consult(approval))
        for item in ambiguous:
            decisions[item.id] = Reject(
                f"two calls of this round have the id {item.id!r}; neither is run",
                by=_FAIL_CLOSED,
            )
            _log.warning(
                "approval: rejected tool calls %r: several calls share the id %r",
                item.name,
                item.id,
            )
        round_id = _round_id()
        audit = []
        approver = _name(self.approver)
        for item in (*items, *ambiguous):
            decision = decisions[item.id]
            if isinstance(decision, Defer):
                continue
            default_by = _FAIL_CLOSED if decision.by == _FAIL_CLOSED else approver
            audit.append(
                audit_record(
                    round_id,
                    item,
                    decision,
                    default_by=default_by,
                    conversation_id=request.conversation_id,
                )
            )
        if audit:
            await self.store.record(audit)
        for item in asked:
            decision = decisions[item.id]
            if isinstance(decision, Approve) and decision.remember is not None:
                decision = remembered_arguments(request.find_tool(item.name), decision)
                await remember(self.store, item, decision, conversation_id, approver)
        return decisions, shown

    async def _apply_rules(
        self,
        items: list[ApprovalCall],
        conversation_id: str,
        decisions: dict[str, Decision],
        request: ChatRequest,
    ) -> list[ApprovalCall]:
        """Approve the calls a standing rule of the conversation allows (into `decisions`);
        the calls left for the approver. A rule's arguments count as the tool validates
        them (defaults filled in, `"150"` for an `int` as `150`), as a call's do."""
        rules = await self.store.rules(conversation_id)
        if not rules:
            return items
        left = []
        for item in items:
            tool = request.find_tool(item.name)
            rule = next((r for r in rules if _rule_allows(r, item, tool)), None)
            if rule is None:
                left.append(item)
            else:
                decisions[item.id] = Approve(by=f"rule {rule.id} ({rule.created_by})")
        return left

    # -- standing rules ---------------------------------------------------------------------

    async def allow(
        self,
        conversation_id: str,
        name: str,
        *,
        arguments: Mapping[str, Any] | None = None,
        by: str,
    ) -> StandingRule:
        """Always allow tool `name` in this conversation (only with exactly `arguments`,
        when given): a `StandingRule` kept in `store`, audited as `allowed` by `by`.

        Later calls it matches run without asking the approver; each is still audited as
        `approved`, `decided_by` naming the rule. `revoke(rule.id, by=...)` ends it.
        """
        return await allow(self.store, conversation_id, name, arguments=arguments, by=by)

    async def revoke(self, rule_id: str, *, by: str) -> StandingRule | None:
        """Revoke a standing rule (audited as `revoked`): the revoked rule, or `None` if
        there is no such rule or it was revoked before."""
        return await self.store.revoke_rule(rule_id, by, time.time())

    async def rules(self, conversation_id: str) -> list[StandingRule]:
        """The conversation's standing rules in force, oldest first."""
        return await self.store.rules(conversation_id)

    def _approval_call(
        self, invocation: ToolInvocation, call: ToolCall
    ) -> tuple[Mapping[str, Any], ApprovalCall] | None:
        """`call` as the approver sees it, with the arguments object it is made from;
        `None` if it needs no approval (or cannot run)."""
        this = invocation.call
        if call is this or (call.id == this.id and call == this):
            tool, arguments, context = invocation.tool, invocation.arguments, invocation.context
        else:
            request = invocation.request
            found = request.find_tool(call.name)
            checked = _checked_arguments(found, call)
            if found is None or checked is None:
                return None  # the loop answers it with an error: it does not run
            tool, arguments = found, checked
            context = ToolContext(
                request.tool_context,
                call_id=call.id,
                tool_name=tool.name,
                conversation_id=request.conversation_id,
            )
        details = self._details(tool, arguments, context)
        if details is None:
            return None
        return arguments, ApprovalCall(
            id=call.id,
            name=tool.name,
            description=tool.description,
            arguments=json_arguments(arguments),
            details=dict(details),
        )

    async def _refuse(
        self,
        invocation: ToolInvocation,
        reason: str = ARGUMENTS_CHANGED,
        approval_id: str | None = None,
    ) -> ToolResult:
        """Refuse a call that is not the one decided on; log and audit it."""
        _log.warning(
            "approval: refused tool call %r (%s): %s",
            invocation.name,
            invocation.call.id,
            "its arguments are not those approved"
            if reason == ARGUMENTS_CHANGED
            else "the transcript is not the deferred one",
        )
        shown = ApprovalCall(
            id=invocation.call.id,
            name=invocation.name,
            description=invocation.tool.description,
            arguments=json_arguments(invocation.arguments),
        )
        refusal = Reject(reason, by=_FAIL_CLOSED)
        await self.store.record(
            [
                audit_record(
                    approval_id or _round_id(),
                    shown,
                    refusal,
                    default_by=_FAIL_CLOSED,
                    conversation_id=invocation.request.conversation_id,
                )
            ]
        )
        return rejected(refusal.reason)

    async def _consult(self, request: ApprovalRequest) -> dict[str, Decision]:
        """The approver's decisions, one per call; failures and bad answers reject."""
        try:
            if self.timeout is None:  # no cancel scope to open: the common, unbounded case
                answer: Any = await self.approver.decide(request)
            else:
                with anyio.fail_after(self.timeout):
                    answer = await self.approver.decide(request)
        except TimeoutError:
            return self._fail_closed(request, f"no decision within {self.timeout:g} s")
        except Exception as exc:
            return self._fail_closed(
                request, f"the approver failed ({type(exc).__name__})", safe_str(exc)[:500]
            )
        ids = [c.id for c in request.calls]
        given: list[Any] | None
        if isinstance(answer, Mapping):
            given = [answer.get(i) for i in ids]
        elif isinstance(answer, Sequence) and not isinstance(answer, str):
            given = list(answer) if len(answer) == len(ids) else None
        else:
            given = None
        if given is None:
            return self._fail_closed(request, "the approver's answer was malformed")
        decisions: dict[str, Decision] = {}
        invalid = []
        for call, decision in zip(request.calls, given, strict=True):
            if _valid(decision):
                decisions[call.id] = decision
            else:
                decisions[call.id] = Reject("no valid decision for this call", by=_FAIL_CLOSED)
                invalid.append(call)
        if invalid:
            _log_failure(self.approver, invalid, "no valid decision")
        return decisions

    def _fail_closed(
        self, request: ApprovalRequest, reason: str, detail: str = ""
    ) -> dict[str, Decision]:
        """Reject every call of `request` for `reason` (what the model reads), and log it."""
        _log_failure(self.approver, request.calls, f"{reason}: {detail}" if detail else reason)
        return _reject_all(request, reason)


def _log_failure(approver: Approver, calls: Sequence[ApprovalCall], why: str) -> None:
    # Never the arguments: they may be personal data, and no content logging is opted into.
    _log.warning(
        "approver %s gave no decision, rejecting %s: %s",
        _name(approver),
        ", ".join(f"{c.name} (call {c.id})" for c in calls),
        why,
        extra={"tool_names": [c.name for c in calls], "call_ids": [c.id for c in calls]},
    )


def _round_id() -> str:
    """A fresh id for an inline round's audit records: `inline_` and 128 random bits in hex
    (as `uuid4().hex` gives, without building a `UUID`)."""
    return f"inline_{os.urandom(16).hex()}"


def _valid(decision: object) -> TypeGuard[Decision]:
    if isinstance(decision, Approve):
        return decision.arguments is None or isinstance(decision.arguments, Mapping)
    return isinstance(decision, (Reject, Defer))


def _reject_all(request: ApprovalRequest, reason: str) -> dict[str, Decision]:
    return {c.id: Reject(reason, by=_FAIL_CLOSED) for c in request.calls}


def _name(approver: Approver) -> str:
    return str(getattr(approver, "user", None) or getattr(approver, "name", None) or approver)


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    return parse_argument_object(call.arguments)


def _rule_allows(rule: StandingRule, item: ApprovalCall, tool: Tool | None) -> bool:
    """Whether `rule` allows the call `item` (validated arguments) of `tool`."""
    if rule.allows(item.name, item.arguments):
        return True
    if rule.arguments is None or tool is None or not rule.allows(item.name, rule.arguments):
        return False  # another tool's, or revoked
    try:
        checked = tool.check_arguments(rule.arguments)
    except InvalidToolArguments:
        return False
    return arguments_fingerprint(checked) == item.fingerprint


def _checked_arguments(tool: Tool | None, call: ToolCall) -> ValidatedArguments | None:
    """The validated arguments of `call` to `tool`, or `None` if it cannot run."""
    parsed = _arguments(call)
    if tool is None or parsed is None:
        return None
    try:
        return tool.check_arguments(parsed)
    except InvalidToolArguments:
        return None


def _round_of(invocation: ToolInvocation) -> tuple[RoundCall, ...]:
    """The calls of the invocation's round, as the model sent them: id, tool, arguments
    fingerprint (what a resume's round must hold, exactly)."""
    found = []
    for call in invocation.round_calls or (invocation.call,):
        arguments = _arguments(call)
        fingerprint = arguments_fingerprint(arguments) if arguments is not None else ""
        found.append(RoundCall(id=call.id, name=call.name, fingerprint=fingerprint))
    return tuple(found)


def _outcome(stored: str) -> ToolOutcome:
    for outcome in get_args(ToolOutcome):
        if outcome == stored:
            return cast(ToolOutcome, outcome)
    return "unknown"


__all__ = ["ARGUMENTS_CHANGED", "TRANSCRIPT_CHANGED", "ApprovalAdvisor", "Policy", "TurnApprovals"]
