"""`ChatResponse`: the answer of a model call, or of a whole turn through a chain."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from .messages import AssistantMessage, Message, ToolCall
from .usage import Usage

FinishReason: TypeAlias = (
    Literal[
        "stop",
        "length",
        "tool_calls",
        "content_filter",
        "return_direct",
        "approval_pending",
        "error",
    ]
    | str
)
"""Why a response ended. Providers map their own values to these names."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """Tool calls waiting for a human decision; `id` is what `Chain.resume` takes."""

    id: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, kw_only=True)
class ChatResponse:
    """A model's answer.

    `messages` holds every message the turn added (assistant tool-call messages, tool
    results, final answer); for a single model call it is just `(message,)`. `usage` is
    summed over every model call of the turn.
    """

    message: AssistantMessage
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    messages: tuple[Message, ...] = ()
    model: str | None = None
    id: str | None = None
    pending_approval: PendingApproval | None = None

    def __post_init__(self) -> None:
        if not self.messages:
            object.__setattr__(self, "messages", (self.message,))

    @property
    def text(self) -> str:
        """The final answer's text."""
        return self.message.text

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls the final message asks for (empty once a tool loop has run them)."""
        return self.message.tool_calls
