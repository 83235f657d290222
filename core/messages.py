"""Chat messages: the transcript that travels between the chain and a model.

Messages are immutable pydantic models. A `ToolCall` keeps the model's raw argument
text, so malformed JSON can be reported back to the model instead of crashing the turn.

`content` is a string or a tuple of content parts (`core/parts.py`: text, images,
documents, reasoning); every message's `.text` is its text either way, and `.parts` its
content as parts. `provider_data` on assistant messages and tool calls holds opaque
JSON a provider needs back unchanged (a Gemini thought signature on a call, say), keyed
by the provider's name: each provider reads and sends only its own key.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .parts import AssistantPart, ContentPart, ReasoningPart, ToolPart, UserPart, parts_of, text_of

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
    provider_data: dict[str, Any] | None = Field(default=None, repr=False)

    def __eq__(self, other: object) -> bool:
        # The same call object is equal to itself (what pydantic's comparison of its
        # fields would say), without comparing them: rounds compare calls with themselves.
        return self is other or super().__eq__(other)

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

    @property
    def text(self) -> str:
        """The instructions."""
        return self.content

    @property
    def parts(self) -> tuple[ContentPart, ...]:
        """The content as parts (one `TextPart`)."""
        return parts_of(self.content)


class UserMessage(_Frozen):
    """What the user said: text (`content="..."`) or parts (text, images, documents)."""

    role: Literal["user"] = "user"
    content: str | tuple[UserPart, ...]

    @property
    def text(self) -> str:
        """The message's text (its text parts joined)."""
        content = self.content
        return content if type(content) is str else text_of(content)

    @property
    def parts(self) -> tuple[ContentPart, ...]:
        """The content as parts."""
        return parts_of(self.content)


class AssistantMessage(_Frozen):
    """What the model answered: text, tool calls, or both; reasoning parts before the text.

    `content` is the text, or parts (`TextPart`, `ReasoningPart`) when the model's
    reasoning came with it; `provider_data` is opaque data for the provider that wrote it.
    """

    role: Literal["assistant"] = "assistant"
    content: str | tuple[AssistantPart, ...] | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    provider_data: dict[str, Any] | None = Field(default=None, repr=False)

    @property
    def text(self) -> str:
        """The message's text, or an empty string when it has none (never the reasoning)."""
        content = self.content
        if type(content) is str:
            return content
        if content is None or isinstance(content, str):
            return content or ""
        return text_of(content)

    @property
    def parts(self) -> tuple[ContentPart, ...]:
        """The content as parts, in order."""
        return parts_of(self.content)

    @property
    def reasoning(self) -> tuple[ReasoningPart, ...]:
        """The reasoning parts, in order."""
        if self.content is None or isinstance(self.content, str):
            return ()
        return tuple(p for p in self.content if isinstance(p, ReasoningPart))


class ToolMessage(_Frozen):
    """The result of one tool call, answering the call with id `tool_call_id`.

    `content` is text, or parts (text, images, documents) for a tool that returned them.
    """

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str | tuple[ToolPart, ...]
    is_error: bool = False

    @property
    def text(self) -> str:
        """The result's text (its text parts joined)."""
        content = self.content
        return content if type(content) is str else text_of(content)

    @property
    def parts(self) -> tuple[ContentPart, ...]:
        """The content as parts."""
        return parts_of(self.content)


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
"""Any chat message; the `role` field tells which."""

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def dump_messages(messages: Sequence[Message]) -> bytes:
    """Serialize messages to JSON (for stores: memory, deferred approvals).

    Content parts are written with a `type`; bytes (images, documents) as base64.
    """
    return _MESSAGES.dump_json(list(messages))


def load_messages(data: str | bytes) -> tuple[Message, ...]:
    """Parse messages serialized by `dump_messages` (0.1's plain-text rows included)."""
    return tuple(_MESSAGES.validate_json(data))


__all__ = [
    "AssistantMessage",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
    "dump_messages",
    "load_messages",
    "new_call_id",
]
