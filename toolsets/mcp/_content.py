"""MCP tool results as what a model reads: content parts, bounded, with the raw result kept.

A server is untrusted input: the number of content blocks, the text and the decoded bytes
of one result are capped (`ContentLimits`); what goes over is replaced by a note saying so.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ...core.messages import AssistantMessage, UserMessage
from ...core.parts import DocumentPart, ImagePart, TextPart

if TYPE_CHECKING:
    from mcp_types import CallToolResult

ResultPart: TypeAlias = TextPart | ImagePart | DocumentPart
"""A part of a tool result as the model receives it."""

# The image types every provider here accepts as bytes; others get a text stand-in.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_DOCUMENT_TYPES = frozenset({"application/pdf"})


@dataclass(frozen=True, slots=True)
class ContentLimits:
    """Caps on one MCP result: content blocks, characters of text, decoded binary bytes."""

    max_blocks: int = 100
    max_text_chars: int = 200_000
    max_binary_bytes: int = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class McpCallResult:
    """What one MCP `tools/call` returned, as `ToolResult.value` holds it.

    `content` is what the model reads (text, images, documents and stand-ins for the
    rest); `structured_content` the server's structured result (already validated by the
    SDK against the tool's `outputSchema`, when it declares one); `raw` the SDK's
    `CallToolResult` as received, nothing dropped.
    """

    content: tuple[ResultPart, ...]
    structured_content: Any
    is_error: bool
    raw: CallToolResult

    @property
    def text(self) -> str:
        """The text parts, joined by newlines (images and documents left out)."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    def for_model(self) -> str | tuple[ResultPart, ...]:
        """Plain text when every part is text, else the parts."""
        if all(isinstance(p, TextPart) for p in self.content):
            return self.text
        return self.content


