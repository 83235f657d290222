"""A Vercel AI SDK endpoint serving a `Chain`: the `useChat` request body in, the UI
Message Stream v1 out (SSE, header `x-vercel-ai-ui-message-stream: v1`).

`VercelChatApp(chain, ...)` is a plain ASGI app for `useChat`'s default transport
(`DefaultChatTransport`): POST `{id, messages, trigger, messageId?}` and read the
stream. Mapping (each event one UI message chunk):

- `start` (the assistant message's id), `start-step` / `finish-step` around the turn,
  `finish` with the finish reason and the turn's usage as message metadata;
- text: `text-start` / `text-delta` / `text-end`; reasoning: `reasoning-start` /
  `-delta` / `-end`;
- tool calls: `tool-input-start`, `tool-input-delta` as the model streams the
  arguments, `tool-input-available` (the parsed input), then `tool-output-available`,
  `tool-output-error` (an error or a timeout) or `tool-output-denied` (rejected) when
  the call finishes;
- a call waiting for approval: `tool-approval-request` (its `approvalId`); a call
  waiting inside a sub-agent (a chain called as a tool) gets a tool part of its own
  first (`toolCallId` the call ids from the served chain's call down, joined by `/`),
  and its output when the resume finishes it; such parts are never read back into a
  transcript;
- the rest as transient `data-*` parts: `data-tool-call` (started, finished with
  outcome and duration), `data-tool-progress`, `data-answer-discarded`;
- an error: `error` with a fixed, safe text (the details go to the `advisorchain.ui`
  log).

A resume is the next request after `addToolApprovalResponse`: the last assistant
message's tool parts in state `approval-responded` carry the decisions (`approved`,
`reason`); the stream then continues that message. Its other messages are not read:
the transcript the app kept (`DeferredTurns`) is the turn's.
"""

from __future__ import annotations

import json
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
from ._turns import CallFragments, ProtocolApp, progress_fields, safe_error, tool_output
from .approvals import DecisionError, UiDecision, WaitingCall, decided_calls, decided_paths

__all__ = ["STREAM_HEADERS", "VercelChatApp", "from_ui_messages", "to_ui_messages"]

