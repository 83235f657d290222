"""`OpenAIChatModel`: the Chat Completions API, from OpenAI or any compatible server.

Wire notes:
- An assistant message with tool calls and no text is sent with `"content": ""`, never
  `null` (llama.cpp's server rejects `null`).
- Tool results are `role: tool` messages with `tool_call_id`. Chat Completions has no
  error flag, so a failed tool's message is sent as is: its text says it failed.
- `tool_choice` and `parallel_tool_calls` are only sent with tools (the API rejects them
  otherwise); with tools and no `tool_choice`, `"auto"` is sent (the API's default, but
  `llama_cpp.server --chat_format chatml-function-calling` calls no tool without it).
  `ChatOptions.extra` is merged into the body last, so it can override.
- Some servers (Ollama) report `finish_reason: "stop"` for an answer with tool calls;
  that is normalized to `"tool_calls"`.
- A stream is complete once `data: [DONE]` or a `finish_reason` arrived (some servers omit
  `[DONE]`); the usage chunk that follows the finish reason is read when it comes. Nothing
  after `[DONE]` is waited for, even if the server keeps the connection open.
- In-band errors are `ProviderError`s typed by their `code`: `{"error": {...}}` in a 200
  response or a stream chunk, vLLM's `{"object": "error", ...}`, and any `event: error`.
- Streamed tool calls are numbered by `index`, `id` and position together (see
  `_StreamState`), for servers and gateways that omit or repeat `index`.
- Only choice 0 is read; a `refusal` is reported as the answer's text.
- Content parts: user text, images and documents are sent as `text`, `image_url` (a
  `data:` URL of the bytes, or the image's URL) and `file` parts (`file_data` as a
  `data:` URL, with the part's name or `document.pdf` as `filename`; the API takes PDFs).
- Images and documents in tool results: a `role: tool` message carries text only, so
  each one is replaced in it by a stand-in line (`[image 1 (image/png): attached in the
  next user message]`) and, with `tool_media="user_message"` (the default), sent in one
  user message right after that round's tool messages, headed by a line naming the call
  it came from. With `tool_media="omit"` only a stand-in line is sent (`... not shown:
  tool results take text only here`), for servers without image input.
- Reasoning: a `reasoning_content` field of the answer (DeepSeek, vLLM, llama.cpp's
  server) becomes a `ReasoningPart` (provider `"openai"`) and, streamed, `ReasoningDelta`s;
  reasoning is never sent back (Chat Completions has no field for it).
- Fields of a tool call other than `id`, `type`, `function` (Gemini's `extra_content` with
  its `thought_signature`, say) are kept in the call's `provider_data["openai"]` and sent
  back with the call unchanged, as is an assistant message's `provider_data["openai"]`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, Unpack

from ..core.assembly import StreamAssembler
from ..core.call_ids import unique_tool_calls
from ..core.errors import StreamInterruptedError
from ..core.events import ModelDelta, ReasoningDelta, TextDelta, ToolCallDelta
from ..core.messages import AssistantMessage, Message, ToolCall, ToolMessage, new_call_id
from ..core.options import OutputSchema
from ..core.parts import (
    ContentPart,
    DocumentPart,
    ImagePart,
    ReasoningPart,
    TextPart,
    assistant_content,
    stand_in_text,
)
from ..core.response import ChatResponse
from ..core.usage import Usage
from ._structured import openai_response_format, openai_supports
from .errors import OutputSchemaRefusedError, ProviderError
from .http.connection import Connection, ConnectionOptions, OfficialAPI
from .http.error_mapping import error_for_status, error_message, error_type_for_code
from .http.json_values import PARSE_ERRORS, json_dumps, json_excerpt, json_loads, plain, token_count
from .http_model import HTTPChatModel
from .wire import WireCall, WireFormat, merge_extra

OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_API = OfficialAPI(url=OPENAI_BASE_URL, key_env="OPENAI_API_KEY", url_env="OPENAI_BASE_URL")
"""OpenAI's own API, for both of its wire formats (Chat Completions and Responses)."""
"""The official API's base URL."""

ToolMedia: TypeAlias = Literal["user_message", "omit"]
"""What `OpenAIChatModel` does with images and documents in tool results (module notes)."""

PROVIDER = "openai"
"""The key of this provider's `provider_data`, and the `provider` of its reasoning parts."""

_CALL_KEYS = frozenset({"id", "type", "function", "index"})

_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "eos": "stop",
    "eos_token": "stop",
}


