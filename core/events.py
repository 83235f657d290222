"""Stream events: what `stream()` yields, from providers up through every link."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from .messages import ToolCall, ToolMessage
from .response import ChatResponse


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, as soon as the model produced it."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call as a provider streams it; the tool loop assembles them.

    Fragments with the same `index` belong to one call; `id` and `name` may arrive in any
    fragment (usually the first), `arguments` is appended.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The tool loop is about to execute `call`."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """The tool loop finished `call`; `outcome` is `ok`, `error`, `rejected`, `timeout`, ..."""

    call: ToolCall
    result: ToolMessage
    outcome: str
    duration: float


@dataclass(frozen=True, slots=True)
class ResponseCompleted:
    """The last event of every stream, carrying the complete response."""

    response: ChatResponse


StreamEvent: TypeAlias = (
    TextDelta | ToolCallDelta | ToolCallStarted | ToolCallFinished | ResponseCompleted
)
"""Any event a stream yields."""
