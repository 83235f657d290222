"""An AG-UI 1.0 endpoint serving a `Chain`: `RunAgentInput` in, AG-UI events out (SSE).

`AgUiApp(chain, ...)` is a plain ASGI app: POST a `RunAgentInput` and read the run's
events. Mapping (each event a JSON object of the AG-UI 1.0 schema):

- the run: `RUN_STARTED`, then `RUN_FINISHED` (`outcome` `success`, or `interrupt`
  with one interrupt per call waiting for approval, a sub-agent's nested approvals
  included (see `ui.approvals`); `usage` the turn's tokens;
  `result` the finish reason, the number of model calls and the answer's text) or
  `RUN_ERROR` (a fixed, safe message and the error's class as `code`);
- text: `TEXT_MESSAGE_START` / `_CONTENT` / `_END`; reasoning: `REASONING_START`,
  `REASONING_MESSAGE_START` / `_CONTENT` / `_END`, `REASONING_END`;
- tool calls: `TOOL_CALL_START`, `TOOL_CALL_ARGS` as the model streams the arguments,
  `TOOL_CALL_END`, then `TOOL_CALL_RESULT` when the call finishes;
- the rest as `CUSTOM` events named `advisorchain.*`: `tool_call_started`,
  `tool_call_finished` (outcome, duration), `tool_progress`, `answer_discarded`.

A resume is a `RunAgentInput` whose `resume` answers the interrupts: `status`
`resolved` with `payload` `{"approved": true}` (optionally `"arguments": {...}` to run
edited arguments) or `{"approved": false, "reason": "..."}`; `cancelled` rejects. Its
`messages` are not read: the transcript the app kept (`DeferredTurns`) is the turn's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.deferred import Approve, Reject
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
from ..core.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from ..core.response import ChatResponse
from ..core.streams import closing_stream
from ._http import (
    RequestRejected,
    Scope,
    UiLimits,
)
from ._turns import CallFragments, ProtocolApp, progress_fields, safe_error
from .approvals import DecisionError, UiDecision, WaitingCall, decided_calls

__all__ = ["AgUiApp", "from_agui_messages", "to_agui_messages"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class _TextPart(_Model):
    type: Literal["text"]
    text: str


class _Function(_Model):
    name: str
    arguments: str


class _ToolCall(_Model):
    id: str
    type: Literal["function"] = "function"
    function: _Function


class _UserMessage(_Model):
    id: str
    role: Literal["user"]
    content: str | list[_TextPart]


class _AssistantMessage(_Model):
    id: str
    role: Literal["assistant"]
    content: str | None = None
    tool_calls: list[_ToolCall] | None = Field(default=None, alias="toolCalls")


class _ToolMessage(_Model):
    id: str
    role: Literal["tool"]
    content: str | list[_TextPart]
    tool_call_id: str = Field(alias="toolCallId")
    error: str | None = None


class _SkippedMessage(_Model):
    id: str
    role: Literal["reasoning", "activity"]


_Message = _UserMessage | _AssistantMessage | _ToolMessage | _SkippedMessage


class _ResumeEntry(_Model):
    interrupt_id: str = Field(alias="interruptId")
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class _RunAgentInput(_Model):
    thread_id: str = Field(alias="threadId")
    run_id: str = Field(alias="runId")
    messages: list[_Message]
    resume: list[_ResumeEntry] | None = None


class _Payload(_Model):
    model_config = ConfigDict(extra="forbid", frozen=True)
    approved: bool
    arguments: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=2000)


RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "arguments": {"type": "object", "description": "run the call with these instead"},
        "reason": {"type": "string", "description": "why not (the model reads it)"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
"""What an interrupt's answer (`ResumeEntry.payload`) must be."""


def _text(content: str | list[_TextPart]) -> str:
    return content if isinstance(content, str) else "".join(p.text for p in content)


