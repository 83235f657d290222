"""What `Chain.call` and `Chain.stream` accept, checked at the door.

A prompt is a user message's text, one message or a transcript (a list, tuple or iterator
of advisorchain messages and/or OpenAI-style message dicts), or a whole `ChatRequest`.
Anything else is an `InvalidPromptError` naming what was given and what is expected,
before any link or model sees it.

OpenAI-style dicts (`{"role": "user", "content": "hi"}`, as the Chat Completions API
takes them) are converted strictly by `from_openai_messages`: every key must be one the
conversion reads (keys whose value is empty, such as `"refusal": None` in a message
dumped from the official SDK, are allowed), and every value must have the documented
shape. Roles:

- `system` (and `developer`): text, or a list of `{"type": "text"}` parts.
- `user`: text, or parts: `text`, `image_url` (`{"url": ...}`, `data:` URLs included),
  `file` (`{"file_data": "data:<type>;base64,...", "filename": ...}`).
- `assistant`: text or text parts (or `None`), and `tool_calls`:
  `[{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}]`.
- `tool`: `tool_call_id` and text (or text parts); the tool's name is read from the
  assistant message that asked for that call, which must come earlier.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeAlias

from pydantic import ValidationError

from .errors import AdvisorChainError
from .messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from .parts import DocumentPart, ImagePart, TextPart
from .request import ChatRequest

OpenAIMessage: TypeAlias = Mapping[str, Any]
"""An OpenAI-style chat message: a dict with `role` and `content` (and more by role)."""

Prompt: TypeAlias = (
    str
    | Message
    | OpenAIMessage
    | Sequence[Message | OpenAIMessage]
    | Iterator[Message | OpenAIMessage]
    | ChatRequest
)
"""What `Chain.call` accepts: a user message's text, one message or a transcript
(advisorchain messages and/or OpenAI-style dicts), or a whole request."""

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)

_EXPECTED = (
    "a prompt is the user's text (str), a message (UserMessage(...) or an OpenAI-style "
    '{"role": "user", "content": "..."} dict), a list of messages, or a ChatRequest'
)


class InvalidPromptError(AdvisorChainError, TypeError, ValueError):
    """What was given to `Chain.call`/`stream` (or `from_openai_messages`) is not a prompt.

    A `TypeError` for a value of the wrong kind, and a `ValueError` for a message dict of
    the right kind but the wrong shape: catch either, or this class.
    """


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"


def to_messages(prompt: object) -> tuple[Message, ...]:
    """The messages of a prompt that is not a `ChatRequest`; `InvalidPromptError` if it is
    not a prompt at all."""
    if isinstance(prompt, str):
        return (UserMessage(content=prompt),)
    if isinstance(prompt, _MESSAGE_TYPES):
        return (prompt,)
    if isinstance(prompt, Mapping):
        return from_openai_messages([prompt])
    if isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, (Sequence, Iterator)):
        raise InvalidPromptError(f"{_EXPECTED}; got {_describe(prompt)}")
    return _transcript(tuple(prompt))


def _transcript(items: tuple[Any, ...]) -> tuple[Message, ...]:
    """A list's items as messages: each a message or an OpenAI-style dict."""
    for index, item in enumerate(items):
        if isinstance(item, str):
            raise InvalidPromptError(
                f"item {index} of the prompt is a str: a list holds messages; pass the text "
                f'alone, or as {{"role": "user", "content": {item[:40]!r}}}'
            )
        if not isinstance(item, (Mapping, *_MESSAGE_TYPES)):
            raise InvalidPromptError(
                f"item {index} of the prompt is not a message; {_EXPECTED}; got {_describe(item)}"
            )
    return _convert(items)


