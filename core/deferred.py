"""Deferred tool calls as data, and the decisions that resume them.

A `call_tool` hook or a tool that cannot finish a call now answers it with
`ToolResult.defer(kind, metadata=...)`: a result whose outcome is `deferred`. The tool loop
finishes the round's other calls and ends the turn with `finish_reason="deferred"` and
`ChatResponse.deferred`, one `DeferredCall` per waiting call. The round's assistant
message in `response.messages` keeps, in its `provider_data["advisorchain"]`, a record of
each waiting call (kind, metadata, the decisions it accepts, and the state a resume needs),
so the transcript alone is enough to resume from: no store holds a copy of it.

A resume is an ordinary turn: `chain.call([*history, *response.messages], decisions=...)`
(or, with a `MemoryAdvisor`, `chain.call(decisions=..., conversation_id=...)`). The tool
loop checks every decision against the records first (`check_decisions`: one
`InvalidDecisions` for unknown ids, calls that do not wait, a decision of a kind the call
does not accept, nested ids included) before anything runs; then it settles the decided
calls through the chain's `call_tool` hooks, each invocation carrying its `decision`, and
goes on as after any round.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from .errors import InvalidDecisions
from .messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    dump_messages,
    load_messages,
)
from .schema import check_json_schema

_EMPTY: Mapping[str, Any] = MappingProxyType({})

RECORD_KEY = "advisorchain"
"""The key of an assistant message's `provider_data` that holds its deferral records
(providers read only their own keys, so it is never sent to a model)."""

Remember: TypeAlias = Literal["tool", "arguments"]
"""What an `Approve(remember=...)` keeps allowing for the rest of the conversation: every
call of the tool, or calls of the tool with exactly these arguments."""


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call; with `arguments`, run it with these instead (validated again).

    `by` names who decided (for an audit). `remember="tool"` asks the link that deferred
    the call to also allow every later call of this tool in this conversation;
    `remember="arguments"` only later calls with exactly the arguments that run now.
    """

    arguments: Mapping[str, Any] | None = None
    by: str | None = None
    remember: Remember | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run the call; the model reads `reason`."""

    reason: str = "rejected"
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """The call's result, produced elsewhere (external work, a user's answer): the tool
    is not run again; `value` is converted as the tool's own return value would be."""

    value: Any


Decision: TypeAlias = "Approve | Reject | Result | Mapping[str, Decision]"
"""What a resume gives one deferred call: `Approve()`, `Reject(reason)`, `Result(value)`,
or, for a call that is itself a deferred turn (a sub-chain), that turn's decisions."""

DecisionKind: TypeAlias = Literal["approve", "reject", "result", "decisions"]
"""The kinds of decision a deferred call may accept (`ToolResult.defer(accepts=...)`)."""


@dataclass(frozen=True, slots=True)
class DeferredCall:
    """A call that waits: the `ToolCall`, its `kind` (`"approval"`, `"external"`,
    `"elicitation"`, `"subchain"` or a link's own string) and `metadata` for whoever
    decides (an approval id, what to show, a schema). `nested` holds, for a call that is
    itself a deferred turn (a sub-chain used as a tool), that turn's own deferred calls;
    decide them with a mapping by their ids. `accepts` names the decisions it takes."""

    call: ToolCall
    kind: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    nested: tuple[DeferredCall, ...] = ()
    accepts: tuple[DecisionKind, ...] = ("result", "reject")

    @property
    def id(self) -> str:
        """The call's id: the key of its decision."""
        return self.call.id

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.call.name


@dataclass(frozen=True, slots=True)
class Deferral:
    """How a deferred result is resumed (`ToolResult.resume`): the decisions it accepts,
    JSON `state` the resume needs (kept in the transcript, never shown to a model), an
    optional JSON schema every `Result.value` must fit, and the nested calls of an inner
    deferred turn (whose transcript is then `state`)."""

    accepts: tuple[DecisionKind, ...] = ("result", "reject")
    state: Any = None
    result_schema: Mapping[str, Any] | None = None
    nested: tuple[DeferredCall, ...] = ()