def from_agui_messages(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """AG-UI messages as the chain's: user, assistant (text, tool calls) and tool
    messages; reasoning and activity messages are skipped. System and developer
    messages, and anything malformed, raise `ValueError`: the server owns the prompt."""
    parsed = [_parse_message(m) for m in messages]
    return _convert(parsed)


def _parse_message(message: Mapping[str, Any]) -> _Message:
    from pydantic import TypeAdapter

    try:
        return TypeAdapter(_Message).validate_python(message)
    except ValidationError:
        raise ValueError("not an AG-UI user, assistant or tool message") from None


def _convert(parsed: Iterable[_Message]) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}
    for message in parsed:
        if isinstance(message, _UserMessage):
            out.append(UserMessage(content=_text(message.content)))
        elif isinstance(message, _AssistantMessage):
            calls = tuple(
                ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
                for c in message.tool_calls or ()
            )
            names.update((c.id, c.name) for c in calls)
            out.append(AssistantMessage(content=message.content, tool_calls=calls))
        elif isinstance(message, _ToolMessage):
            name = names.get(message.tool_call_id)
            if name is None:
                raise ValueError("a tool message answers no earlier tool call")
            text = message.error if message.error is not None else _text(message.content)
            out.append(
                ToolMessage(
                    tool_call_id=message.tool_call_id,
                    name=name,
                    content=text,
                    is_error=message.error is not None,
                )
            )
    return out


def to_agui_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The chain's messages as AG-UI messages (JSON objects), with fresh ids; system
    messages are left out (they are the server's)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        mid = uuid.uuid4().hex
        if isinstance(message, UserMessage):
            out.append({"id": mid, "role": "user", "content": message.text})
        elif isinstance(message, AssistantMessage):
            item: dict[str, Any] = {"id": mid, "role": "assistant"}
            if message.text:
                item["content"] = message.text
            if message.tool_calls:
                item["toolCalls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in message.tool_calls
                ]
            out.append(item)
        elif isinstance(message, ToolMessage):
            tool: dict[str, Any] = {
                "id": mid,
                "role": "tool",
                "toolCallId": message.tool_call_id,
                "content": message.text,
            }
            if message.is_error:
                tool["error"] = message.text
            out.append(tool)
    return out


class AgUiApp(ProtocolApp):
    """An ASGI app serving `chain` over AG-UI 1.0 (POST a `RunAgentInput`, read SSE).

    `tools`, `tool_context` (a mapping, or a function of the ASGI scope) and
    `system_prompt` (put before the client's messages) are the server's, given to
    every turn and resume; the client's `tools`, `context`, `state`
    and `forwardedProps` are not used. Requests are checked before the turn starts:
    `Origin` (see `UiLimits.allowed_origins`), body size, message count, the schema;
    a refused one gets a JSON error status. Once the stream started, an error ends it
    with `RUN_ERROR` (a fixed message; the details go to the `advisorchain.ui` log).
    A client that disconnects cancels the turn.
    """

    def _events_for(self, body: Any, scope: Scope) -> AsyncIterator[dict[str, Any]]:
        return self._events(_parse_input(body, self.served.limits), scope)

    def _events(self, run: _RunAgentInput, scope: Scope) -> AsyncIterator[dict[str, Any]]:
        served = self.served
        turn = served.turn(scope)
        open_turn: Callable[[], AsyncIterator[StreamEvent]]
        if run.resume:
            decisions = [(entry.interrupt_id, _decision(entry)) for entry in run.resume]

            def open_turn() -> AsyncIterator[StreamEvent]:
                return turn.resume(decisions)
        else:
            try:
                messages = _convert(run.messages)
            except ValueError as exc:
                raise RequestRejected(422, str(exc)) from None
            if not messages or not isinstance(messages[-1], UserMessage | ToolMessage):
                raise RequestRejected(422, "the last message must be the user's")

            def open_turn() -> AsyncIterator[StreamEvent]:
                return turn.start(served.transcript(messages))

        announced = decided_calls(decisions) if run.resume else set()
        return _run_events(run.thread_id, run.run_id, open_turn, turn.waiting, announced)


def _parse_input(body: Any, limits: UiLimits) -> _RunAgentInput:
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        if len(body["messages"]) > limits.max_messages:
            raise RequestRejected(413, "too many messages")
    try:
        return _RunAgentInput.model_validate(body)
    except ValidationError as exc:
        where = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors()[:3])
        raise RequestRejected(422, f"not a RunAgentInput ({where})") from None