STREAM_HEADERS = ((b"x-vercel-ai-ui-message-stream", b"v1"),)
"""The header that tells the AI SDK the body is a UI message stream."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class _Approval(_Model):
    id: str
    approved: bool | None = None
    reason: str | None = Field(default=None, max_length=2000)


class _Part(_Model):
    type: str
    text: str | None = None
    tool_call_id: str | None = Field(default=None, alias="toolCallId")
    tool_name: str | None = Field(default=None, alias="toolName")
    state: str | None = None
    input: Any = None
    output: Any = None
    error_text: str | None = Field(default=None, alias="errorText")
    approval: _Approval | None = None


class _UIMessage(_Model):
    id: str
    role: Literal["user", "assistant", "system"]
    parts: list[_Part]


class _ChatBody(_Model):
    id: str
    messages: list[_UIMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId")


def _tool_name(part: _Part) -> str | None:
    if part.type == "dynamic-tool":
        return part.tool_name
    if part.type.startswith("tool-"):
        return part.type[len("tool-") :]
    return None


def from_ui_messages(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """UI messages (`useChat`'s) as the chain's: user text, assistant text and tool
    parts (a call, and its result once it has one); reasoning, files, sources and data
    parts are skipped. System messages and malformed messages raise `ValueError`."""
    try:
        parsed = [_UIMessage.model_validate(m) for m in messages]
    except ValidationError:
        raise ValueError("not a UI message") from None
    return _convert(parsed)


def _convert(parsed: Iterable[_UIMessage]) -> list[Message]:
    out: list[Message] = []
    for message in parsed:
        if message.role == "system":
            raise ValueError("system messages are the server's")
        if message.role == "user":
            text = "".join(p.text or "" for p in message.parts if p.type == "text")
            out.append(UserMessage(content=text))
            continue
        text_parts: list[str] = []
        calls: list[ToolCall] = []
        results: list[ToolMessage] = []

        for part in message.parts:
            name = _tool_name(part)
            if part.type == "step-start":
                _flush(out, text_parts, calls, results)
            elif part.type == "text":
                text_parts.append(part.text or "")
            elif name is not None and part.tool_call_id is not None:
                if "/" in part.tool_call_id:
                    continue  # a sub-agent's call (`_part_id`): not this chain's transcript
                if part.state not in ("output-available", "output-error", "output-denied"):
                    continue  # no result: not part of a transcript a model can continue
                calls.append(
                    ToolCall(
                        id=part.tool_call_id,
                        name=name,
                        arguments=json.dumps(part.input if part.input is not None else {}),
                    )
                )
                if part.state == "output-available":
                    content = (
                        part.output if isinstance(part.output, str) else json.dumps(part.output)
                    )
                    results.append(
                        ToolMessage(tool_call_id=part.tool_call_id, name=name, content=content)
                    )
                else:
                    errored = part.error_text or "the call was not run"
                    results.append(
                        ToolMessage(
                            tool_call_id=part.tool_call_id,
                            name=name,
                            content=errored,
                            is_error=True,
                        )
                    )
        _flush(out, text_parts, calls, results)
    return out


def _flush(
    out: list[Message], text_parts: list[str], calls: list[ToolCall], results: list[ToolMessage]
) -> None:
    """Append one model answer (its text and calls) and its calls' results."""
    if text_parts or calls:
        out.append(AssistantMessage(content="".join(text_parts) or None, tool_calls=tuple(calls)))
        out.extend(results)
    text_parts.clear()
    calls.clear()
    results.clear()


def to_ui_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The chain's messages as UI messages (JSON objects): each user message one UI
    message; the assistant's messages and tool results of a turn one assistant UI
    message, a `step-start` part before each model answer, tool parts with their
    output. System messages are left out."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    parts_by_call: dict[str, dict[str, Any]] = {}
    for message in messages:
        if isinstance(message, UserMessage):
            current = None
            out.append(
                {
                    "id": uuid.uuid4().hex,
                    "role": "user",
                    "parts": [{"type": "text", "text": message.text}],
                }
            )
        elif isinstance(message, AssistantMessage):
            if current is None:
                current = {"id": uuid.uuid4().hex, "role": "assistant", "parts": []}
                out.append(current)
            current["parts"].append({"type": "step-start"})
            if message.text:
                current["parts"].append({"type": "text", "text": message.text, "state": "done"})
            for call in message.tool_calls:
                part = {
                    "type": f"tool-{call.name}",
                    "toolCallId": call.id,
                    "state": "input-available",
                    "input": tool_output(call.arguments),
                }
                parts_by_call[call.id] = part
                current["parts"].append(part)
        elif isinstance(message, ToolMessage):
            found = parts_by_call.get(message.tool_call_id)
            if found is None:
                continue
            if message.is_error:
                found.update(state="output-error", errorText=message.text)
            else:
                found.update(state="output-available", output=tool_output(message.text))
    return out


class VercelChatApp(ProtocolApp):
    """An ASGI app serving `chain` to the Vercel AI SDK (`useChat`, UI Message Stream v1).

    `tools`, `tool_context` (a mapping, or a function of the ASGI scope) and
    `system_prompt` (put before the client's messages) are the server's, given to
    every turn and resume. Requests are checked before the turn
    starts: `Origin`, body size, message count, the schema (a refused one gets a JSON
    error status). Once the stream started, an error ends it with an `error` chunk. A
    client that disconnects cancels the turn.
    """

    sse_headers = STREAM_HEADERS
    sse_done = "[DONE]"

    def _events_for(self, body: Any, scope: Scope) -> AsyncIterator[dict[str, Any]]:
        return self._events(_parse_body(body, self.served.limits), scope)

    def _events(self, body: _ChatBody, scope: Scope) -> AsyncIterator[dict[str, Any]]:
        served = self.served
        turn = served.turn(scope)
        last = body.messages[-1]
        decisions = _decisions(last) if last.role == "assistant" else []
        open_turn: Callable[[], AsyncIterator[StreamEvent]]
        if decisions:
            message_id = last.id

            def open_turn() -> AsyncIterator[StreamEvent]:
                return turn.resume(decisions)
        else:
            try:
                messages = _convert(body.messages)
            except ValueError as exc:
                raise RequestRejected(422, str(exc)) from None
            if not messages or not isinstance(messages[-1], UserMessage):
                raise RequestRejected(422, "the last message must be the user's")
            message_id = uuid.uuid4().hex

            def open_turn() -> AsyncIterator[StreamEvent]:
                return turn.start(served.transcript(messages))

        nested = {_part_id(path) for path in decided_paths(decisions) if len(path) > 1}
        return _chunks(message_id, open_turn, turn.waiting, decided_calls(decisions), nested)


def _parse_body(body: Any, limits: UiLimits) -> _ChatBody:
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        if len(body["messages"]) > limits.max_messages:
            raise RequestRejected(413, "too many messages")
    try:
        return _ChatBody.model_validate(body)
    except ValidationError as exc:
        where = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors()[:3])
        raise RequestRejected(422, f"not a useChat request body ({where})") from None


