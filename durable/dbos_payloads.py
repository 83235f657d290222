"""What the DBOS runner stores: responses, tool results, stream events and decisions as JSON.

Every payload is a plain JSON object with a version, `{"v": 1, ...}`, so a workflow
recorded by this version reads back after the next one (a reader refuses a version it
does not know with `PayloadError` rather than misreading it). Messages use
`core.messages.dump_messages`' JSON. What cannot be stored is left out and documented:
a tool result's `value` and `error` (links above the tool step see its content and
outcome), a response's structured `output`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, cast

from pydantic import TypeAdapter

from ..core.deferred import Approve, Decision, Deferral, DeferredCall, Reject, Result
from ..core.errors import AdvisorChainError
from ..core.events import (
    AnswerDiscarded,
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
)
from ..core.invocation import ToolResult
from ..core.messages import Message, ToolCall, ToolMessage
from ..core.parts import DocumentPart, ImagePart, TextPart
from ..core.response import ChatResponse
from ..core.usage import Usage
from .ledger import _outcome

VERSION = 1
"""The payload version this module writes (and the newest it reads)."""

Payload = dict[str, Any]

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_PARTS: TypeAdapter[tuple[TextPart | ImagePart | DocumentPart, ...]] = TypeAdapter(
    tuple[TextPart | ImagePart | DocumentPart, ...]
)


class PayloadError(AdvisorChainError):
    """A stored payload this version cannot read, or a value that cannot be stored."""


def _versioned(data: Payload) -> Payload:
    return {"v": VERSION, **data}


def _check(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping) or not isinstance(data.get("v"), int):
        raise PayloadError(f"a stored {what} is not a versioned payload")
    if data["v"] > VERSION:
        raise PayloadError(
            f"a stored {what} has payload version {data['v']}, newer than this version "
            f"reads ({VERSION}): upgrade advisorchain on this worker"
        )
    return data


def dump_messages(messages: tuple[Message, ...] | list[Message]) -> list[Any]:
    """Messages as JSON values."""
    return cast(list[Any], _MESSAGES.dump_python(list(messages), mode="json"))


def load_messages(data: Any) -> tuple[Message, ...]:
    """Messages from `dump_messages`."""
    return tuple(_MESSAGES.validate_python(data))


def _call(call: ToolCall) -> Any:
    return call.model_dump(mode="json")


def dump_deferred(call: DeferredCall) -> Payload:
    return {
        "call": _call(call.call),
        "kind": call.kind,
        "metadata": dict(call.metadata),
        "nested": [dump_deferred(n) for n in call.nested],
        "accepts": list(call.accepts),
    }


def load_deferred(data: Mapping[str, Any]) -> DeferredCall:
    return DeferredCall(
        call=ToolCall.model_validate(data["call"]),
        kind=data["kind"],
        metadata=data["metadata"],
        nested=tuple(load_deferred(n) for n in data["nested"]),
        accepts=tuple(data["accepts"]),
    )


def dump_response(response: ChatResponse) -> Payload:
    """A response (one model call's or a turn's) as a payload; `output` is not kept."""
    return _versioned(
        {
            "messages": dump_messages(response.messages),
            "finish_reason": response.finish_reason,
            "usage": dataclasses.asdict(response.usage),
            "model": response.model,
            "id": response.id,
            "deferred": [dump_deferred(d) for d in response.deferred],
        }
    )


def load_response(data: Any) -> ChatResponse:
    """A response from `dump_response`."""
    found = _check(data, "response")
    return ChatResponse(
        messages=load_messages(found["messages"]),
        finish_reason=found["finish_reason"],
        usage=Usage(**found["usage"]),
        model=found["model"],
        id=found["id"],
        deferred=tuple(load_deferred(d) for d in found["deferred"]),
    )


def _content(content: str | tuple[TextPart | ImagePart | DocumentPart, ...]) -> Any:
    return content if isinstance(content, str) else _PARTS.dump_python(content, mode="json")


def _load_content(data: Any) -> str | tuple[TextPart | ImagePart | DocumentPart, ...]:
    return data if isinstance(data, str) else _PARTS.validate_python(data)


def dump_tool_result(result: ToolResult) -> Payload:
    """A tool result as a payload: content, outcome, `return_direct`, and for a deferred
    result its kind, metadata and how a resume settles it; not `value` nor `error`."""
    deferral = result.resume
    if deferral is not None and deferral.nested:
        raise PayloadError("a deferred result with nested calls (a sub-chain) is not stored")
    return _versioned(
        {
            "content": _content(result.content),
            "outcome": result.outcome,
            "return_direct": result.return_direct,
            "kind": result.kind,
            "metadata": json.loads(json.dumps(dict(result.metadata), default=str)),
            "resume": None
            if deferral is None
            else {
                "accepts": list(deferral.accepts),
                "state": deferral.state,
                "result_schema": deferral.result_schema,
            },
        }
    )


def load_tool_result(data: Any) -> ToolResult:
    """A tool result from `dump_tool_result`."""
    found = _check(data, "tool result")
    resume = found["resume"]
    return ToolResult(
        content=_load_content(found["content"]),
        outcome=_outcome(found["outcome"]),
        return_direct=found["return_direct"],
        kind=found["kind"],
        metadata=found["metadata"],
        resume=None
        if resume is None
        else Deferral(
            accepts=tuple(resume["accepts"]),
            state=resume["state"],
            result_schema=resume["result_schema"],
        ),
    )


def dump_event(event: StreamEvent) -> Payload:
    """A stream event as a payload (`type` names it)."""
    if isinstance(event, TextDelta):
        return _versioned({"type": "text", "text": event.text})
    if isinstance(event, ReasoningDelta):
        return _versioned({"type": "reasoning", "text": event.text, "index": event.index})
    if isinstance(event, ToolCallDelta):
        return _versioned(
            {
                "type": "tool_call_delta",
                "index": event.index,
                "id": event.id,
                "name": event.name,
                "arguments": event.arguments,
                "provider_data": None if event.provider_data is None else dict(event.provider_data),
            }
        )
    if isinstance(event, ToolCallStarted):
        return _versioned({"type": "tool_started", "call": _call(event.call)})
    if isinstance(event, ToolCallFinished):
        return _versioned(
            {
                "type": "tool_finished",
                "call": _call(event.call),
                "result": dump_messages([event.result])[0],
                "outcome": event.outcome,
                "duration": event.duration,
            }
        )
    if isinstance(event, AnswerDiscarded):
        return _versioned({"type": "discarded", "reason": event.reason, "attempt": event.attempt})
    if isinstance(event, ToolProgress):
        return _versioned(
            {
                "type": "progress",
                "call_id": event.call_id,
                "progress": event.progress,
                "total": event.total,
                "message": event.message,
                "event": None if event.event is None else dump_event(event.event),
            }
        )
    return _versioned({"type": "completed", "response": dump_response(event.response)})


def load_event(data: Any) -> StreamEvent:
    """A stream event from `dump_event`."""
    found = _check(data, "stream event")
    kind = found.get("type")
    if kind == "text":
        return TextDelta(found["text"])
    if kind == "reasoning":
        return ReasoningDelta(found["text"], found["index"])
    if kind == "tool_call_delta":
        return ToolCallDelta(
            index=found["index"],
            id=found["id"],
            name=found["name"],
            arguments=found["arguments"],
            provider_data=found["provider_data"],
        )
    if kind == "tool_started":
        return ToolCallStarted(ToolCall.model_validate(found["call"]))
    if kind == "tool_finished":
        result = load_messages([found["result"]])[0]
        assert isinstance(result, ToolMessage)
        return ToolCallFinished(
            call=ToolCall.model_validate(found["call"]),
            result=result,
            outcome=found["outcome"],
            duration=found["duration"],
        )
    if kind == "discarded":
        return AnswerDiscarded(found["reason"], found["attempt"])
    if kind == "progress":
        nested = found["event"]
        return ToolProgress(
            call_id=found["call_id"],
            progress=found["progress"],
            total=found["total"],
            message=found["message"],
            event=None if nested is None else load_event(nested),
        )
    if kind == "completed":
        return ResponseCompleted(load_response(found["response"]))
    raise PayloadError(f"a stored stream event has an unknown type {kind!r}")


def dump_decisions(decisions: Mapping[str, Decision]) -> Payload:
    """Decisions (`Approve`, `Reject`, `Result`, nested mappings) as a payload.

    `PayloadError` for anything else, or a `Result` value that is not JSON."""
    return _versioned({"decisions": _dump_decisions(decisions)})


def _dump_decisions(decisions: Mapping[str, Decision]) -> dict[str, Any]:
    if not isinstance(decisions, Mapping):
        raise PayloadError(
            f"decisions must map call ids to decisions, not {type(decisions).__name__}"
        )
    out: dict[str, Any] = {}
    for call_id, decision in decisions.items():
        if not isinstance(call_id, str):
            raise PayloadError("decision keys must be call ids (strings)")
        if isinstance(decision, Approve):
            out[call_id] = {
                "approve": {
                    "arguments": None if decision.arguments is None else dict(decision.arguments),
                    "by": decision.by,
                    "remember": decision.remember,
                }
            }
        elif isinstance(decision, Reject):
            out[call_id] = {"reject": {"reason": decision.reason, "by": decision.by}}
        elif isinstance(decision, Result):
            out[call_id] = {"result": decision.value}
        elif isinstance(decision, Mapping):
            out[call_id] = {"decisions": _dump_decisions(decision)}
        else:
            raise PayloadError(
                f"decision for {call_id!r} is a {type(decision).__name__}: use Approve, "
                "Reject, Result or a mapping of a sub-chain's decisions"
            )
    try:
        json.dumps(out)
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"a decision holds a value that is not JSON: {exc}") from None
    return out


def load_decisions(data: Any) -> dict[str, Decision]:
    """Decisions from `dump_decisions`."""
    return _load_decisions(_check(data, "decisions")["decisions"])


def _load_decisions(data: Mapping[str, Any]) -> dict[str, Decision]:
    out: dict[str, Decision] = {}
    for call_id, decision in data.items():
        if "approve" in decision:
            a = decision["approve"]
            out[call_id] = Approve(arguments=a["arguments"], by=a["by"], remember=a["remember"])
        elif "reject" in decision:
            r = decision["reject"]
            out[call_id] = Reject(reason=r["reason"], by=r["by"])
        elif "result" in decision:
            out[call_id] = Result(decision["result"])
        else:
            out[call_id] = _load_decisions(decision["decisions"])
    return out


__all__ = [
    "VERSION",
    "Payload",
    "PayloadError",
    "dump_decisions",
    "dump_deferred",
    "dump_event",
    "dump_messages",
    "dump_response",
    "dump_tool_result",
    "load_decisions",
    "load_deferred",
    "load_event",
    "load_messages",
    "load_response",
    "load_tool_result",
]