def from_openai_messages(messages: Sequence[Message | OpenAIMessage]) -> tuple[Message, ...]:
    """OpenAI-style message dicts (and advisorchain messages, kept as they are) as
    advisorchain messages, converted strictly (see the module's docstring).

    Raises `InvalidPromptError` naming the message's index and what is wrong with it.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidPromptError(f"expected a list of message dicts, got {_describe(messages)}")
    return _convert(tuple(messages))


def _convert(items: Sequence[object]) -> tuple[Message, ...]:
    names: dict[str, str] = {}  # tool call id -> tool name, from earlier assistant messages
    converted: list[Message] = []
    for index, item in enumerate(items):
        if isinstance(item, _MESSAGE_TYPES):
            message: Message = item
        elif isinstance(item, Mapping):
            try:
                message = _one(item, names)
            except InvalidPromptError as exc:
                raise InvalidPromptError(f"message {index}: {exc}") from None
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise InvalidPromptError(
                    f"message {index}: {first['msg']}" + (f" (at {where})" if where else "")
                ) from None
        else:
            raise InvalidPromptError(f"message {index} is not a message: {_describe(item)}")
        if isinstance(message, AssistantMessage):
            names.update((call.id, call.name) for call in message.tool_calls)
        converted.append(message)
    return tuple(converted)


_ALLOWED_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "tool_calls", "name", "refusal"},
    "tool": {"role", "content", "tool_call_id", "name"},
}


def _one(item: Mapping[str, Any], names: Mapping[str, str]) -> Message:
    role = item.get("role")
    if role not in _ALLOWED_KEYS:
        known = ", ".join(sorted(_ALLOWED_KEYS))
        raise InvalidPromptError(f"role must be one of {known}, not {role!r}")
    unknown = sorted(
        str(k) for k, v in item.items() if k not in _ALLOWED_KEYS[role] and v not in (None, [], {})
    )
    if unknown:
        raise InvalidPromptError(f"a {role} message has no key(s) {', '.join(unknown)}")
    if item.get("name") not in (None, "") and role != "tool":
        raise InvalidPromptError(
            f"a {role} message's 'name' (a participant's name) is not supported: drop it"
        )
    if item.get("refusal") not in (None, ""):
        raise InvalidPromptError("an assistant message with a refusal: pass its text as content")
    content = item.get("content")
    if role in ("system", "developer"):
        return SystemMessage(content=_text(content, role))
    if role == "user":
        if "content" not in item:
            raise InvalidPromptError("a user message needs 'content'")
        if isinstance(content, str):
            return UserMessage(content=content)
        return UserMessage(content=tuple(_user_part(p, i) for i, p in enumerate(_parts(content))))
    if role == "assistant":
        calls = item.get("tool_calls") or []
        if not isinstance(calls, Sequence) or isinstance(calls, (str, bytes)):
            raise InvalidPromptError("'tool_calls' must be a list")
        tool_calls = tuple(_tool_call(c, i) for i, c in enumerate(calls))
        text = None if content is None else _text(content, role)
        if text is None and not tool_calls:
            raise InvalidPromptError("an assistant message needs content or tool_calls")
        return AssistantMessage(content=text or None, tool_calls=tool_calls)
    call_id = item.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidPromptError("a tool message needs 'tool_call_id', a string")
    name = names.get(call_id)
    if name is None:
        raise InvalidPromptError(
            f"the tool message answers call {call_id!r}, which no earlier assistant "
            "message's tool_calls asked for"
        )
    return ToolMessage(tool_call_id=call_id, name=name, content=_text(content, role))


def _parts(content: object) -> Sequence[Any]:
    if isinstance(content, (str, bytes, Mapping)) or not isinstance(content, Sequence):
        raise InvalidPromptError(f"content must be a string or a list of parts, not {content!r}")
    return content


def _text(content: object, role: str) -> str:
    """Text content: a string, or a list of text parts (joined)."""
    if isinstance(content, str):
        return content
    if content is None:
        raise InvalidPromptError(f"a {role} message needs 'content'")
    texts: list[str] = []
    for index, part in enumerate(_parts(content)):
        if not (isinstance(part, Mapping) and part.get("type") == "text"):
            raise InvalidPromptError(
                f"content part {index} of a {role} message must be "
                f'{{"type": "text", "text": "..."}}, not {_describe(part)}'
            )
        texts.append(_string(part, "text", f"content part {index}"))
    return "".join(texts)


def _string(value: Mapping[str, Any], key: str, where: str) -> str:
    found = value.get(key)
    if not isinstance(found, str):
        raise InvalidPromptError(f"{where} needs {key!r}, a string")
    return found


def _user_part(part: object, index: int) -> TextPart | ImagePart | DocumentPart:
    where = f"content part {index}"
    if not isinstance(part, Mapping):
        raise InvalidPromptError(f"{where} must be a dict with a 'type', not {_describe(part)}")
    kind = part.get("type")
    if kind == "text":
        return TextPart(text=_string(part, "text", where))
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        if not isinstance(url, str):
            raise InvalidPromptError(f'{where} needs "image_url": {{"url": "..."}}')
        return ImagePart(url=url)
    if kind == "file":
        file = part.get("file")
        data = file.get("file_data") if isinstance(file, Mapping) else None
        if not isinstance(data, str) or not data.startswith("data:"):
            raise InvalidPromptError(
                f'{where} needs "file": {{"file_data": "data:<type>;base64,..."}} '
                "(uploaded file ids are not supported)"
            )
        header, _, encoded = data[5:].partition(",")
        media_type, _, encoding = header.rpartition(";")
        if encoding != "base64" or not media_type:
            raise InvalidPromptError(f"{where}: file_data must be a base64 data: URL")
        filename = file.get("filename") if isinstance(file, Mapping) else None
        return DocumentPart(data=encoded, media_type=media_type, name=filename)  # type: ignore[arg-type]
    raise InvalidPromptError(
        f"{where} has type {kind!r}: a user message's parts are text, image_url or file"
    )


def _tool_call(call: object, index: int) -> ToolCall:
    where = f"tool_calls[{index}]"
    if not isinstance(call, Mapping):
        raise InvalidPromptError(f"{where} must be a dict, not {_describe(call)}")
    if call.get("type", "function") != "function":
        raise InvalidPromptError(f"{where} has type {call.get('type')!r}: only 'function'")
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise InvalidPromptError(f'{where} needs "function": {{"name": ..., "arguments": ...}}')
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        raise InvalidPromptError(
            f"{where}.function.arguments must be the JSON text of the arguments (a string)"
        )
    return ToolCall(
        id=_string(call, "id", where),
        name=_string(function, "name", f"{where}.function"),
        arguments=arguments,
    )


__all__ = ["InvalidPromptError", "OpenAIMessage", "Prompt", "from_openai_messages", "to_messages"]