class OpenAIChatWire(WireFormat):
    """The Chat Completions wire format: `POST {base_url}/chat/completions`.

    `max_tokens_param` is the body field for `ChatOptions.max_tokens`;
    `stream_usage=False` leaves out `stream_options`, for servers that reject it;
    `tool_media` says what happens to images and documents in tool results (module notes).
    """

    provider = PROVIDER
    official = OPENAI_API
    endpoint = "/chat/completions"

    def __init__(
        self,
        *,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        stream_usage: bool = True,
        tool_media: ToolMedia = "user_message",
    ) -> None:
        if tool_media not in ("user_message", "omit"):
            raise ValueError("tool_media must be 'user_message' or 'omit'")
        self.max_tokens_param = max_tokens_param
        self.stream_usage = stream_usage
        self.tool_media: ToolMedia = tool_media

    def __repr__(self) -> str:
        return (
            f"OpenAIChatWire(max_tokens_param={self.max_tokens_param!r}, "
            f"stream_usage={self.stream_usage!r}, tool_media={self.tool_media!r})"
        )

    def parse(self, payload: Any) -> ChatResponse:
        return completion_response(payload)

    def error_type(self, status: int, payload: Any) -> type[ProviderError] | None:
        """`OutputSchemaRefusedError` when the server's error names `response_format`
        (llama-cpp-python's server answers a `json_schema` format with HTTP 500 and a
        validation error naming the field): the request, not the server, is at fault,
        so it is not retried. `None` otherwise: the status decides."""
        message = error_message(payload)
        if isinstance(message, str) and "response_format" in message:
            return OutputSchemaRefusedError
        return None

    def stream_reader(self) -> _StreamState:
        return _StreamState()

    def body(self, call: WireCall) -> dict[str, Any]:
        request, options = call.request, call.request.options
        body: dict[str, Any] = {
            "model": call.model,
            "messages": wire_messages(request.messages, tool_media=self.tool_media),
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.definition.name,
                        "description": t.definition.description,
                        "parameters": plain(t.definition.parameters),
                    },
                }
                for t in request.tools
            ]
            # "auto" is spelled out: some servers (llama.cpp's chatml-function-calling)
            # call no tool unless told
            body["tool_choice"] = wire_tool_choice(options.tool_choice or "auto")
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.max_tokens is not None:
            body[self.max_tokens_param] = options.max_tokens
        if options.stop:
            body["stop"] = list(options.stop)
        if call.stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        if options.output_schema is not None:
            body["response_format"] = openai_response_format(options.output_schema)
        body = merge_extra(body, options.extra)
        return body


class OpenAIChatModel(HTTPChatModel):
    """A chat model behind `POST {base_url}/chat/completions` (`OpenAIChatWire`).

    How it connects is a `Connection` (`connection=`, and/or its fields as keywords,
    applied over it), under the official-URL rule every provider shares (`OPENAI_API`,
    `providers/http/connection.py`): `base_url` defaults to `OPENAI_BASE_URL` from the
    environment, else the official API. The API key is `api_key`, else the variable named
    by `api_key_env`, read at the first call. `api_key_env` defaults to `OPENAI_API_KEY`,
    except when `base_url` is passed explicitly: then no variable is read unless named, so
    an OpenAI key is never sent to another server by accident. A key is required by the
    official API and when `api_key_env` is named; other servers (vLLM, llama.cpp, Ollama)
    get no key if none is set.

    `max_tokens_param` is the body field for `ChatOptions.max_tokens`: by default
    `max_completion_tokens` for the official API (its reasoning models reject the other)
    and `max_tokens` for other servers. `stream_usage=False` leaves out
    `stream_options`, for servers that reject it. `headers` are added to every request.
    `tool_media` says what happens to images and documents in tool results (see the
    module's notes): sent in a user message after the tool messages, or left out.

    Use it as an async context manager, or call `aclose()`, to close the HTTP client it
    creates; an injected `http_client` is left open.
    """

    wire: OpenAIChatWire

    def __init__(
        self,
        model: str,
        *,
        connection: Connection | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = None,
        stream_usage: bool = True,
        tool_media: ToolMedia = "user_message",
        **options: Unpack[ConnectionOptions],
    ) -> None:
        resolved = Connection.of(connection, options).for_api(OPENAI_API)
        official = (
            resolved.base_url is not None and resolved.base_url.rstrip("/") == OPENAI_BASE_URL
        )
        wire = OpenAIChatWire(
            max_tokens_param=max_tokens_param
            or ("max_completion_tokens" if official else "max_tokens"),
            stream_usage=stream_usage,
            tool_media=tool_media,
        )
        super().__init__(model, wire=wire, connection=resolved)

    @property
    def tool_media(self) -> ToolMedia:
        """What happens to images and documents in tool results (module notes)."""
        return self.wire.tool_media

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """Whether this server honours `output_schema` (see `providers._structured`)."""
        return openai_supports(self.base_url, with_tools=with_tools)


