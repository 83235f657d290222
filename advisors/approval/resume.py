"""Resuming a deferred approval: check, claim, run each approved call once, continue."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import fields, replace
from typing import Any, cast, get_args

from ...core.errors import ChainConfigurationError
from ...core.invocation import ToolOutcome, ToolResult
from ...core.manager import ToolPipeline
from ...core.messages import AssistantMessage, Message, ToolCall
from ...core.options import ChatOptions, OutputSchema
from ...core.parts import DocumentPart, ImagePart, TextPart
from ...core.request import ChatRequest
from ...core.response import ChatResponse
from ...core.resumption import ResumedCall, Resumption
from ...core.subchain import SUBCHAIN_APPROVAL, resuming_context
from ...core.tools import InvalidToolArguments, Tool
from ...core.usage import Usage
from .store import ApprovalStore
from .types import (
    ApprovalAlreadyResolved,
    ApprovalCall,
    Approve,
    InvalidApprovalDecisions,
    PendingCall,
    PendingRecord,
    Reject,
    StandingRule,
    StoredResult,
    arguments_fingerprint,
    audit_record,
    json_arguments,
    rule_audit,
)

_log = logging.getLogger("advisorchain.approval")

ARGUMENTS_CHANGED = (
    "the call's arguments differ from the arguments that were approved, so it is not run"
)
"""Why a resume refuses an approved call whose arguments are not those shown for approval."""

UNKNOWN_OUTCOME = (
    "Error: the outcome of this call is unknown: it was started before a crash and is not "
    "run again. Check whether it took effect before trying again."
)


EDITED_NOTE = (
    "Note: the approver changed the arguments of this call to {arguments} (not those you sent)."
)
"""What the model reads before the result of a call an approver edited: the arguments it
ran with (or was refused with), in JSON."""

EDITED_ARGUMENTS = "approval_edited_arguments"
"""`ToolResult.metadata` key of an edited call's result: the arguments it ran with (JSON)."""


def edited_result(
    result: ToolResult, asked: Mapping[str, Any], ran: Mapping[str, Any]
) -> ToolResult:
    """`result` of a call an approver edited from `asked` to `ran`, as the model reads it:
    led by a note with the arguments that ran (`EDITED_NOTE`), so the transcript, memory
    and the model's next request tell what ran while the assistant message (and any
    provider reasoning signed with it) stays as the model wrote it. Unchanged when `ran`
    has the fingerprint of `asked` or the result is still pending."""
    if result.outcome == "pending" or arguments_fingerprint(ran) == arguments_fingerprint(asked):
        return result
    shown = json_arguments(ran)
    note = EDITED_NOTE.format(
        arguments=json.dumps(shown, ensure_ascii=False, sort_keys=True, default=str)
    )
    content: str | tuple[TextPart | ImagePart | DocumentPart, ...]
    if isinstance(result.content, str):
        content = f"{note}\n{result.content}"
    else:
        content = (TextPart(text=note), *result.content)
    metadata = {**result.metadata, EDITED_ARGUMENTS: shown}
    return replace(result, content=content, metadata=metadata)


def remembered_arguments(tool: Tool | None, decision: Approve) -> Approve:
    """`decision` with its edited arguments validated by `tool` (the values a standing
    rule made from it is matched against), when they fit; else as it is."""
    if decision.arguments is None or tool is None:
        return decision
    try:
        checked = tool.check_arguments(decision.arguments)
    except InvalidToolArguments:
        return decision
    return replace(decision, arguments=json_arguments(checked))


def rejected(reason: str) -> ToolResult:
    """The result the model reads for a rejected call."""
    return ToolResult(
        content=f"Error: not executed, the call was rejected: {reason}", outcome="rejected"
    )


def options_to_dict(options: ChatOptions) -> dict[str, Any]:
    """`options` as plain JSON values (set fields only)."""
    values: dict[str, Any] = {}
    for f in fields(options):
        value = getattr(options, f.name)
        if f.name == "extra":
            if value:
                values["extra"] = dict(value)
        elif isinstance(value, OutputSchema):
            values[f.name] = value.to_dict()
        elif value is not None:
            values[f.name] = list(value) if f.name == "stop" else value
    return values


