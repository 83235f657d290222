"""Chat messages: the transcript that travels between the chain and a model.

Messages are immutable pydantic models. A `ToolCall` keeps the model's raw argument
text, so malformed JSON can be reported back to the model instead of crashing the turn.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""What `json.dumps(..., separators=(",", ":"), ensure_ascii=False)` does, built once."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def new_call_id() -> str:
    """Return a fresh tool-call id, for models that do not supply one."""
    return f"call_{uuid.uuid4().hex[:24]}"


class ToolCall(_Frozen):
    """One tool invocation requested by the model.

    `arguments` is the raw JSON text the model produced; it may be malformed.
    """

    id: str
    name: str
    arguments: str = "{}"

    @classmethod
    def from_arguments(
        cls, name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None
    ) -> ToolCall:
        """Build a call from a Python mapping of arguments (serialized to JSON)."""
        return cls(
            id=id or new_call_id(),
            name=name,
            arguments=_COMPACT_JSON.encode(dict(arguments or {})),
        )


class SystemMessage(_Frozen):
    """Instructions for the model."""

    role: Literal["system"] = "system"
    content: str


class UserMessage(_Frozen):
    """What the user said."""

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_Frozen):
    """What the model answered: text, tool calls, or both."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def text(self) -> str:
        """The message's text, or an empty string when it has none."""
        return self.content or ""


class ToolMessage(_Frozen):
    """The result of one tool call, answering the call with id `tool_call_id`."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
"""Any chat message; the `role` field tells which."""

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def dump_messages(messages: Sequence[Message]) -> bytes:
    """Serialize messages to JSON (for stores: memory, deferred approvals)."""
    return _MESSAGES.dump_json(list(messages))


def load_messages(data: str | bytes) -> tuple[Message, ...]:
    """Parse messages serialized by `dump_messages`."""
    return tuple(_MESSAGES.validate_json(data))