def wire_tool_choice(choice: str) -> str | dict[str, Any]:
    """`auto` / `none` / `required` as they are; a tool's name as a named function choice."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def wire_messages(
    messages: Iterable[Message], *, tool_media: ToolMedia = "user_message"
) -> list[dict[str, Any]]:
    """Core messages as Chat Completions messages (see the module's notes on parts)."""
    wire: list[dict[str, Any]] = []
    attachments: list[dict[str, Any]] = []  # media of the tool messages just written
    for message in messages:
        if attachments and not isinstance(message, ToolMessage):
            wire.append({"role": "user", "content": attachments})
            attachments = []
        if isinstance(message, AssistantMessage):
            wire.append(_assistant(message))
        elif isinstance(message, ToolMessage):
            content = message.content
            if not isinstance(content, str):
                content = _tool_content(message, content, tool_media, attachments)
            wire.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": content})
        else:
            content = message.content
            wire.append(
                {
                    "role": message.role,
                    "content": content if isinstance(content, str) else content_parts(content),
                }
            )
    if attachments:
        wire.append({"role": "user", "content": attachments})
    return wire


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    item: dict[str, Any] = {"role": "assistant", "content": message.text}
    if message.tool_calls:
        item["tool_calls"] = [_wire_call(call) for call in message.tool_calls]
    ours = (message.provider_data or {}).get(PROVIDER)
    if isinstance(ours, Mapping):
        item.update(ours)
    return item


def _wire_call(call: ToolCall) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    ours = (call.provider_data or {}).get(PROVIDER)
    if isinstance(ours, Mapping):
        wire.update({k: v for k, v in ours.items() if k not in _CALL_KEYS})
    return wire


def content_parts(parts: Iterable[ContentPart]) -> list[dict[str, Any]]:
    """Content parts as Chat Completions content parts (reasoning is left out)."""
    wire: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                wire.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            wire.append({"type": "image_url", "image_url": {"url": part.data_url()}})
        elif isinstance(part, DocumentPart):
            wire.append(
                {
                    "type": "file",
                    "file": {"filename": part.name or "document.pdf", "file_data": part.data_url()},
                }
            )
    return wire


def _tool_content(
    message: ToolMessage,
    parts: Iterable[ContentPart],
    tool_media: ToolMedia,
    attachments: list[dict[str, Any]],
) -> str:
    """A tool result's parts as text; its media go to `attachments` (module notes)."""
    media = [p for p in parts if isinstance(p, (ImagePart, DocumentPart))]
    if media and tool_media == "user_message":
        attachments.append(
            {
                "type": "text",
                "text": f"Attached by the result of {message.name} (call {message.tool_call_id}):",
            }
        )
        attachments.extend(content_parts(media))
    if tool_media == "user_message":
        return stand_in_text(parts, "attached in the next user message")
    return stand_in_text(parts, "not shown: tool results take text only here")


def build_response(
    message: AssistantMessage,
    finish_reason: str | None,
    usage: Usage,
    *,
    response_id: str | None,
    model: str | None,
) -> ChatResponse:
    """The response both the call and the stream path end with: one place to normalize."""
    reason = _FINISH_REASONS.get(finish_reason or "", finish_reason or "stop")
    if message.tool_calls and reason == "stop":
        reason = "tool_calls"
    return ChatResponse(
        message=message, finish_reason=reason, usage=usage, id=response_id, model=model
    )


def wire_usage(payload: Any) -> Usage:
    """Chat Completions `usage` as core `Usage` (cached tokens are part of the input,
    reasoning tokens part of the output).

    A count that is not a non-negative number (a string, a huge float) counts as 0."""
    if not isinstance(payload, Mapping):
        return Usage(requests=1)
    details = payload.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    output = payload.get("completion_tokens_details")
    reasoning = output.get("reasoning_tokens") if isinstance(output, Mapping) else None
    return Usage(
        input_tokens=token_count(payload.get("prompt_tokens")),
        output_tokens=token_count(payload.get("completion_tokens")),
        cached_tokens=token_count(cached),
        requests=1,
        reasoning_tokens=token_count(reasoning),
    )


def completion_response(payload: Mapping[str, Any]) -> ChatResponse:
    """A `chat.completion` object as a `ChatResponse`."""
    if _is_error(payload) and "choices" not in payload:
        raise _payload_error(payload)
    choice = payload["choices"][0]
    wire = choice.get("message") or {}
    content = wire.get("content")
    if content is None and isinstance(wire.get("refusal"), str):
        content = wire["refusal"]
    calls = unique_tool_calls(
        tuple(
            ToolCall(
                id=call.get("id") or new_call_id(),
                name=call["function"]["name"],
                arguments=wire_arguments(call["function"]) or "{}",
                provider_data=call_provider_data(call),
            )
            for call in wire.get("tool_calls") or ()
        )
    )
    parts: list[TextPart | ReasoningPart] = []
    reasoning = wire.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ReasoningPart(text=reasoning, provider=PROVIDER))
    if isinstance(content, str):
        parts.append(TextPart(text=content))
    elif content is not None:
        raise TypeError(f"content is a {type(content).__name__}, not a string")
    message = AssistantMessage(content=assistant_content(parts), tool_calls=calls)
    reason = choice.get("finish_reason")
    if reason is None and wire.get("refusal"):
        reason = "content_filter"
    return build_response(
        message,
        reason,
        wire_usage(payload.get("usage")),
        response_id=payload.get("id"),
        model=payload.get("model"),
    )