def _decision(entry: _ResumeEntry) -> UiDecision:
    if entry.status == "cancelled":
        return Reject("the user cancelled the call", by="ui")
    try:
        payload = _Payload.model_validate(entry.payload)
    except ValidationError:
        raise RequestRejected(
            422, "a resume payload must be {approved, arguments?, reason?}"
        ) from None
    if payload.approved:
        return Approve(arguments=payload.arguments, by="ui")
    return Reject(payload.reason or "the user rejected the call", by="ui")


async def _run_events(
    thread_id: str,
    run_id: str,
    open_turn: Callable[[], AsyncIterator[StreamEvent]],
    waiting: Callable[[ChatResponse], tuple[WaitingCall, ...]],
    announced: Iterable[str] = (),
) -> AsyncIterator[dict[str, Any]]:
    """The AG-UI events of one run; see the module's docstring for the mapping.
    `waiting` keeps a deferred end of the turn and gives its calls' interrupt ids."""
    yield {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}
    mapper = _Mapper(announced)
    try:
        async with closing_stream(open_turn()) as turn:
            async for event in turn:
                for out in mapper.map(event):
                    yield out
                if isinstance(event, ResponseCompleted):
                    yield _finished(thread_id, run_id, event.response, waiting)
                    return
    except DecisionError as exc:
        yield {"type": "RUN_ERROR", "message": str(exc), "code": "invalid_decisions"}
        return
    except Exception as exc:
        for out in mapper.close():
            yield out
        message, code = safe_error(exc)
        yield {"type": "RUN_ERROR", "message": message, "code": code}


def _finished(
    thread_id: str,
    run_id: str,
    response: ChatResponse,
    waiting_calls: Callable[[ChatResponse], tuple[WaitingCall, ...]],
) -> dict[str, Any]:
    usage = response.usage
    entry: dict[str, Any] = {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.total_tokens,
    }
    if response.model:
        entry["model"] = response.model
    if usage.reasoning_tokens:
        entry["reasoningTokens"] = usage.reasoning_tokens
    if usage.cached_tokens:
        entry["cachedInputTokens"] = usage.cached_tokens
    event: dict[str, Any] = {
        "type": "RUN_FINISHED",
        "threadId": thread_id,
        "runId": run_id,
        "usage": [entry],
        "result": {"finishReason": response.finish_reason, "modelCalls": usage.requests},
    }
    waiting = waiting_calls(response)
    if waiting:
        event["outcome"] = {
            "type": "interrupt",
            "interrupts": [_interrupt(w) for w in waiting],
        }
    else:
        event["outcome"] = {"type": "success"}
        event["result"]["text"] = response.text
    return event


def _interrupt(waiting: WaitingCall) -> dict[str, Any]:
    """The interrupt of one waiting call. A sub-agent's nested call is shown by its own
    name and arguments; its `toolCallId` is the served chain's call it waits inside (the
    one the client saw), `metadata.within` the sub-agent calls around it."""
    call = waiting.call
    metadata: dict[str, Any] = {"toolName": call.name, "arguments": call.arguments}
    message = f"{call.name} needs your approval"
    if waiting.within:
        metadata["nestedCallId"] = call.id
        metadata["within"] = [{"toolCallId": d.id, "toolName": d.name} for d in waiting.within]
        message = f"{call.name} (inside {waiting.within[-1].name}) needs your approval"
    return {
        "id": waiting.id,
        "reason": "tool_approval",
        "message": message,
        "toolCallId": waiting.path[0],
        "responseSchema": RESPONSE_SCHEMA,
        "metadata": metadata,
    }