def _decisions(message: _UIMessage) -> list[tuple[str, UiDecision]]:
    found: list[tuple[str, UiDecision]] = []
    for part in message.parts:
        approval = part.approval
        if part.state != "approval-responded" or approval is None or approval.approved is None:
            continue
        decision: UiDecision = (
            Approve(by="ui")
            if approval.approved
            else Reject(approval.reason or "the user rejected the call", by="ui")
        )
        found.append((approval.id, decision))
    return found


_FINISH = {"stop": "stop", "length": "length", "content_filter": "content-filter", "error": "error"}


async def _chunks(
    message_id: str,
    open_turn: Callable[[], AsyncIterator[StreamEvent]],
    waiting: Callable[[ChatResponse], tuple[WaitingCall, ...]],
    announced: Iterable[str] = (),
    nested: Iterable[str] = (),
) -> AsyncIterator[dict[str, Any]]:
    """The UI message chunks of one turn; see the module's docstring for the mapping.
    `waiting` keeps a deferred end of the turn and gives its calls' approval ids;
    `nested` are the parts of a sub-agent's calls this resume decides."""
    yield {"type": "start", "messageId": message_id}
    yield {"type": "start-step"}
    mapper = _Mapper(announced, nested)
    try:
        async with closing_stream(open_turn()) as turn:
            async for event in turn:
                for out in mapper.map(event):
                    yield out
                if isinstance(event, ResponseCompleted):
                    for out in _finished(event.response, waiting):
                        yield out
                    return
    except DecisionError as exc:
        yield {"type": "error", "errorText": str(exc)}
    except Exception as exc:
        for out in mapper.close():
            yield out
        yield {"type": "error", "errorText": safe_error(exc)[0]}