def call_provider_data(call: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fields of a wire tool call other than `id`, `type`, `function` (`index`), as
    the call's `provider_data`; `None` if it has none."""
    extra = {k: v for k, v in call.items() if k not in _CALL_KEYS}
    return {PROVIDER: extra} if extra else None


def _is_error(payload: Mapping[str, Any]) -> bool:
    """An in-band error: `{"error": {...}}`, or vLLM's `{"object": "error", ...}`."""
    return payload.get("error") is not None or payload.get("object") == "error"


def _payload_error(payload: Mapping[str, Any]) -> ProviderError:
    error = payload.get("error")
    if not isinstance(error, Mapping):
        error = payload
    code = error.get("code") if isinstance(error, Mapping) else None
    if isinstance(code, str) and code.isascii() and code.isdigit() and len(code) == 3:
        code = int(code)
    message = f"openai: {error_message(payload) or 'error in the response'}"
    body = json_excerpt(payload)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
        return error_for_status(code, message, provider="openai", body=body)
    kind = error_type_for_code(code, error.get("type") if isinstance(error, Mapping) else None)
    return (kind or ProviderError)(message, body=body, provider="openai")


def _event_error(data: str) -> ProviderError:
    """The error an `event: error` carries, whatever its data looks like."""
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError):
        payload = None
    if isinstance(payload, dict):
        return _payload_error(payload)
    return ProviderError(f"openai: error event: {data[:200]}", body=data, provider="openai")


