"""Stream events: what `stream()` yields, from providers up through every link."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from .messages import ToolCall, ToolMessage
from .response import ChatResponse


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, as soon as the model produced it."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (thinking) text, for a UI to show as it comes.

    Reasoning is never part of the answer's text: it never arrives as a `TextDelta`, and
    the final message holds it as `ReasoningPart`s. `index` tells the reasoning parts of
    one answer apart (0, 1, ... in order).
    """

    text: str
    index: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call as the model streams it.

    Fragments with the same `index` belong to one call of one model answer; `id` and
    `name` may arrive in any fragment (usually the first), `arguments` is appended;
    `provider_data` (opaque data the provider needs back with the call) is merged into
    the call's.

    What a caller of `Chain.stream` sees: the fragments of every model call of the turn
    as they arrive, the tool loop's rounds included (indexes start at 0 again with each
    model call). `id` is the id the call keeps (the chain makes ids unique before any
    link sees them); the tool loop's `ToolCallStarted` for the call follows the answer's
    last fragment. The arguments are the model's text as written; `ToolCallStarted.call`
    is the assembled call the loop runs. A call a model gives whole may come as one
    fragment or, from a provider that streams none, as no fragment: `ToolCallStarted` is
    then the first a caller hears of it. A fragment whose call never gets an id (a
    provider that sends none) keeps `id=None`; the call's `ToolCallStarted` carries the
    id it was given. A chain called as a tool does not forward its model's fragments: its
    calls reach the parent's stream as their `ToolCallStarted`, wrapped in `ToolProgress`.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    provider_data: Mapping[str, Any] | None = None


ModelDelta: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta
"""A fragment of a model's answer, as providers stream them."""


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
class AnswerDiscarded:
    """The answer streamed since the turn started (or since the previous
    `AnswerDiscarded`) was rejected, and the model is asked again.

    A UI clears the text it showed for that attempt. `attempt` counts the rejected
    attempts (1 for the first); `reason` says why, in a few words (a
    `StructuredOutputAdvisor` gives the validation errors the model is sent).
    """

    reason: str
    attempt: int


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """Progress of a running tool call, for a UI to show; never part of the answer's text.

    `call_id` is the id of the call (as in `ToolCallStarted.call`). An MCP tool's
    progress notifications, and a local tool's `ToolContext.report_progress(...)` calls,
    arrive as `progress` (and `total`, when known) with an optional `message`; a chain
    called as a tool (`chain_tool`) forwards each event of its own stream but its
    `ToolCallDelta`s as `event` (nested: its text deltas stay out of the parent's text).
    Only `stream()` yields them.
    """

    call_id: str
    progress: float | None = None
    total: float | None = None
    message: str | None = None
    event: StreamEvent | None = None


@dataclass(frozen=True, slots=True)
class ResponseCompleted:
    """The last event of every stream, carrying the complete response."""

    response: ChatResponse


StreamEvent: TypeAlias = (
    TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | ToolCallStarted
    | ToolCallFinished
    | AnswerDiscarded
    | ToolProgress
    | ResponseCompleted
)
"""Any event a stream yields."""


__all__ = [
    "AnswerDiscarded",
    "ModelDelta",
    "ReasoningDelta",
    "ResponseCompleted",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolProgress",
]
