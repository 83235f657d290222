"""Content parts: what a message holds besides plain text.

A message's `content` is either a string (plain text, as in 0.1) or a tuple of parts:
`TextPart`, `ImagePart` (bytes and media type, or a URL), `DocumentPart` (a PDF's
bytes) and `ReasoningPart` (a model's thinking: text and/or opaque provider data, with
its signature). Parts are immutable; bytes are kept as bytes in Python and written as
base64 in JSON (`dump_messages`), and a string given for `data` is read as base64.

Which parts a message may hold depends on its role: users and tools send text, images
and documents; the assistant answers with text and reasoning.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, TypeAlias, TypeVar, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator


def _from_base64(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"data given as text must be base64: {exc}") from None
    return value


def _to_base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


Base64Bytes: TypeAlias = Annotated[
    bytes,
    BeforeValidator(_from_base64),
    PlainSerializer(_to_base64, return_type=str, when_used="json"),
]
"""Bytes in Python, base64 text in JSON; text given in Python is read as base64 too."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Part):
    """A piece of text."""

    type: Literal["text"] = "text"
    text: str


_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _sniff_image(data: bytes) -> str | None:
    for magic, media_type in _IMAGE_SIGNATURES:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class ImagePart(_Part):
    """An image: `ImagePart(data=..., media_type=...)` or `ImagePart(url=...)`.

    `media_type` may be left out for PNG, JPEG, GIF and WebP bytes (it is read from the
    bytes); with a URL it is optional. Exactly one of `data` and `url` is given. A base64
    `data:` URL is read into `data` and `media_type`, so every provider can send it.
    """

    type: Literal["image"] = "image"
    data: Base64Bytes | None = Field(default=None, repr=False)
    media_type: str | None = None
    url: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_media_type(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        url = values.get("url")
        if isinstance(url, str) and url.startswith("data:") and values.get("data") is None:
            header, _, encoded = url[5:].partition(",")
            media_type, _, encoding = header.rpartition(";")
            if encoding != "base64" or not media_type:
                raise ValueError("a data: URL in ImagePart must be base64 with a media type")
            values = {**values, "url": None, "data": encoded, "media_type": media_type}
        has_data = values.get("data") is not None
        if has_data == (values.get("url") is not None):
            raise ValueError("ImagePart takes exactly one of data= and url=")
        if has_data and not values.get("media_type"):
            data = _from_base64(values["data"])
            sniffed = _sniff_image(data) if isinstance(data, bytes) else None
            if sniffed is None:
                raise ValueError("ImagePart(data=...) needs media_type= (e.g. 'image/png')")
            values = {**values, "data": data, "media_type": sniffed}
        return values

    def data_url(self) -> str:
        """The image as a URL: its `url`, or a `data:` URL of its bytes."""
        if self.url is not None:
            return self.url
        assert self.data is not None
        return f"data:{self.media_type};base64,{_to_base64(self.data)}"


class DocumentPart(_Part):
    """A document's bytes (a PDF by default), with an optional file name."""

    type: Literal["document"] = "document"
    data: Base64Bytes = Field(repr=False)
    media_type: str = "application/pdf"
    name: str | None = None

    def data_url(self) -> str:
        """The document as a `data:` URL."""
        return f"data:{self.media_type};base64,{_to_base64(self.data)}"


class ReasoningPart(_Part):
    """A model's reasoning (thinking), kept so that it can be sent back unchanged.

    `text` is the reasoning a UI may show (empty when the provider hid it); `signature`
    authenticates it; `provider_data` holds what the provider needs back verbatim and
    nobody else reads (Anthropic's `redacted_thinking` data, say). `provider` names the
    provider that produced it: providers send back only their own reasoning.
    """

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    signature: str | None = Field(default=None, repr=False)
    provider: str | None = None
    provider_data: dict[str, Any] | None = Field(default=None, repr=False)


UserPart: TypeAlias = Annotated[TextPart | ImagePart | DocumentPart, Field(discriminator="type")]
"""A part a user message may hold."""

ToolPart: TypeAlias = UserPart
"""A part a tool result may hold: text, images, documents."""

AssistantPart: TypeAlias = Annotated[TextPart | ReasoningPart, Field(discriminator="type")]
"""A part an assistant message may hold: text and reasoning."""

ContentPart: TypeAlias = TextPart | ImagePart | DocumentPart | ReasoningPart
"""Any content part."""

PART_TYPES = (TextPart, ImagePart, DocumentPart, ReasoningPart)
"""The content part classes (for `isinstance`)."""


def text_of(content: str | tuple[ContentPart, ...] | None) -> str:
    """The text of a message's content: the string, or its text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content if isinstance(part, TextPart))


def stand_in_text(parts: Iterable[ContentPart], why: str) -> str:
    """Parts as lines of text for a reader that takes text only: each text part's text,
    and for each image or document a numbered stand-in, `[image 1 (image/png): <why>]`,
    so that neither a model nor a reader of the transcript takes it for nothing."""
    lines: list[str] = []
    number = {"image": 0, "document": 0}
    for part in parts:
        if isinstance(part, TextPart):
            lines.append(part.text)
        elif isinstance(part, (ImagePart, DocumentPart)):
            number[part.type] += 1
            lines.append(f"[{part.type} {number[part.type]} ({part.media_type or 'url'}): {why}]")
    return "\n".join(lines)


def parts_of(content: str | tuple[ContentPart, ...] | None) -> tuple[ContentPart, ...]:
    """A message's content as parts: a string is one `TextPart` (empty text: none)."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextPart(text=content),) if content else ()
    return content


_Content = TypeVar("_Content", bound="str | tuple[Any, ...] | None")


def map_text(content: _Content, rewrite: Callable[[str], str]) -> _Content:
    """`content` with `rewrite` applied to its text: the string, or each `TextPart`.

    Other parts (images, documents, reasoning, whose signatures cover their text) are kept
    as they are; content whose text does not change is returned as it was.
    """
    if content is None:
        return content
    if isinstance(content, str):
        text = rewrite(content)
        return content if text == content else cast(_Content, text)
    changed = False
    parts: list[Any] = []
    for part in content:
        if isinstance(part, TextPart):
            text = rewrite(part.text)
            if text != part.text:
                changed = True
                part = TextPart(text=text)
        parts.append(part)
    return cast(_Content, tuple(parts)) if changed else content


def assistant_content(
    parts: Iterable[TextPart | ReasoningPart],
) -> str | tuple[TextPart | ReasoningPart, ...] | None:
    """An answer's content in its one normal form, from the parts in the order received.

    Adjacent text parts are merged and empty ones dropped; content with no reasoning is
    its text (`None` if empty), so an answer without reasoning looks as it did in 0.1.
    Providers build answers with it on the call and the stream path alike.
    """
    merged: list[TextPart | ReasoningPart] = []
    for part in parts:
        if isinstance(part, TextPart):
            if not part.text:
                continue
            if merged and isinstance(merged[-1], TextPart):
                merged[-1] = TextPart(text=merged[-1].text + part.text)
                continue
        merged.append(part)
    if not any(isinstance(part, ReasoningPart) for part in merged):
        return "".join(part.text for part in merged) or None
    return tuple(merged)


__all__ = [
    "AssistantPart",
    "ContentPart",
    "DocumentPart",
    "ImagePart",
    "ReasoningPart",
    "TextPart",
    "ToolPart",
    "UserPart",
    "assistant_content",
    "parts_of",
    "stand_in_text",
    "text_of",
]
