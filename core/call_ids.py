"""Tool-call ids that are unique in a transcript and valid for every provider.

Models choose the ids of their tool calls (a model that writes calls as text takes them
from its own text), so two calls of one response may share an id, a response may reuse
an id of an earlier round, and an id may hold characters a provider rejects (Anthropic
requires `^[a-zA-Z0-9_-]+$`; OpenAI caps the length). The tool loop, approval, tool
results, idempotency keys and the next request all key on these ids, so the chain's
innermost step rewrites them before any advisor sees a model's response:
`unique_response` for a response, `StreamCallIds` for a stream.

The rules (`CallIds.claim`): an id that is valid (letters, digits, `_`, `-`; at most
`MAX_CALL_ID_CHARS`) and not taken yet is kept; an invalid one is sanitized (other
characters become `_`, cut to the maximum); one that is empty or taken (by an earlier
message of the transcript or an earlier call of the same response) is replaced by a
fresh `new_call_id()`. So the first call that uses an id keeps it. Only the rewritten id
exists afterwards: the assistant message and its tool results carry the same one.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import replace

from .events import ToolCallDelta
from .messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    new_call_id,
)
from .response import ChatResponse

MAX_CALL_ID_CHARS = 40
"""The longest id kept (OpenAI rejects longer ones); `new_call_id()` gives 29 characters."""

_VALID_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
"""`[A-Za-z0-9_-]`: a set's `issuperset` reads a short id faster than a regex match."""
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9_-]")


