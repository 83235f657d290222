"""What both protocol apps share above HTTP: the server's side of a turn (tools, tool
context, limits), streamed tool-call fragments as whole calls, and safe error texts."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.chain import Chain
from ..core.errors import AdvisorChainError
from ..core.events import ToolCallDelta, ToolProgress
from ..core.messages import Message, SystemMessage
from ..core.tools import Tool
from ._http import (
    Receive,
    RequestRejected,
    Scope,
    Send,
    UiLimits,
    check_origin,
    read_json,
    send_json_error,
    serve_lifespan,
    stream_sse,
)
from .approvals import DeferredTurns, UiTurn

__all__ = [
    "CallFragments",
    "ProtocolApp",
    "ServedChain",
    "ToolContext",
    "progress_fields",
    "safe_error",
    "tool_output",
]

_log = logging.getLogger("advisorchain.ui")

ToolContext = Mapping[str, Any] | Callable[[Scope], Mapping[str, Any]]
"""The tool context of a request: fixed, or computed from the ASGI scope (the user a
server's authentication put in `scope["state"]` or `scope["user"]`, say). Never read
from the request body."""


@dataclass(frozen=True, kw_only=True)
class ServedChain:
    """A `Chain` as a protocol app serves it: the tools and tool context each turn gets
    (the server's, never the client's), the system prompt put before the client's
    messages, and the request limits."""

    chain: Chain
    tools: Iterable[Tool] = ()
    tool_context: ToolContext | None = None
    system_prompt: str | None = None
    limits: UiLimits = field(default_factory=UiLimits)
    deferred: DeferredTurns = field(default_factory=DeferredTurns)
    """The transcripts of this app's deferred turns, kept for their resumes."""

    def transcript(self, messages: Sequence[Message]) -> list[Message]:
        """The client's messages after the server's system prompt, if any."""
        if self.system_prompt is None:
            return list(messages)
        return [SystemMessage(content=self.system_prompt), *messages]

    def turn(self, scope: Scope) -> UiTurn:
        """A turn for the request `scope`, with the server's tools and tool context."""
        return UiTurn(
            self.chain, self.deferred, tools=self.tools, tool_context=self.context_for(scope)
        )

    def context_for(self, scope: Scope) -> Mapping[str, Any] | None:
        """The tool context of the request `scope`."""
        context = self.tool_context
        if context is None or isinstance(context, Mapping):
            return context
        return context(scope)


class CallFragments:
    """A model's streamed tool-call fragments (`ToolCallDelta`, by index) as calls with
    an id and a name, and argument text in pieces: what both protocols stream."""

    def __init__(self) -> None:
        self._ids: dict[int, str] = {}
        self._names: dict[int, str] = {}
        self._pending: dict[int, str] = {}
        self.open: dict[str, tuple[str, list[str]]] = {}
        """Calls started and not yet ended: id -> (name, argument pieces)."""

    def add(self, delta: ToolCallDelta) -> list[tuple[str, str, str | None]]:
        """What `delta` adds: `("start", id, name)` once id and name are known, then
        `("args", id, text)` for each argument piece."""
        index = delta.index
        out: list[tuple[str, str, str | None]] = []
        if delta.id is not None and index not in self._ids:
            self._ids[index] = delta.id
        if delta.name is not None and index not in self._names:
            self._names[index] = delta.name
        call_id = self._ids.get(index)
        name = self._names.get(index)
        if call_id is None or name is None:
            self._pending[index] = self._pending.get(index, "") + delta.arguments
            return out
        if call_id not in self.open:
            self.open[call_id] = (name, [])
            out.append(("start", call_id, name))
            earlier = self._pending.pop(index, "")
            if earlier:
                self.open[call_id][1].append(earlier)
                out.append(("args", call_id, earlier))
        if delta.arguments:
            self.open[call_id][1].append(delta.arguments)
            out.append(("args", call_id, delta.arguments))
        return out

    def close(self) -> list[tuple[str, str, str]]:
        """End every open call: `(id, name, whole argument text)`, in start order; the
        next model answer's fragments (indexes from 0 again) start new calls."""
        closed = [(call_id, name, "".join(parts)) for call_id, (name, parts) in self.open.items()]
        self.open.clear()
        self._ids.clear()
        self._names.clear()
        self._pending.clear()
        return closed


def safe_error(exc: BaseException) -> tuple[str, str]:
    """`(message, code)` for an error event: the library error's class and a fixed text,
    never the exception's own text (it may quote arguments or a provider's answer), nor
    a stack trace; the whole error goes to the `advisorchain.ui` log."""
    _log.error("turn failed", exc_info=exc)
    if isinstance(exc, AdvisorChainError):
        return f"the turn failed ({type(exc).__name__})", type(exc).__name__
    return "the turn failed (internal error)", "internal_error"


def progress_fields(event: ToolProgress) -> dict[str, Any]:
    """A tool's progress report as both protocols send it: the call's id and the report's
    `progress`, `total` and `message`, those that are set."""
    fields: dict[str, Any] = {"toolCallId": event.call_id}
    if event.progress is not None:
        fields["progress"] = event.progress
    if event.total is not None:
        fields["total"] = event.total
    if event.message is not None:
        fields["message"] = event.message
    return fields


def tool_output(text: str) -> Any:
    """A tool result's text as the client gets it: its JSON value when it is JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return text


class ProtocolApp:
    """The ASGI shell of a protocol app (`AgUiApp`, `VercelChatApp`): the server's chain,
    tools, tool context, system prompt and limits; lifespan events answered; an HTTP
    request checked (`Origin`, body size, JSON) and handed to `_events_for`, which parses
    it and opens the turn's protocol events (raising `RequestRejected` before the stream
    starts), each sent as one SSE frame of JSON, with `sse_headers` and `sse_done`."""

    sse_headers: tuple[tuple[bytes, bytes], ...] = ()
    sse_done: str | None = None

    def __init__(
        self,
        chain: Chain,
        *,
        tools: Iterable[Tool] = (),
        tool_context: ToolContext | None = None,
        system_prompt: str | None = None,
        limits: UiLimits | None = None,
    ) -> None:
        self.served = ServedChain(
            chain=chain,
            tools=tuple(tools),
            tool_context=tool_context,
            system_prompt=system_prompt,
            limits=limits or UiLimits(),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        limits = self.served.limits
        try:
            check_origin(scope, limits)
            body = await read_json(receive, scope, limits)
            events = self._events_for(body, scope)
        except RequestRejected as exc:
            await send_json_error(send, exc.status, exc.message)
            return
        await stream_sse(
            receive,
            send,
            lambda: _json_frames(events),
            headers=self.sse_headers,
            done=self.sse_done,
        )

    def _events_for(self, body: Any, scope: Scope) -> AsyncIterator[dict[str, Any]]:
        """The protocol events of the turn `body` asks for (`RequestRejected` if it is not
        a valid request)."""
        raise NotImplementedError


async def _json_frames(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    async for event in events:
        yield json.dumps(event, ensure_ascii=False, separators=(",", ":"))