def convert_result(result: CallToolResult, limits: ContentLimits | None = None) -> McpCallResult:
    """The parts of `result` for the model, within `limits`.

    Text and text resources are kept verbatim (and blobs of a text type, if UTF-8);
    PNG/JPEG/GIF/WebP images (content blocks and blob resources) become `ImagePart`s,
    PDF blobs `DocumentPart`s; audio, other
    binary types and resource links become a bracketed text note naming them. With no
    content at all, the structured content is given as JSON text.
    """
    mapper = _Mapper(limits or ContentLimits())
    blocks: Sequence[Any] = result.content
    for block in blocks[: mapper.limits.max_blocks]:
        mapper.add(block)
    if len(blocks) > mapper.limits.max_blocks:
        mapper.note(f"[{len(blocks) - mapper.limits.max_blocks} more content blocks omitted]")
    if not blocks and result.structured_content is not None:
        mapper.text(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return McpCallResult(
        content=tuple(mapper.parts),
        structured_content=result.structured_content,
        is_error=bool(result.is_error),
        raw=result,
    )


def convert_contents(
    contents: Sequence[Any], limits: ContentLimits | None = None
) -> tuple[ResultPart, ...]:
    """The parts of a `resources/read` result's contents (text or blob), within `limits`."""
    mapper = _Mapper(limits or ContentLimits())
    for item in contents[: mapper.limits.max_blocks]:
        mapper.resource(item)
    if len(contents) > mapper.limits.max_blocks:
        mapper.note(f"[{len(contents) - mapper.limits.max_blocks} more contents omitted]")
    return tuple(mapper.parts)


def convert_prompt(
    messages: Sequence[Any], limits: ContentLimits | None = None
) -> list[UserMessage | AssistantMessage]:
    """A `prompts/get` result's messages as chat messages, within `limits`.

    A user message keeps its images and documents; an assistant message holds text only,
    so its other content becomes the bracketed notes.
    """
    mapper = _Mapper(limits or ContentLimits())
    converted: list[UserMessage | AssistantMessage] = []
    for message in messages[: mapper.limits.max_blocks]:
        start = len(mapper.parts)
        mapper.add(message.content)
        parts = mapper.parts[start:]
        if getattr(message, "role", "user") == "assistant":
            text = "\n".join(
                p.text if isinstance(p, TextPart) else f"[{p.type} not shown]" for p in parts
            )
            converted.append(AssistantMessage(content=text))
        elif all(isinstance(p, TextPart) for p in parts):
            text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
            converted.append(UserMessage(content=text))
        else:
            converted.append(UserMessage(content=tuple(parts)))
    return converted


class _Mapper:
    def __init__(self, limits: ContentLimits) -> None:
        self.limits = limits
        self.parts: list[ResultPart] = []
        self.chars = 0
        self.binary = 0

    def note(self, text: str) -> None:
        self.parts.append(TextPart(text=text))

    def text(self, text: str) -> None:
        room = max(self.limits.max_text_chars - self.chars, 0)
        if len(text) > room:
            note = f"[{len(text) - room} characters omitted]"
            text = f"{text[:room]}\n{note}" if room else note
            self.chars = self.limits.max_text_chars
        else:
            self.chars += len(text)
        self.parts.append(TextPart(text=text))

    def add(self, block: Any) -> None:
        kind = getattr(block, "type", "")
        if kind == "text":
            self.text(str(getattr(block, "text", "")))
        elif kind in ("image", "audio"):
            self.binary_part(kind, str(getattr(block, "mime_type", "") or ""), block.data, None)
        elif kind == "resource":
            self.resource(block.resource)
        elif kind == "resource_link":
            self.note(_describe_link(block))
        else:
            self.note(f"[{kind or 'unknown'} content]")

    def resource(self, resource: Any) -> None:
        uri = str(getattr(resource, "uri", ""))
        mime = str(getattr(resource, "mime_type", None) or "")
        if getattr(resource, "text", None) is not None:
            self.text(str(resource.text))
        else:
            self.binary_part("resource", mime, str(getattr(resource, "blob", "")), uri)

    def binary_part(self, kind: str, mime: str, encoded: str, uri: str | None) -> None:
        what = f"{kind} {uri}" if uri else f"{kind} content"
        what = f"{what}, {mime or 'unknown type'}"
        # Measured before decoding: what is over the cap is never decoded.
        size = len(encoded) * 3 // 4 - encoded[-2:].count("=")
        if self.binary + size > self.limits.max_binary_bytes:
            self.note(f"[{what}, about {size} bytes: omitted, over the size limit]")
            return
        if kind == "resource" and _is_text(mime):
            try:
                text = base64.b64decode(encoded, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
                pass
            else:
                self.binary += size
                self.text(text)
                return
        sendable = mime in _IMAGE_TYPES or mime in _DOCUMENT_TYPES
        if kind == "audio" or not sendable:
            self.note(f"[{what}, about {size} bytes: not sent to the model]")
            return
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            self.note(f"[{what}: the server sent invalid base64]")
            return
        self.binary += len(data)
        if mime in _IMAGE_TYPES:
            self.parts.append(ImagePart(data=data, media_type=mime))
        else:
            name = uri.rsplit("/", 1)[-1] if uri else None
            self.parts.append(DocumentPart(data=data, media_type=mime, name=name or None))


def _is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in ("application/json", "application/xml")


def _describe_link(block: Any) -> str:
    text = f"[resource link {getattr(block, 'uri', '')}"
    name = getattr(block, "name", None)
    if name:
        text += f" ({name})"
    mime = getattr(block, "mime_type", None)
    if mime:
        text += f", {mime}"
    description = getattr(block, "description", None)
    if description:
        text += f": {str(description)[:500]}"
    return text + "]"


def result_text(result: CallToolResult) -> str:
    """The text a model reads for an MCP result: its text parts and notes, joined by newlines."""
    return convert_result(result).text


__all__ = [
    "ContentLimits",
    "McpCallResult",
    "ResultPart",
    "convert_contents",
    "convert_prompt",
    "convert_result",
    "result_text",
]