@dataclass(frozen=True, slots=True)
class Waiting:
    """A transcript's waiting round: its assistant message (at `index`), the records of
    its calls that wait, by id, and the calls it holds."""

    index: int
    message: AssistantMessage
    records: Mapping[str, Mapping[str, Any]]

    def deferred_call(self, call: ToolCall) -> DeferredCall:
        """The `DeferredCall` of one waiting call, from its record."""
        return deferred_call(call, self.records[call.id])

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The waiting calls, in call order."""
        return tuple(c for c in self.message.tool_calls if c.id in self.records)


def to_json(value: Any) -> Any:
    """`value` as plain JSON values (anything else by its `repr`)."""
    return json.loads(json.dumps(value, default=repr, ensure_ascii=False))


def record(kind: str, metadata: Mapping[str, Any], resume: Deferral | None) -> dict[str, Any]:
    """The JSON record the loop keeps of one waiting call."""
    resume = resume or Deferral()
    values: dict[str, Any] = {
        "kind": kind,
        "metadata": to_json(dict(metadata)),
        "accepts": list(resume.accepts),
    }
    if resume.state is not None:
        values["state"] = to_json(resume.state)
    if resume.result_schema is not None:
        values["result_schema"] = to_json(dict(resume.result_schema))
    if resume.nested:
        values["nested"] = [_dump_deferred(d) for d in resume.nested]
    return values


def _dump_deferred(call: DeferredCall) -> dict[str, Any]:
    return {
        "call": call.call.model_dump(mode="json", exclude={"provider_data"}),
        "kind": call.kind,
        "metadata": to_json(dict(call.metadata)),
        "accepts": list(call.accepts),
        "nested": [_dump_deferred(d) for d in call.nested],
    }


def _load_deferred(values: Mapping[str, Any]) -> DeferredCall:
    return DeferredCall(
        call=ToolCall.model_validate(values["call"]),
        kind=str(values["kind"]),
        metadata=MappingProxyType(dict(values.get("metadata") or {})),
        nested=tuple(_load_deferred(v) for v in values.get("nested") or ()),
        accepts=tuple(values.get("accepts") or ("result", "reject")),
    )


def deferred_call(call: ToolCall, values: Mapping[str, Any]) -> DeferredCall:
    """The `DeferredCall` a record describes."""
    return DeferredCall(
        call=call,
        kind=str(values.get("kind", "")),
        metadata=MappingProxyType(dict(values.get("metadata") or {})),
        nested=tuple(_load_deferred(v) for v in values.get("nested") or ()),
        accepts=tuple(values.get("accepts") or ("result", "reject")),
    )


def with_records(
    message: AssistantMessage, records: Mapping[str, Mapping[str, Any]]
) -> AssistantMessage:
    """`message` keeping `records` (of its waiting calls, by id) in its `provider_data`."""
    data = dict(message.provider_data or {})
    data[RECORD_KEY] = {"deferred": {k: dict(v) for k, v in records.items()}}
    return message.model_copy(update={"provider_data": data})


def records_of(message: Message) -> Mapping[str, Mapping[str, Any]]:
    """The deferral records an assistant message keeps (empty for any other message)."""
    if not isinstance(message, AssistantMessage) or not message.provider_data:
        return _EMPTY
    ours = message.provider_data.get(RECORD_KEY)
    if not isinstance(ours, Mapping):
        return _EMPTY
    found = ours.get("deferred")
    return found if isinstance(found, Mapping) else _EMPTY


def waiting_round(messages: Sequence[Message]) -> Waiting | None:
    """The round the transcript ends with, if some of its calls wait for a decision: the
    last assistant message with deferral records, followed only by tool results, of
    which none answers a recorded call. `None` otherwise."""
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
            continue
        if not isinstance(message, AssistantMessage):
            return None
        records = records_of(message)
        if not records:
            return None
        waiting = {
            c.id: records[c.id]
            for c in message.tool_calls
            if c.id in records and c.id not in answered and isinstance(records[c.id], Mapping)
        }
        if not waiting:
            return None
        return Waiting(index=i, message=message, records=waiting)
    return None


def unanswered(messages: Sequence[Message]) -> tuple[str, ...]:
    """The ids of recorded calls of the transcript's last assistant message that no tool
    result answers, when a user message follows them (a new turn started while they
    wait); empty otherwise."""
    answered: set[str] = set()
    newer_user = False
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AssistantMessage):
            if not newer_user or not message.tool_calls:
                return ()
            records = records_of(message)
            return tuple(
                c.id for c in message.tool_calls if c.id in records and c.id not in answered
            )
        else:
            newer_user = True
    return ()


def decision_kind(decision: object) -> DecisionKind | None:
    """The kind of a decision, or `None` when it is none."""
    if isinstance(decision, Approve):
        if decision.arguments is None or isinstance(decision.arguments, Mapping):
            return "approve"
        return None
    if isinstance(decision, Reject):
        return "reject" if isinstance(decision.reason, str) else None
    if isinstance(decision, Result):
        return "result"
    if isinstance(decision, Mapping):
        return "decisions"
    return None


def check_decisions(
    messages: Sequence[Message], decisions: Mapping[str, Any] | None, where: str = ""
) -> Waiting | None:
    """Check `decisions` against the transcript's waiting round; the round, or `None`
    when the transcript does not end with one (then `decisions` must be empty).

    Raises one `InvalidDecisions` naming every problem: a decisions object that is no
    mapping, ids of calls that do not wait (unknown, or already answered), a value that
    is no decision, a decision the call does not accept (`Approve` of external work, a
    nested mapping for a call that is no deferred turn), a `Result` whose value does not
    fit the call's result schema, and the same, recursively, for each nested mapping
    against the inner turn's own transcript. A transcript that ends with waiting calls
    needs at least one decision.
    """
    if decisions is not None and not isinstance(decisions, Mapping):
        raise InvalidDecisions(
            f"decisions{where} must map call ids to decisions, not {type(decisions).__name__}"
        )
    waiting = waiting_round(messages)
    problems: list[str] = []
    stranded = unanswered(messages) if waiting is None and not where else ()
    if stranded:
        problems.append(
            f"calls of an earlier turn still wait for decisions ({', '.join(stranded)}): "
            "resume them first (chain.call(transcript, decisions=...), Reject(reason) to drop "
            "one), then start a new turn"
        )
    _check(waiting, decisions or {}, where, problems)
    if waiting is not None and not decisions and not where:
        problems.append(
            "the transcript ends with calls waiting for decisions "
            f"({', '.join(c.id for c in waiting.calls)}): pass decisions={{call_id: ...}}"
        )
    if problems:
        raise InvalidDecisions("; ".join(problems))
    return waiting


def _check(
    waiting: Waiting | None, decisions: Mapping[str, Any], where: str, problems: list[str]
) -> None:
    records = waiting.records if waiting is not None else _EMPTY
    for call_id, decision in decisions.items():
        name = f"{where}[{call_id!r}]" if where else repr(call_id)
        values = records.get(call_id) if isinstance(call_id, str) else None
        if values is None:
            problems.append(f"{name} is not a call that waits for a decision")
            continue
        kind = decision_kind(decision)
        accepts = tuple(values.get("accepts") or ())
        if kind is None:
            problems.append(
                f"{name}: {type(decision).__name__} is not a decision (Approve(), "
                "Reject(reason), Result(value), or a mapping for a nested turn)"
            )
        elif kind not in accepts:
            problems.append(
                f"{name} is a {values.get('kind')!r} call: it accepts {_names(accepts)}, "
                f"not {type(decision).__name__}"
            )
        elif kind == "result":
            schema = values.get("result_schema")
            if isinstance(schema, Mapping):
                problems.extend(
                    f"{name}: {e}" for e in check_json_schema(decision.value, schema, "value")
                )
        elif kind == "decisions":
            inner = _inner_transcript(values.get("state"))
            if inner is None:
                problems.append(f"{name}: the call keeps no inner transcript to resume")
                continue
            _check(waiting_round(inner), decision, f"{where}[{call_id!r}]", problems)


def inner_transcript(state: Any) -> tuple[Message, ...] | None:
    """The inner turn's transcript a nested deferred call keeps as its `state`."""
    return _inner_transcript(state)