def options_from_dict(values: Mapping[str, Any]) -> ChatOptions:
    """The `ChatOptions` that `options_to_dict` produced `values` from."""
    known: dict[str, Any] = {k: tuple(v) if k == "stop" else v for k, v in values.items()}
    if isinstance(known.get("output_schema"), Mapping):
        known["output_schema"] = OutputSchema.from_dict(known["output_schema"])
    return ChatOptions(**known)


async def allow(
    store: ApprovalStore,
    conversation_id: str,
    name: str,
    *,
    arguments: Mapping[str, Any] | None,
    by: str,
    call_id: str = "",
) -> StandingRule:
    """Make and store a standing rule, audited as `allowed`."""
    rule = StandingRule(
        id=f"rule_{uuid.uuid4().hex}",
        conversation_id=conversation_id,
        name=name,
        arguments=None if arguments is None else dict(arguments),
        created_by=by,
        created_at=time.time(),
    )
    await store.add_rule(rule, rule_audit(rule, "allowed", by, call_id))
    return rule


async def remember(
    store: ApprovalStore,
    call: ApprovalCall,
    decision: Approve,
    conversation_id: str | None,
    default_by: str,
) -> StandingRule | None:
    """The standing rule an `Approve(remember=...)` asks for, stored; else `None`."""
    if decision.remember is None or conversation_id is None:
        return None
    arguments = None
    if decision.remember == "arguments":
        arguments = decision.arguments if decision.arguments is not None else call.arguments
    by = decision.by or default_by
    return await allow(
        store, conversation_id, call.name, arguments=arguments, by=by, call_id=call.id
    )


def check_decisions(
    record: PendingRecord, decisions: Mapping[str, Any]
) -> dict[str, Approve | Reject]:
    """The decisions, if they answer exactly the pending calls; else a clear error."""
    if not isinstance(decisions, Mapping):
        raise InvalidApprovalDecisions("decisions must map each pending call's id to a decision")
    pending = [c.call.id for c in record.calls]
    unknown = sorted(str(k) for k in decisions if k not in pending)
    if unknown:
        raise InvalidApprovalDecisions(
            f"decisions for calls that are not pending in {record.id!r}: {', '.join(unknown)}"
        )
    missing = [i for i in pending if i not in decisions]
    if missing:
        raise InvalidApprovalDecisions(f"no decision for pending call(s): {', '.join(missing)}")
    checked: dict[str, Approve | Reject] = {}
    for call_id in pending:
        decision = decisions[call_id]
        if isinstance(decision, Reject) or (
            isinstance(decision, Approve)
            and (decision.arguments is None or isinstance(decision.arguments, Mapping))
        ):
            checked[call_id] = decision
        else:
            raise InvalidApprovalDecisions(
                f"the decision for {call_id!r} must be Approve() or Reject(reason), "
                f"not {type(decision).__name__}"
            )
    return checked


def nested_decisions(
    record: PendingRecord, decisions: Mapping[str, Any]
) -> tuple[Mapping[str, Any], dict[str, Mapping[str, Any]]]:
    """Split off the decisions for calls that wait for a sub-chain's suspended turn.

    Such a call is decided by that turn's decisions (a map by the sub-chain's call ids,
    `Suspension.decisions` builds it) or by `Reject(reason)`; a map stands for `Approve()`
    of the call in `decisions`, the map itself goes in the second value, by call id.
    """
    if not isinstance(decisions, Mapping):
        return decisions, {}
    own = dict(decisions)
    inner: dict[str, Mapping[str, Any]] = {}
    for pending in record.calls:
        if SUBCHAIN_APPROVAL not in pending.call.details or pending.id not in own:
            continue
        decision = own[pending.id]
        if isinstance(decision, Mapping):
            inner[pending.id] = decision
            own[pending.id] = Approve(by="resume")
        elif not isinstance(decision, Reject):
            raise InvalidApprovalDecisions(
                f"the call {pending.id!r} waits for the sub-agent's approval "
                f"{pending.call.details[SUBCHAIN_APPROVAL]!r}: decide it with that approval's "
                "decisions (a map by call id, see Suspension.decisions) or Reject(reason)"
            )
    return own, inner


