"""`MemoryAdvisor`: conversations that continue across turns, with a valid tool history."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

import anyio

from ...core.advisor import Placement
from ...core.checks import require_number
from ...core.errors import AdvisorChainError, ChainConfigurationError
from ...core.messages import Message, SystemMessage, ToolMessage, UserMessage
from ...core.request import ChatRequest
from ...core.response import ChatResponse
from ...core.turn import Proceed, TurnAdvisor
from .store import ChatMemoryStore

_turns: ContextVar[frozenset[tuple[int, str]]] = ContextVar(
    "advisorchain_memory_turns", default=frozenset()
)
"""The (advisor, conversation) turns that enclose the current task: a sub-agent's turn
runs inside a tool call of its parent's, in this task or in a task it started."""


class ConversationIdError(AdvisorChainError, ValueError):
    """A conversation id is missing (with `require_conversation_id`) or not a usable string."""


class MemoryAdvisor(TurnAdvisor):
    """Loads a conversation's history before the turn and saves the turn after it.

    Control flow: calls `next` once per turn, never short-circuits or loops. The
    conversation id is `request.conversation_id` (`Chain.call(..., conversation_id=...)`)
    or else `request.tool_context[conversation_id_key]`; with neither, the advisor passes
    the request through untouched (or raises `ConversationIdError` if
    `require_conversation_id`).

    Before the call the stored history is put in front of the request's messages. The
    request's system messages stay first; without one, the latest stored system message
    is used. A system message is stored when it differs from the latest stored one, so it
    is never duplicated. After the call the turn is appended in one write: the request's
    new messages (usually the user message) and `response.messages` (assistant tool-call
    messages, tool results, final answer). Nothing is saved when the call raises, when a
    stream fails or is abandoned before its `ResponseCompleted`. A deferred turn
    (`finish_reason="deferred"`) is saved like any other: its messages end with the
    round whose calls wait, so the stored history is the transcript to resume from, and
    `chain.call(decisions=..., conversation_id=...)` resumes it (the history is put in
    front as for any turn; the resume's response, which starts with the settled calls'
    results, is appended once). A request that already starts with the history it would
    get gets no second copy, and a response message that repeats the end of the request
    is saved once.

    `max_messages` bounds the history sent to the model (the store keeps everything):
    the oldest messages go first, the window starts at a user message when one fits
    (else at the first message that is not a tool result), so a tool call is never
    separated from its results; the system message is not counted and never dropped.

    The advisor must sit before (outside) the `ToolCallingAdvisor`, which it checks.
    Turns of one conversation are serialized within the process by a per-conversation
    lock held for the whole turn (a stream holds it until it ends or is closed); turns of
    different conversations run concurrently. Across processes, each turn is one atomic
    append, so turns never interleave message by message. A turn of a conversation that
    starts inside a turn of the same conversation on the same advisor (a sub-agent
    sharing the advisor and given the same conversation id) would wait for itself: it
    runs without memory instead (nothing loaded, nothing saved; its answer is saved as
    the enclosing turn's tool result).
    """

    def __init__(
        self,
        store: ChatMemoryStore,
        *,
        conversation_id_key: str = "conversation_id",
        max_messages: int | None = None,
        require_conversation_id: bool = False,
    ) -> None:
        if not (
            callable(getattr(store, "load", None)) and callable(getattr(store, "append", None))
        ):
            raise TypeError(
                f"store must be a ChatMemoryStore (async load/append/clear), such as "
                f"SQLiteChatMemoryStore(path), not {store!r:.80}"
            )
        require_number(max_messages, "max_messages", minimum=0, integer=True, optional=True)
        self.store = store
        self.conversation_id_key = conversation_id_key
        self.max_messages = max_messages
        self.require_conversation_id = require_conversation_id
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    def __repr__(self) -> str:
        return f"MemoryAdvisor(store={self.store!r}, max_messages={self.max_messages!r})"

    def bind(self, placement: Placement) -> MemoryAdvisor:
        """Refuse a position inside the tool loop, where each round would be saved again."""
        if placement.inside_tool_loop:
            raise ChainConfigurationError(
                "MemoryAdvisor must come before ToolCallingAdvisor in the chain, "
                "so it sees each turn once"
            )
        return self

    def conversation_id(self, request: ChatRequest) -> str | None:
        """The request's conversation id, or `None` (see the class docstring)."""
        if request.conversation_id is not None:
            value: object = request.conversation_id
            where = "conversation_id"
        elif self.conversation_id_key in request.tool_context:
            value = request.tool_context[self.conversation_id_key]
            where = f"tool_context[{self.conversation_id_key!r}]"
        else:
            if self.require_conversation_id:
                raise ConversationIdError(
                    "MemoryAdvisor needs a conversation id: pass conversation_id=... or "
                    f"tool_context={{{self.conversation_id_key!r}: ...}}"
                )
            return None
        if not isinstance(value, str) or not value:
            raise ConversationIdError(
                f"the {where} must be a non-empty string, not {type(value).__name__}"
            )
        return value

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        """Load the history in front of the request, run the turn, save it (both paths)."""
        conversation_id = self.conversation_id(request)
        if conversation_id is None or (id(self), conversation_id) in _turns.get():
            return await proceed(request)
        async with self._locked(conversation_id):
            turn = await self._prepare(request, conversation_id)
            response = await proceed(turn.request)
            await self._save(turn, response)
            return response

    @asynccontextmanager
    async def _locked(self, conversation_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(conversation_id, (None, 0))
        if lock is None:
            lock = anyio.Lock()
        self._locks[conversation_id] = (lock, users + 1)
        held = _turns.get()
        try:
            async with lock:
                token = _turns.set(held | {(id(self), conversation_id)})
                try:
                    yield
                finally:
                    try:
                        _turns.reset(token)
                    except ValueError:  # a stream closed from another context
                        _turns.set(held)
        finally:
            lock, users = self._locks[conversation_id]
            if users == 1:
                del self._locks[conversation_id]
            else:
                self._locks[conversation_id] = (lock, users - 1)

    async def _load(self, conversation_id: str) -> tuple[Message, ...]:
        load_tail = getattr(self.store, "load_tail", None)
        if self.max_messages is not None and load_tail is not None:
            # The window depends on the last max_messages messages only; one more tells
            # trim_history that older ones exist (so the cut point is checked).
            tail: tuple[Message, ...] = await load_tail(conversation_id, self.max_messages + 1)
            return tail
        return await self.store.load(conversation_id)

    async def _prepare(self, request: ChatRequest, conversation_id: str) -> _Turn:
        history = await self._load(conversation_id)
        stored_system = [m for m in history if isinstance(m, SystemMessage)]
        past = [m for m in history if not isinstance(m, SystemMessage)]
        request_system = [m for m in request.messages if isinstance(m, SystemMessage)]
        incoming = [m for m in request.messages if not isinstance(m, SystemMessage)]
        window = trim_history(past, self.max_messages)
        if window and incoming[: len(window)] == window:
            new = incoming[len(window) :]
        else:
            new = incoming
        system = request_system or stored_system[-1:]
        if request_system and request_system != stored_system[-len(request_system) :]:
            save_system = request_system
        else:
            save_system = []
        prepared = replace(
            request,
            messages=(*system, *window, *new),
            conversation_id=conversation_id,
        )
        return _Turn(conversation_id, prepared, (*save_system, *new))

    async def _save(self, turn: _Turn, response: ChatResponse) -> None:
        added = response.messages
        overlap = _overlap(turn.new, added)
        await self.store.append(turn.conversation_id, (*turn.new, *added[overlap:]))


@dataclass(frozen=True, slots=True)
class _Turn:
    conversation_id: str
    request: ChatRequest
    new: tuple[Message, ...]


def trim_history(messages: Sequence[Message], max_messages: int | None) -> list[Message]:
    """The last `max_messages` of a history, cut where no tool call loses its results.

    The window starts at the earliest user message within the last `max_messages`; when
    none fits, at the earliest message there that is not a tool result. System messages
    are kept out of the count by the caller.
    """
    if max_messages is None or len(messages) <= max_messages:
        return list(messages)
    start = len(messages) - max_messages
    for i in range(start, len(messages)):
        if isinstance(messages[i], UserMessage):
            return list(messages[i:])
    for i in range(start, len(messages)):
        if not isinstance(messages[i], ToolMessage):
            return list(messages[i:])
    return []


def _overlap(head: Sequence[Message], tail: Sequence[Message]) -> int:
    """The longest k such that the last k messages of `head` are the first k of `tail`."""
    for k in range(min(len(head), len(tail)), 0, -1):
        if list(head[-k:]) == list(tail[:k]):
            return k
    return 0


__all__ = ["ConversationIdError", "MemoryAdvisor", "trim_history"]