def is_valid_call_id(value: object) -> bool:
    """Whether every provider accepts `value` as a tool-call id."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_CALL_ID_CHARS
        and _VALID_CHARS.issuperset(value)
    )


def sanitize_call_id(value: str) -> str:
    """`value` cut to `MAX_CALL_ID_CHARS`, every character providers reject made `_`."""
    return _INVALID_CHAR.sub("_", value[:MAX_CALL_ID_CHARS])


class CallIds:
    """The tool-call ids taken in one transcript; `claim` hands out ids of their own."""

    __slots__ = ("_taken",)

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._taken = set(taken)

    @classmethod
    def of(cls, messages: Iterable[Message]) -> CallIds:
        """The ids taken by the calls and tool results of `messages`."""
        taken: set[str] = set()
        for message in messages:
            kind = _kind(message)
            if kind is AssistantMessage:
                for call in message.tool_calls:  # type: ignore[union-attr]
                    taken.add(call.id)
            elif kind is ToolMessage:
                taken.add(message.tool_call_id)  # type: ignore[union-attr]
        ids = cls()
        ids._taken = taken
        return ids

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._taken

    def claim(self, call_id: str | None) -> str:
        """`call_id` if valid and free, else its sanitized form if free, else a fresh id;
        the id returned is taken from now on."""
        if call_id and not is_valid_call_id(call_id):
            call_id = sanitize_call_id(call_id)
        if not call_id or call_id in self._taken:
            call_id = new_call_id()
            while call_id in self._taken:  # pragma: no cover - 96 random bits
                call_id = new_call_id()
        self._taken.add(call_id)
        return call_id

    def calls(self, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
        """`calls` with every id claimed in order (`calls` itself when none changed)."""
        fixed = [self._with_id(c, self.claim(c.id)) for c in calls]
        if all(a is b for a, b in zip(fixed, calls, strict=True)):
            return calls
        return tuple(fixed)

    @staticmethod
    def _with_id(call: ToolCall, call_id: str) -> ToolCall:
        return call if call.id == call_id else call.model_copy(update={"id": call_id})


def unique_tool_calls(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """`calls` (one response's) with ids unique among them and valid for every provider."""
    return CallIds().calls(calls)


def _asks_for_tools(response: ChatResponse) -> bool:
    # A deferred turn's calls (a nested chain's) are already named in its transcript.
    return bool(response.message.tool_calls) and not response.deferred


def with_tool_calls(response: ChatResponse, calls: tuple[ToolCall, ...]) -> ChatResponse:
    """`response` whose message (also in `messages`) has `calls` instead."""
    old = response.message
    if calls is old.tool_calls:
        return response
    return response.with_message(old.model_copy(update={"tool_calls": calls}))


def unique_response(response: ChatResponse, transcript: Sequence[Message]) -> ChatResponse:
    """`response` (answering a request with `transcript`) with the ids of its tool calls
    made unique in the transcript and valid (see the module's rules)."""
    calls = response.message.tool_calls
    if not calls or response.deferred:  # `_asks_for_tools`, inline: run every model call
        return response
    # The common case keeps every id: valid, distinct, unused. No claim, no copies, and no
    # set of the transcript's ids: one pass that stops at the first id in use.
    ids: set[str] = set()
    for call in calls:
        call_id = call.id
        if call_id in ids or not is_valid_call_id(call_id):
            break
        ids.add(call_id)
    else:
        if not _uses(transcript, ids):
            return response
    return with_tool_calls(response, CallIds.of(transcript).calls(calls))


def _uses(messages: Iterable[Message], ids: set[str]) -> bool:
    """Whether a call or a tool result of `messages` has one of `ids`."""
    for message in messages:
        kind = _kind(message)
        if kind is ToolMessage:
            if message.tool_call_id in ids:  # type: ignore[union-attr]
                return True
        elif kind is AssistantMessage:
            for call in message.tool_calls:  # type: ignore[union-attr]
                if call.id in ids:
                    return True
    return False


def _kind(message: Message) -> type | None:
    """`AssistantMessage`, `ToolMessage` or `None` (no call ids) for `message`, by its
    `role` (`Message`'s tag)."""
    role = message.role
    if role == "assistant":
        return AssistantMessage
    if role == "tool":
        return ToolMessage
    return None


class StreamCallIds:
    """The ids of one model stream, rewritten so that its deltas and its response agree.

    `delta` rewrites each `ToolCallDelta` as it passes (the first id an index brings
    decides that call's id; later ids of the index are made the same); `response`
    rewrites the final response so that its calls carry the ids their deltas showed:
    paired by position in index order when the response has one call per streamed
    index (what `StreamAssembler` builds), else by the id the delta brought.
    """

    __slots__ = ("_ids", "_indices", "_transcript")

    def __init__(self, transcript: Sequence[Message]) -> None:
        self._transcript = transcript
        self._ids: CallIds | None = None
        # index -> (id sent, id given), or None while the index brought no id; made at the
        # first delta (most streams bring none, and thousands may be open at once)
        self._indices: dict[int, tuple[str, str] | None] | None = None

    def _registry(self) -> CallIds:
        if self._ids is None:
            self._ids = CallIds.of(self._transcript)
        return self._ids

    def delta(self, event: ToolCallDelta) -> ToolCallDelta:
        """`event` with the id its call has in this transcript."""
        indices = self._indices
        if indices is None:
            indices = self._indices = {}
        index = event.index
        given = indices.get(index)
        if not event.id:
            if index not in indices:
                indices[index] = None
            return event
        if given is None:
            given = indices[index] = (event.id, self._registry().claim(event.id))
        return event if event.id == given[1] else replace(event, id=given[1])

    def response(self, response: ChatResponse) -> ChatResponse:
        """The final response, with the ids the deltas showed."""
        if not _asks_for_tools(response):
            return response
        calls = response.message.tool_calls
        registry = self._registry()
        indices = self._indices or {}
        order = sorted(indices)
        ids: list[str] = []
        if len(order) == len(calls):
            for index, call in zip(order, calls, strict=True):
                given = indices[index]
                ids.append(given[1] if given is not None else registry.claim(call.id))
        else:
            unused = [g for i in order if (g := indices[i]) is not None]
            for call in calls:
                match = next((g for g in unused if call.id in g), None)
                if match is not None:
                    unused.remove(match)
                    ids.append(match[1])
                else:
                    ids.append(registry.claim(call.id))
        fixed = tuple(CallIds._with_id(c, i) for c, i in zip(calls, ids, strict=True))
        if all(a is b for a, b in zip(fixed, calls, strict=True)):
            return response
        return with_tool_calls(response, fixed)


__all__ = [
    "MAX_CALL_ID_CHARS",
    "CallIds",
    "StreamCallIds",
    "is_valid_call_id",
    "sanitize_call_id",
    "unique_response",
    "unique_tool_calls",
    "with_tool_calls",
]