def _tool_calls(messages: Sequence[Message]) -> dict[str, list[ToolCall]]:
    """The calls of the last assistant message that has some, by id."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls: dict[str, list[ToolCall]] = {}
            for c in message.tool_calls:
                calls.setdefault(c.id, []).append(c)
            return calls
    return {}


def _matches(
    found: list[ToolCall], pending: PendingCall, tools: ToolPipeline, request: ChatRequest
) -> bool:
    """Whether the transcript holds exactly one call with the pending call's id, and with
    the arguments the approver was shown (validated, as they would run)."""
    if len(found) != 1:
        return False
    prepared = tools.prepare(request, found[0])
    return (
        not isinstance(prepared, ToolResult)
        and arguments_fingerprint(prepared.arguments) == pending.call.fingerprint
    )


async def resume_turn(
    store: ApprovalStore,
    resumed: MutableMapping[str, str],
    pending_id: str,
    decisions: Mapping[str, Any],
    request: ChatRequest,
    tools: ToolPipeline,
) -> ChatRequest | None:
    """The body of `ApprovalAdvisor.resume_turn`: the request that continues the turn.

    Nothing is written before the decisions and tools are checked; then the claim makes
    this resume the only one, and each approved call is marked started before it runs.
    `resumed` is the advisor's map, in the turn's context, of the calls this resume lets
    through its own `call_tool` hook (id -> fingerprint of the arguments that may run).
    """
    record = await store.get(pending_id)
    if record is None:
        return None
    if record.status == "completed":
        raise ApprovalAlreadyResolved(f"approval {pending_id!r} was already resolved")
    decisions, inner = nested_decisions(record, decisions)
    checked = check_decisions(record, decisions)
    missing = [n for n in record.tool_names if request.find_tool(n) is None]
    if missing:
        raise ChainConfigurationError(
            f"resume needs the tools the suspended turn had; missing: {', '.join(missing)}"
        )
    audit = [
        audit_record(
            pending_id,
            c.call,
            checked[c.call.id],
            default_by="resume",
            conversation_id=record.conversation_id,
        )
        for c in record.calls
    ]
    token = uuid.uuid4().hex
    claimed = await store.claim(pending_id, token, checked, audit)
    if record.status == "pending":  # the first claim: a taken-over one made them already
        for c in record.calls:
            decision = checked[c.id]
            if isinstance(decision, Approve):
                decision = remembered_arguments(request.find_tool(c.call.name), decision)
                await remember(store, c.call, decision, record.conversation_id, "resume")

    base = replace(
        request,
        messages=claimed.messages,
        conversation_id=claimed.conversation_id or request.conversation_id,
        options=request.options.merged(options_from_dict(claimed.options)),
    )
    calls = _tool_calls(claimed.messages)
    settled: list[ResumedCall] = []
    for pending in claimed.calls:
        found = calls.get(pending.call.id, [])
        call = found[0] if found else ToolCall(id=pending.call.id, name=pending.call.name)
        start = time.perf_counter()
        result = await _settle(
            store,
            resumed,
            tools,
            base,
            call,
            pending,
            token,
            pending_id,
            _matches(found, pending, tools, base),
            inner.get(pending.id),
        )
        settled.append(
            ResumedCall(
                call=call,
                message=result.to_message(call),
                outcome=result.outcome,
                duration=time.perf_counter() - start,
                usage=result.value.usage if isinstance(result.value, ChatResponse) else Usage(),
            )
        )
    resumed.clear()  # the continuation's own calls are asked about again
    await store.complete(pending_id, token)
    resumption = Resumption(id=pending_id, calls=tuple(settled))
    return replace(base.appended(*resumption.messages), resumption=resumption)


async def _settle(
    store: ApprovalStore,
    resumed: MutableMapping[str, str],
    tools: ToolPipeline,
    request: ChatRequest,
    call: ToolCall,
    pending: PendingCall,
    token: str,
    pending_id: str,
    matches: bool,
    inner: Mapping[str, Any] | None = None,
) -> ToolResult:
    """The result of one pending call: stored, rejected, unknown, or run now.

    An approved call runs only if `matches`: the transcript's call is the one the
    approver was shown, id and arguments; else it is refused, and the refusal audited.
    A call that waits for a sub-chain's suspended turn runs with `inner`, that turn's
    decisions: the sub-chain resumes its turn instead of starting one.
    """
    if pending.state == "done" and pending.result is not None:
        return ToolResult(content=pending.result.content, outcome=_outcome(pending.result.outcome))
    if pending.state == "rejected" and isinstance(pending.decision, Reject):
        result = rejected(pending.decision.reason)
    elif pending.state == "started":
        result = ToolResult(content=UNKNOWN_OUTCOME, outcome="unknown")
    elif pending.state == "approved" and isinstance(pending.decision, Approve):
        if not await store.start_call(pending_id, call.id, token):
            raise ApprovalAlreadyResolved(f"approval {pending_id!r} is no longer claimed here")
        if not matches:
            return await _refuse(store, request, pending_id, call, pending, token)
        result = await _run(tools, request, call, pending.decision, pending, inner, resumed)
        await store.finish_call(
            pending_id, call.id, token, StoredResult(content=result.content, outcome=result.outcome)
        )
        return result
    else:  # not reachable after a claim, which decides every call; never run it
        return rejected("no decision was recorded")
    await store.finish_call(
        pending_id, call.id, token, StoredResult(content=result.content, outcome=result.outcome)
    )
    return result


async def _refuse(
    store: ApprovalStore,
    request: ChatRequest,
    pending_id: str,
    call: ToolCall,
    pending: PendingCall,
    token: str,
) -> ToolResult:
    """Answer an approved call whose arguments are not those approved, without running it."""
    _log.warning(
        "approval %s: refused tool call %r (%s): its arguments are not those approved",
        pending_id,
        call.name,
        call.id,
    )
    await store.record(
        [
            audit_record(
                pending_id,
                pending.call,
                Reject(ARGUMENTS_CHANGED, by="advisorchain"),
                default_by="advisorchain",
                conversation_id=request.conversation_id,
            )
        ]
    )
    result = rejected(ARGUMENTS_CHANGED)
    await store.finish_call(
        pending_id, call.id, token, StoredResult(content=result.content, outcome=result.outcome)
    )
    return result


def _outcome(stored: str) -> ToolOutcome:
    for outcome in get_args(ToolOutcome):
        if outcome == stored:
            return cast(ToolOutcome, outcome)
    return "unknown"


async def _run(
    tools: ToolPipeline,
    request: ChatRequest,
    call: ToolCall,
    decision: Approve,
    pending: PendingCall,
    inner: Mapping[str, Any] | None,
    resumed: MutableMapping[str, str],
) -> ToolResult:
    """Run an approved call (with the decision's arguments, if edited) through the chain's
    hooks; `resumed` lets it through this advisor's own hook, with exactly the validated
    arguments that run."""
    prepared = tools.prepare(request, call)
    if isinstance(prepared, ToolResult):
        return prepared
    asked = prepared.arguments
    if decision.arguments is not None:
        prepared = prepared.with_arguments(decision.arguments)
    resumed[call.id] = arguments_fingerprint(prepared.arguments)
    waits_for = pending.call.details.get(SUBCHAIN_APPROVAL)
    if isinstance(waits_for, str):
        if inner is None:  # a takeover after a crash before the call started
            return rejected("the sub-agent's decisions were not given with this resume")
        context = resuming_context(prepared.context, waits_for, inner)
        prepared = replace(prepared, context=context)
    result = await tools.run(prepared)
    if result.outcome == "pending":  # a resume settles every call: nothing may wait again
        return ToolResult(
            content="Error: SubchainSuspendedError: the call stopped waiting for another "
            "approval while its turn was resumed, which is not supported.",
            outcome="error",
            value=result.value,
        )
    return edited_result(result, asked, prepared.arguments)
