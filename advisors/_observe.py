"""What `LoggingAdvisor` and `TracingAdvisor` share: names, rounds, errors, content."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.messages import AssistantMessage, Message, ToolMessage
from ..core.parts import ContentPart, ImagePart, ReasoningPart, TextPart
from ..core.request import ChatRequest

if TYPE_CHECKING:
    from ..core.advisor import ChainView


class ModelNames:
    """The provider and default model names an observing advisor reports in one chain.

    An explicit provider name wins; otherwise the names are those of the chain's model
    (`bound`), unknown (`None`) before the advisor is placed in a chain.
    """

    __slots__ = ("_explicit", "model_name", "provider_name")

    def __init__(self, provider_name: str | None = None, model_name: str | None = None) -> None:
        self._explicit = provider_name
        self.provider_name = provider_name
        self.model_name = model_name

    def bound(self, chain: ChainView) -> ModelNames:
        """The names for `chain`'s model."""
        names = ModelNames(self._explicit or _name(chain.provider_name), _name(chain.model_name))
        names._explicit = self._explicit
        return names


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def round_of(request: ChatRequest) -> int:
    """The tool loop's round a request belongs to: 1 + tool-call messages since the user spoke."""
    rounds = 1
    messages = request.messages
    for i in range(len(messages) - 1, -1, -1):  # back to the last user message, once
        message = messages[i]
        if message.role == "user":
            break
        if message.role == "assistant" and message.tool_calls:
            rounds += 1
    return rounds


def tool_messages(messages: Sequence[Message]) -> int:
    """How many of `messages` are tool results."""
    return sum(1 for message in messages if message.role == "tool")


def error_type(exc: BaseException) -> str:
    """A low-cardinality name for an exception: its class's qualified name."""
    return type(exc).__qualname__


def truncate(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text) - limit} more chars]"


def _parts(message: Message, limit: int) -> list[dict[str, Any]]:
    if isinstance(message, ToolMessage):
        return [
            {
                "type": "tool_call_response",
                "id": message.tool_call_id,
                "response": truncate(message.text, limit),
            }
        ]
    parts: list[dict[str, Any]] = []
    content = message.content
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "content": truncate(content, limit)})
    elif content:
        parts.extend(_content_part(part, limit) for part in content)
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.id,
                    "name": call.name,
                    "arguments": truncate(call.arguments, limit),
                }
            )
    return parts


def _content_part(part: ContentPart, limit: int) -> dict[str, Any]:
    """A content part in the GenAI conventions' shape; bytes are never written."""
    if isinstance(part, TextPart):
        return {"type": "text", "content": truncate(part.text, limit)}
    if isinstance(part, ReasoningPart):
        return {"type": "reasoning", "content": truncate(part.text, limit)}
    if isinstance(part, ImagePart) and part.url is not None:
        return {"type": "uri", "modality": "image", "uri": truncate(part.url, limit)}
    modality = "image" if isinstance(part, ImagePart) else "document"
    return {"type": "blob", "modality": modality, "mime_type": part.media_type}


def messages_json(messages: Sequence[Message], limit: int) -> str:
    """Messages as JSON in the shape of the GenAI conventions' `gen_ai.input.messages`.

    Each text, argument and result is truncated to `limit` characters.
    """
    return json.dumps(
        [{"role": m.role, "parts": _parts(m, limit)} for m in messages],
        ensure_ascii=False,
    )


def output_json(message: AssistantMessage, finish_reason: str, limit: int) -> str:
    """An answer as JSON in the shape of the GenAI conventions' `gen_ai.output.messages`."""
    return json.dumps(
        [{"role": "assistant", "parts": _parts(message, limit), "finish_reason": finish_reason}],
        ensure_ascii=False,
    )


def arguments_json(arguments: Mapping[str, Any], limit: int) -> str:
    """A tool call's arguments as JSON text, truncated."""
    return truncate(json.dumps(dict(arguments), ensure_ascii=False, default=str), limit)


__all__ = [
    "ModelNames",
    "arguments_json",
    "error_type",
    "messages_json",
    "output_json",
    "round_of",
    "tool_messages",
    "truncate",
]