def _finished(
    response: ChatResponse, waiting_calls: Callable[[ChatResponse], tuple[WaitingCall, ...]]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    waiting = waiting_calls(response)
    for w in waiting:
        call_id = w.call.id
        if w.within:  # a sub-agent's call: a part of its own, which the client has not seen
            call_id = _part_id(w.path)
            out.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": w.call.name})
            out.append(_input_available(call_id, w.call.name, w.call.arguments))
        out.append({"type": "tool-approval-request", "approvalId": w.id, "toolCallId": call_id})
    usage = response.usage
    out.append({"type": "finish-step"})
    out.append(
        {
            "type": "finish",
            "finishReason": "tool-calls"
            if waiting
            else _FINISH.get(response.finish_reason, "other"),
            "messageMetadata": {
                "usage": {
                    "inputTokens": usage.input_tokens,
                    "outputTokens": usage.output_tokens,
                    "totalTokens": usage.total_tokens,
                },
                "model": response.model,
                "modelCalls": usage.requests,
                "finishReason": response.finish_reason,
            },
        }
    )
    return out


class _Mapper:
    """The chain's events as UI message chunks."""

    def __init__(self, announced: Iterable[str] = (), nested: Iterable[str] = ()) -> None:
        self.text_id: str | None = None
        self.reasoning_id: str | None = None
        self.calls = CallFragments()
        self.announced: set[str] = set(announced)  # calls the client has already
        self.nested: set[str] = set(nested)  # sub-agents' call parts waiting for an output

    def close(self, keep: type | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if keep is not TextDelta and self.text_id is not None:
            out.append({"type": "text-end", "id": self.text_id})
            self.text_id = None
        if keep is not ReasoningDelta and self.reasoning_id is not None:
            out.append({"type": "reasoning-end", "id": self.reasoning_id})
            self.reasoning_id = None
        if keep is not ToolCallDelta:
            for call_id, name, arguments in self.calls.close():
                out.append(_input_available(call_id, name, arguments))
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
            out.append(_output(event.call.id, event))
            out.append(_call_finished(event))
        elif isinstance(event, ToolProgress):
            out.extend(self._nested_output(event))
            out.append(_data("tool-progress", progress_fields(event)))
        elif isinstance(event, AnswerDiscarded):
            out.append(
                _data("answer-discarded", {"reason": event.reason, "attempt": event.attempt})
            )
        return out

    def _text(self, text: str, out: list[dict[str, Any]]) -> None:
        if not text:
            return
        if self.text_id is None:
            self.text_id = uuid.uuid4().hex
            out.append({"type": "text-start", "id": self.text_id})
        out.append({"type": "text-delta", "id": self.text_id, "delta": text})

    def _reasoning(self, text: str, out: list[dict[str, Any]]) -> None:
        if not text:
            return
        if self.reasoning_id is None:
            self.reasoning_id = uuid.uuid4().hex
            out.append({"type": "reasoning-start", "id": self.reasoning_id})
        out.append({"type": "reasoning-delta", "id": self.reasoning_id, "delta": text})

    def _call_fragments(self, event: ToolCallDelta, out: list[dict[str, Any]]) -> None:
        for kind, call_id, value in self.calls.add(event):
            if kind == "start":
                self.announced.add(call_id)
                out.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": value})
            elif value:
                out.append(
                    {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": value}
                )

    def _call_started(self, call: ToolCall, out: list[dict[str, Any]]) -> None:
        if call.id not in self.announced:  # the model did not stream it
            self.announced.add(call.id)
            out.append({"type": "tool-input-start", "toolCallId": call.id, "toolName": call.name})
            out.append(_input_available(call.id, call.name, call.arguments))
        out.append(
            _data("tool-call", {"toolCallId": call.id, "toolName": call.name, "state": "started"})
        )

    def _nested_output(self, event: ToolProgress) -> list[dict[str, Any]]:
        """The output of a sub-agent's call part the client decided, when the sub-agent's
        resumed stream (forwarded as progress) finishes that call."""
        if not self.nested:
            return []
        path = [event.call_id]
        inner = event.event
        while isinstance(inner, ToolProgress):
            path.append(inner.call_id)
            inner = inner.event
        if not isinstance(inner, ToolCallFinished):
            return []
        part_id = _part_id((*path, inner.call.id))
        if part_id not in self.nested:
            return []
        self.nested.discard(part_id)
        return [_output(part_id, inner)]


def _part_id(path: Iterable[str]) -> str:
    """The `toolCallId` of a sub-agent's call part: the call ids from the served chain's
    call down, joined by `/` (which no call id holds)."""
    return "/".join(path)


def _output(call_id: str, event: ToolCallFinished) -> dict[str, Any]:
    if event.outcome == "ok":
        return {
            "type": "tool-output-available",
            "toolCallId": call_id,
            "output": tool_output(event.result.text),
        }
    if event.outcome == "rejected":
        return {"type": "tool-output-denied", "toolCallId": call_id}
    return {"type": "tool-output-error", "toolCallId": call_id, "errorText": event.result.text}


def _input_available(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return {
            "type": "tool-input-error",
            "toolCallId": call_id,
            "toolName": name,
            "input": arguments,
            "errorText": "the arguments are not valid JSON",
        }
    return {
        "type": "tool-input-available",
        "toolCallId": call_id,
        "toolName": name,
        "input": parsed,
    }


def _call_finished(event: ToolCallFinished) -> dict[str, Any]:
    return _data(
        "tool-call",
        {
            "toolCallId": event.call.id,
            "toolName": event.call.name,
            "state": "finished",
            "outcome": event.outcome,
            "duration": event.duration,
        },
    )


def _data(name: str, value: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": f"data-{name}", "data": dict(value), "transient": True}