class _StreamState:
    """What a Chat Completions stream has delivered so far.

    Tool-call fragments are numbered here, not by the wire `index` alone: a fragment
    with a new `id` at an index already used, or a named fragment without an `index`
    after a named call, starts a new call (gateways that merge parallel calls send those),
    so no call is lost or glued to another.
    """

    __slots__ = (
        "_by_id",
        "_calls",
        "_ids",
        "_named",
        "_row",
        "_slots",
        "assembler",
        "done",
        "finish_reason",
        "id",
        "model",
        "usage",
    )

    def __init__(self) -> None:
        self.assembler = StreamAssembler()
        self.done = False
        self.finish_reason: str | None = None
        self.id: str | None = None
        self.model: str | None = None
        self.usage = Usage(requests=1)
        self._slots: dict[int, int] = {}  # wire index -> call number
        self._by_id: dict[str, int] = {}  # call id -> call number
        self._ids: dict[int, str] = {}  # call number -> its id
        self._named: dict[int, None] = {}  # call numbers that got a name (a dict: smaller)
        self._row: list[int] = []  # the calls of the last chunk with tool calls, in order
        self._calls = 0

    def receive(self, data: str, event: str = "message") -> list[ModelDelta]:
        """Take one event's data; return the deltas it carries."""
        if self.done:
            return []
        if event == "error":
            raise _event_error(data)
        if data.strip() == "[DONE]":
            self.done = True
            return []
        try:
            chunk = json_loads(data)
        except (ValueError, RecursionError) as exc:
            raise StreamInterruptedError(f"openai: malformed JSON in the stream: {exc}") from exc
        if type(chunk) is not dict:
            raise StreamInterruptedError("openai: a stream event is not a JSON object")
        if chunk.get("error") is not None or chunk.get("object") == "error":  # `_is_error`
            raise _payload_error(chunk)
        try:
            return self._chunk(chunk)
        except PARSE_ERRORS as exc:
            raise StreamInterruptedError(
                f"openai: unexpected stream chunk ({type(exc).__name__}: {exc})"
            ) from exc

    def _chunk(self, chunk: Mapping[str, Any]) -> list[ModelDelta]:
        if not self.id:
            self.id = chunk.get("id")
        if not self.model:
            self.model = chunk.get("model")
        usage = chunk.get("usage")
        if usage:
            self.usage = wire_usage(usage)
        deltas: list[ModelDelta] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content")
            if reasoning and isinstance(reasoning, str):
                self.assembler.reasoning_detail(0, provider=PROVIDER)
                deltas.append(ReasoningDelta(reasoning, 0))
            text = delta.get("content")
            if text is None and isinstance(delta.get("refusal"), str):
                text = delta["refusal"]
            if text:
                if not isinstance(text, str):
                    raise TypeError(f"content is a {type(text).__name__}, not a string")
                deltas.append(TextDelta(text))
            elif text is not None and not isinstance(text, str):
                raise TypeError(f"content is a {type(text).__name__}, not a string")
            calls = delta.get("tool_calls")
            if calls:
                deltas.extend(self._tool_deltas(calls))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        add = self.assembler.add
        for item in deltas:
            add(item)
        return deltas

    def _tool_deltas(self, calls: Sequence[Mapping[str, Any]]) -> list[ToolCallDelta]:
        if not isinstance(calls, (list, tuple)):
            raise TypeError(f"tool_calls is a {type(calls).__name__}, not a list")
        deltas = []
        row: list[int] = []
        for position, call in enumerate(calls):
            function = call.get("function") or {}
            wire = call.get("index")
            call_id = _text_field(call, "id")
            name = _text_field(function, "name")
            number = self._call_number(
                wire if isinstance(wire, int) and not isinstance(wire, bool) else None,
                call_id,
                name,
                position,
            )
            row.append(number)
            deltas.append(
                ToolCallDelta(
                    index=number,
                    id=call_id,
                    name=name,
                    arguments=wire_arguments(function),
                    provider_data=None if call.keys() <= _CALL_KEYS else call_provider_data(call),
                )
            )
        if row:
            self._row = row
        return deltas

    def _call_number(self, wire: int | None, call_id: str | None, name: str | None, at: int) -> int:
        """The call a fragment belongs to (`at`: its position in its chunk's list)."""
        previous = self._row[at] if at < len(self._row) else None
        if call_id is not None and call_id in self._by_id:
            number = self._by_id[call_id]  # a later fragment of a known call
        elif (
            wire is not None
            and wire in self._slots
            and not (call_id and self._slots[wire] in self._ids)
        ):
            number = self._slots[wire]
        elif (
            wire is None
            and call_id is None
            and previous is not None
            and not (name and previous in self._named)
        ):
            number = previous  # no index: the call at this position in the last chunk
        else:
            number = self._calls
            self._calls += 1
        if wire is not None:
            self._slots[wire] = number
        if call_id is not None:
            self._by_id.setdefault(call_id, number)
            self._ids.setdefault(number, call_id)
        if name:
            self._named[number] = None
        return number

    def response(self) -> ChatResponse:
        """The final response; raises if the stream ended before it was complete."""
        if not self.done and self.finish_reason is None:
            raise StreamInterruptedError("openai: the stream ended before its final event")
        try:
            return build_response(
                self.assembler.message(),
                self.finish_reason,
                self.usage,
                response_id=self.id,
                model=self.model,
            )
        except StreamInterruptedError:
            raise
        except PARSE_ERRORS as exc:
            raise StreamInterruptedError(
                f"openai: the streamed response is invalid ({type(exc).__name__}: {exc})"
            ) from exc


def _text_field(item: Mapping[str, Any], key: str) -> str | None:
    value = item.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise TypeError(f"{key} is a {type(value).__name__}, not a string")
    return value


def wire_arguments(function: Mapping[str, Any]) -> str:
    """A function's `arguments` as text: a string as sent, an object (as some servers
    send) as JSON, nothing as empty."""
    arguments = function.get("arguments")
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, (dict, list)):
        return json_dumps(arguments)
    raise TypeError(f"arguments is a {type(arguments).__name__}, not a string")


__all__ = [
    "OPENAI_BASE_URL",
    "PROVIDER",
    "OpenAIChatModel",
    "OpenAIChatWire",
    "ToolMedia",
    "build_response",
    "call_provider_data",
    "completion_response",
    "content_parts",
    "wire_arguments",
    "wire_messages",
    "wire_tool_choice",
    "wire_usage",
]