class _Mapper:
    """The chain's events as AG-UI events, opening and closing text, reasoning and
    tool-call messages as the kind of event changes."""

    def __init__(self, announced: Iterable[str] = ()) -> None:
        self.text_id: str | None = None
        self.reasoning_id: str | None = None
        self.calls = CallFragments()
        self.announced: set[str] = set(announced)  # calls the client has already
        self.parent_id: str | None = None

    def close(self, keep: type | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if keep is not TextDelta and self.text_id is not None:
            out.append({"type": "TEXT_MESSAGE_END", "messageId": self.text_id})
            self.text_id = None
        if keep is not ReasoningDelta and self.reasoning_id is not None:
            rid = self.reasoning_id
            out.append({"type": "REASONING_MESSAGE_END", "messageId": rid})
            out.append({"type": "REASONING_END", "messageId": rid})
            self.reasoning_id = None
        if keep is not ToolCallDelta:
            for call_id, _name, _args in self.calls.close():
                out.append({"type": "TOOL_CALL_END", "toolCallId": call_id})
        return out

    def map(self, event: StreamEvent) -> list[dict[str, Any]]:
        out = self.close(keep=type(event))
        if isinstance(event, TextDelta):
            self._text(event.text, out)
        elif isinstance(event, ReasoningDelta):
            self._reasoning(event.text, out)
        elif isinstance(event, ToolCallDelta):
            self._call_fragments(event, out)
        elif isinstance(event, ToolCallStarted):
            self._call_started(event.call, out)
        elif isinstance(event, ToolCallFinished):
            out.extend(_call_finished(event))
        elif isinstance(event, ToolProgress):
            out.append(_progress(event))
        elif isinstance(event, AnswerDiscarded):
            out.append(
                _custom("answer_discarded", {"reason": event.reason, "attempt": event.attempt})
            )
        return out

    def _text(self, text: str, out: list[dict[str, Any]]) -> None:
        if not text:
            return
        if self.text_id is None:
            self.text_id = self.parent_id = uuid.uuid4().hex
            out.append(
                {"type": "TEXT_MESSAGE_START", "messageId": self.text_id, "role": "assistant"}
            )
        out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text_id, "delta": text})

    def _reasoning(self, text: str, out: list[dict[str, Any]]) -> None:
        if not text:
            return
        if self.reasoning_id is None:
            rid = self.reasoning_id = uuid.uuid4().hex
            out.append({"type": "REASONING_START", "messageId": rid})
            out.append({"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"})
        out.append(
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": self.reasoning_id, "delta": text}
        )

    def _call_fragments(self, event: ToolCallDelta, out: list[dict[str, Any]]) -> None:
        for kind, call_id, value in self.calls.add(event):
            if kind == "start":
                self.announced.add(call_id)
                start: dict[str, Any] = {
                    "type": "TOOL_CALL_START",
                    "toolCallId": call_id,
                    "toolCallName": value,
                }
                if self.parent_id is not None:
                    start["parentMessageId"] = self.parent_id
                out.append(start)
            elif value:
                out.append({"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": value})

    def _call_started(self, call: ToolCall, out: list[dict[str, Any]]) -> None:
        if call.id not in self.announced:  # the model did not stream it (a call() model)
            self.announced.add(call.id)
            out.append(
                {"type": "TOOL_CALL_START", "toolCallId": call.id, "toolCallName": call.name}
            )
            out.append({"type": "TOOL_CALL_ARGS", "toolCallId": call.id, "delta": call.arguments})
            out.append({"type": "TOOL_CALL_END", "toolCallId": call.id})
        out.append(
            _custom(
                "tool_call_started",
                {"toolCallId": call.id, "toolName": call.name, "at": time.time()},
            )
        )


def _call_finished(event: ToolCallFinished) -> list[dict[str, Any]]:
    return [
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": uuid.uuid4().hex,
            "toolCallId": event.call.id,
            "content": event.result.text,
            "role": "tool",
        },
        _custom(
            "tool_call_finished",
            {
                "toolCallId": event.call.id,
                "toolName": event.call.name,
                "outcome": event.outcome,
                "duration": event.duration,
            },
        ),
    ]


def _progress(event: ToolProgress) -> dict[str, Any]:
    progress = progress_fields(event)
    if event.event is not None:
        progress["event"] = type(event.event).__name__
    return _custom("tool_progress", progress)


def _custom(name: str, value: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": f"advisorchain.{name}", "value": dict(value)}
