"""Where `MemoryAdvisor` keeps conversations: the `ChatMemoryStore` protocol, its error,
the in-memory store and what the SQL stores share (id checks, message rows).

`InMemoryChatMemoryStore` lives in the process (tests, single-process apps); the SQL stores
are `sqlite_store.SQLiteChatMemoryStore` and `postgres_store.PostgresChatMemoryStore`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter
from pydantic_core import PydanticSerializationError

from ...core.errors import AdvisorChainError
from ...core.messages import Message, SystemMessage
from .._storable import storable, without_surrogates

MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
"""Reads a stored message row back (`MESSAGE.validate_json(row)`)."""


class ChatMemoryStoreError(AdvisorChainError):
    """A memory store cannot do what was asked (closed, bad configuration)."""


@runtime_checkable
class ChatMemoryStore(Protocol):
    """Keeps each conversation's messages, in order, keyed by conversation id.

    `append` adds a whole turn at once: an implementation must write the messages of one
    call atomically (all or none), so two turns never interleave message by message.

    A store may also offer `load_tail(conversation_id, last)`: every stored system message
    and the last `last` other messages, in stored order. `MemoryAdvisor` with
    `max_messages` uses it when present, so long conversations are not read whole.
    """

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        """Every message stored for the conversation, oldest first (empty if unknown)."""
        ...

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Add `messages` at the end of the conversation, atomically."""
        ...

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        ...


@dataclass(frozen=True, slots=True)
class CompactionBoundary:
    """A summary of the start of a conversation, kept beside its log (never in it).

    `covered` is how many messages of the conversation (system messages not counted)
    the summary replaces in the view sent to the model; `digest` identifies those
    messages (`compaction.transcript.prefix_digests`), so a boundary is applied only to
    the history it summarizes; `summarizer` names the model that wrote `summary`.
    """

    covered: int
    digest: str
    summary: str
    summarizer: str | None = None

    def to_json(self) -> str:
        """The boundary as one JSON object (a database row)."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> CompactionBoundary:
        """Read a boundary written by `to_json`."""
        data: dict[str, Any] = json.loads(text)
        return cls(
            covered=int(data["covered"]),
            digest=str(data["digest"]),
            summary=str(data["summary"]),
            summarizer=data.get("summarizer"),
        )


@runtime_checkable
class CompactionBoundaryStore(Protocol):
    """Where `CompactionAdvisor` keeps its boundaries: every memory store of this package.

    Boundaries are appended, never updated, so the log and every summary of it stay."""

    async def save_boundary(self, conversation_id: str, boundary: CompactionBoundary) -> None:
        """Record `boundary` as the conversation's latest."""
        ...

    async def load_boundary(self, conversation_id: str) -> CompactionBoundary | None:
        """The conversation's latest boundary, or `None`."""
        ...


class InMemoryChatMemoryStore:
    """A `ChatMemoryStore` in a dict: fast, lost when the process ends. It keeps
    compaction boundaries too (`CompactionBoundaryStore`)."""

    def __init__(self) -> None:
        self._conversations: dict[str, list[Message]] = {}
        self._boundaries: dict[str, list[CompactionBoundary]] = {}

    def __repr__(self) -> str:
        return f"InMemoryChatMemoryStore(conversations={len(self._conversations)})"

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        """Every message stored for the conversation, oldest first."""
        return tuple(self._conversations.get(conversation_id, ()))

    async def load_tail(self, conversation_id: str, last: int) -> tuple[Message, ...]:
        """The stored system messages and the last `last` other messages, in order."""
        return tail(self._conversations.get(conversation_id, ()), last)

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Add `messages` at the end of the conversation."""
        if messages:
            self._conversations.setdefault(conversation_id, []).extend(messages)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation (and its compaction boundaries)."""
        self._conversations.pop(conversation_id, None)
        self._boundaries.pop(conversation_id, None)

    async def save_boundary(self, conversation_id: str, boundary: CompactionBoundary) -> None:
        """Record `boundary` as the conversation's latest (the log is not touched)."""
        self._boundaries.setdefault(conversation_id, []).append(boundary)

    async def load_boundary(self, conversation_id: str) -> CompactionBoundary | None:
        """The conversation's latest boundary, or `None`."""
        found = self._boundaries.get(conversation_id)
        return found[-1] if found else None


def check_storable(conversation_id: str) -> None:
    """Raise `ChatMemoryStoreError` for an id a database cannot hold (NUL, lone surrogate)."""
    if not storable(conversation_id):
        raise ChatMemoryStoreError(
            "the conversation id holds NUL or a lone surrogate, which the store cannot hold"
        )


def message_json(message: Message) -> str:
    """`message` as JSON for a database row; lone surrogates in its text (which UTF-8
    cannot encode) are stored as U+FFFD, as the providers send them."""
    try:
        return MESSAGE.dump_json(message).decode()
    except PydanticSerializationError:
        data = without_surrogates(MESSAGE.dump_python(message, mode="json", fallback=str))
        return json.dumps(data, ensure_ascii=False)


def read_message(text: object) -> Message:
    """A stored message row read back; `ChatMemoryStoreError` for a row that is not a
    message (another writer, a migration, a damaged file), never the row itself."""
    try:
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"a {type(text).__name__} where JSON text was stored")
        return MESSAGE.validate_json(text)
    except (ValueError, TypeError, RecursionError) as exc:  # ValidationError is a ValueError
        failure = ChatMemoryStoreError(
            f"a stored message cannot be read back ({type(exc).__name__}): the row is damaged"
        )
    raise failure


def next_seq(last: object, count: int) -> int:
    """The first sequence number after the stored `last` for `count` new messages;
    `ChatMemoryStoreError` when the stored number is not one (a damaged row)."""
    if isinstance(last, bool) or not isinstance(last, int) or not -1 <= last < 2**63 - 1 - count:
        raise ChatMemoryStoreError(
            f"the conversation's stored sequence number is damaged (a {type(last).__name__})"
        )
    return last + 1


def tail(messages: Sequence[Message], last: int) -> tuple[Message, ...]:
    """Every system message of `messages` and the last `last` others, in order."""
    others = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)]
    keep = set(others[max(0, len(others) - last) :] if last > 0 else [])
    return tuple(m for i, m in enumerate(messages) if isinstance(m, SystemMessage) or i in keep)


__all__ = [
    "ChatMemoryStore",
    "ChatMemoryStoreError",
    "CompactionBoundary",
    "CompactionBoundaryStore",
    "InMemoryChatMemoryStore",
]