def _inner_transcript(state: Any) -> tuple[Message, ...] | None:
    if not isinstance(state, Mapping) or not isinstance(state.get("messages"), list):
        return None
    try:
        return tuple(load_messages(json.dumps(state["messages"])))
    except ValueError:
        return None


def transcript_state(messages: Sequence[Message]) -> dict[str, Any]:
    """The `state` that keeps an inner turn's transcript (see `inner_transcript`)."""
    return {"messages": json.loads(dump_messages(list(messages)))}


_KIND_NAMES = {
    "approve": "Approve()",
    "reject": "Reject(reason)",
    "result": "Result(value)",
    "decisions": "a mapping of its inner calls' decisions",
}


def _names(accepts: Sequence[str]) -> str:
    return " or ".join(_KIND_NAMES.get(a, a) for a in accepts) or "nothing"


__all__ = [
    "RECORD_KEY",
    "Approve",
    "Decision",
    "DecisionKind",
    "DeferredCall",
    "Deferral",
    "Reject",
    "Remember",
    "Result",
    "Waiting",
    "check_decisions",
    "decision_kind",
    "deferred_call",
    "inner_transcript",
    "record",
    "records_of",
    "to_json",
    "transcript_state",
    "unanswered",
    "waiting_round",
    "with_records",
]
