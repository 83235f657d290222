"""`OpenAIResponsesChatModel`: the OpenAI Responses API (`POST {base_url}/responses`).

`OpenAIResponsesWire` is the wire format (`providers/wire.py`); `OpenAIResponsesChatModel`
is `HTTPChatModel` with it and OpenAI's defaults.

Wire notes:
- Input: system messages are `system` messages; user text, images and documents are
  `input_text`, `input_image` (a `data:` URL of the bytes, or the image's URL; detail
  `auto`) and `input_file` (`file_data` as a `data:` URL) parts. An assistant message
  becomes, in its order, its own reasoning items, one `message` item of `output_text`
  and a `function_call` item per tool call; a tool result is a `function_call_output`
  (its text, or a list of `input_text` / `input_image` / `input_file` parts when the
  tool returned media). The API has no error flag: a failed tool's text says it failed.
- Reasoning round trip: requests are sent with `store: false` and
  `include: ["reasoning.encrypted_content"]`, so no state stays at OpenAI and each
  reasoning item comes back with its encrypted content. A reasoning item becomes a
  `ReasoningPart` (provider `"openai-responses"`, text: its summary, else its reasoning
  text) whose `provider_data["item"]` is the item exactly as received; it is sent back
  unchanged, in place, on the next round. Reasoning from other providers is not sent.
  The ids of the message and function-call items are kept (the message's
  `provider_data["openai-responses"]["message_id"]`, each call's `provider_data`), since
  a reasoning item must be followed by the items it produced; they are sent only with
  that reasoning (the API refuses an item id whose reasoning item is missing).
- Output items of other types (built-in tools a caller enabled through
  `ChatOptions.extra`) are kept in the message's `provider_data` and sent back after
  its text.
- Options: `max_tokens` is `max_output_tokens`; `tool_choice` is `auto`, `none`,
  `required` or `{"type": "function", "name": ...}`; `tool_choice` and
  `parallel_tool_calls` are sent only with tools. The API has no stop sequences:
  `ChatOptions.stop` raises `ChainConfigurationError` rather than being dropped.
  Function tools are sent with `strict: false` (the API's strict mode needs schemas
  that close every object). `ChatOptions.extra` is merged into the body last.
- Structured output: `text_format(schema)` is the `text.format` of a JSON schema.
- Finish reasons: `completed` is `stop`, or `tool_calls` with function calls;
  `incomplete` is `length` (`max_output_tokens`) or `content_filter`; a `failed`
  response or an `error` event raises the `ProviderError` its code calls for
  (`rate_limit_exceeded`: `RateLimitError`, `server_error`: `ProviderUnavailableError`,
  others `BadRequestError`). A `refusal` is reported as the answer's text, finish
  reason `content_filter`.
- Usage: `input_tokens`, `output_tokens`, `input_tokens_details.cached_tokens` and
  `output_tokens_details.reasoning_tokens`.
- Streams: `response.output_text.delta` and `response.refusal.delta` are `TextDelta`s,
  reasoning summary and reasoning text deltas `ReasoningDelta`s (one index per reasoning
  item), `response.output_item.added` of a function call and
  `response.function_call_arguments.delta` are `ToolCallDelta`s (one index per call).
  The stream is complete at `response.completed` or `response.incomplete`; the final
  response is read from that event's response, exactly as a call's answer is, with the
  items of `response.output_item.done` standing in when its `output` is empty. A stream
  that ends before it raises `StreamInterruptedError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Unpack

from ..core.errors import ChainConfigurationError, StreamInterruptedError
from ..core.events import ModelDelta, ReasoningDelta, TextDelta, ToolCallDelta
from ..core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    new_call_id,
)
from ..core.options import OutputSchema
from ..core.parts import (
    ContentPart,
    DocumentPart,
    ImagePart,
    ReasoningPart,
    TextPart,
    assistant_content,
)
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.usage import Usage
from ._structured import openai_response_format
from .errors import (
    BadRequestError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from .http.connection import Connection, ConnectionOptions
from .http.error_mapping import error_message, error_type_for_code
from .http.json_values import PARSE_ERRORS, json_excerpt, plain, token_count
from .http_model import HTTPChatModel
from .native_compaction import native_compaction
from .openai import OPENAI_API
from .wire import WireCall, WireFormat, event_object

"""The official API's base URL."""

PROVIDER = "openai-responses"
"""The key of this provider's `provider_data`, and the `provider` of its reasoning parts."""

INCLUDE = ("reasoning.encrypted_content",)
"""What every request asks to be included: reasoning that can be sent back statelessly."""

_MAX_CONTENT_GAP = 64
"""How far past its last content part a streamed `content_index` may point (the parts
between are padded); further is a broken stream."""

_CALL_KEYS = frozenset({"type", "call_id", "name", "arguments", "status"})

_ERROR_TYPES: dict[str, type[ProviderError]] = {
    "rate_limit_exceeded": RateLimitError,
    "server_error": ProviderUnavailableError,
    "vector_store_timeout": ProviderUnavailableError,
}

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


class OpenAIResponsesWire(WireFormat):
    """The Responses wire format: `POST {base_url}/responses` (module notes).

    `store` is sent as is (false by default: nothing is kept at OpenAI, reasoning travels
    in the requests); `include` lists what the answers must include (by default
    `reasoning.encrypted_content`; `()` sends none, for servers that reject it);
    `reasoning` is the body's `reasoning` object (`{"effort": "high", "summary": "auto"}`).
    """

    provider = PROVIDER
    official = OPENAI_API
    endpoint = "/responses"

    def __init__(
        self,
        *,
        store: bool = False,
        include: Sequence[str] = INCLUDE,
        reasoning: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.include = tuple(include)
        self.reasoning = dict(reasoning) if reasoning else None

    def __repr__(self) -> str:
        return (
            f"OpenAIResponsesWire(store={self.store!r}, include={self.include!r}, "
            f"reasoning={self.reasoning!r})"
        )

    def body(self, call: WireCall) -> dict[str, Any]:
        return request_body(
            call.request,
            model=call.model,
            stream=call.stream,
            store=self.store,
            include=self.include,
            reasoning=self.reasoning,
        )

    def parse(self, payload: Any) -> ChatResponse:
        if not isinstance(payload, Mapping):
            raise TypeError("the response is not an object")
        return response_from_payload(payload)

    def stream_reader(self) -> ResponsesStreamReader:
        return ResponsesStreamReader()


class OpenAIResponsesChatModel(HTTPChatModel):
    """A chat model behind `POST {base_url}/responses` (`OpenAIResponsesWire`).

    Keys and base URL as `OpenAIChatModel`: `base_url` defaults to `OPENAI_BASE_URL` from
    the environment, else the official API; the key is `api_key`, else the variable
    `api_key_env` names (by default `OPENAI_API_KEY`, but not when `base_url` is passed
    explicitly, so an OpenAI key never goes to another server by accident), read at the
    first call and required by the official API. `store`, `include` and `reasoning` go
    to the wire format. Reasoning items come back as `ReasoningPart`s and are sent back
    unchanged on the next round, so a reasoning model keeps its reasoning across tool
    calls without OpenAI storing anything.

    Use it as an async context manager, or call `aclose()`, to close the HTTP client it
    creates; an injected `http_client` is left open.
    """

    wire: OpenAIResponsesWire

    def __init__(
        self,
        model: str,
        *,
        connection: Connection | None = None,
        store: bool = False,
        include: Sequence[str] = INCLUDE,
        reasoning: Mapping[str, Any] | None = None,
        **options: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(
            model,
            wire=OpenAIResponsesWire(store=store, include=include, reasoning=reasoning),
            connection=Connection.of(connection, options),
        )

    def supports_output_schema(self, schema: OutputSchema, *, with_tools: bool) -> bool:
        """The Responses API takes a JSON schema as `text.format`, with tools too."""
        return True


# --- request -------------------------------------------------------------------------


def text_format(
    schema: Mapping[str, Any],
    *,
    name: str = "output",
    strict: bool = True,
    description: str | None = None,
) -> dict[str, Any]:
    """The `text` field asking for JSON that matches `schema` (structured output).

    Put it in the body as `"text": text_format(schema)`; `strict` asks the API to
    enforce the schema (which must then close every object and require every property).
    """
    fmt: dict[str, Any] = {
        "type": "json_schema",
        "name": name,
        "schema": plain(schema),
        "strict": strict,
    }
    if description:
        fmt["description"] = description
    return {"format": fmt}


def wire_tool_choice(choice: str) -> str | dict[str, Any]:
    """`auto` / `none` / `required` as they are; a tool's name as a function choice."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "name": choice}


def request_body(
    request: ChatRequest,
    *,
    model: str,
    stream: bool,
    store: bool = False,
    include: Sequence[str] = INCLUDE,
    reasoning: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one Responses request for `request` (module notes)."""
    options = request.options
    if options.stop:
        raise ChainConfigurationError(
            "openai-responses: the Responses API has no stop sequences; "
            "remove ChatOptions.stop or use OpenAIChatModel (Chat Completions)"
        )
    body: dict[str, Any] = {
        "model": model,
        "input": input_items(request.messages),
        "store": store,
    }
    if include:
        body["include"] = list(include)
    if reasoning:
        body["reasoning"] = plain(reasoning)
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.definition.name,
                "description": t.definition.description,
                "parameters": plain(t.definition.parameters),
                "strict": False,
            }
            for t in request.tools
        ]
        if options.tool_choice is not None:
            body["tool_choice"] = wire_tool_choice(options.tool_choice)
        if options.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = options.parallel_tool_calls
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.top_p is not None:
        body["top_p"] = options.top_p
    if options.max_tokens is not None:
        body["max_output_tokens"] = options.max_tokens
    if stream:
        body["stream"] = True
    if options.output_schema is not None:
        chat_format = openai_response_format(options.output_schema)["json_schema"]
        body["text"] = {"format": {"type": "json_schema", **chat_format}}
    body.update(plain(options.extra))
    native = native_compaction(options, PROVIDER)
    if native is not None:
        body["context_management"] = native
    return body


def input_items(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Core messages as Responses input items (module notes)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message))
        elif isinstance(message, ToolMessage):
            content = message.content
            output: str | list[dict[str, Any]] = (
                content if isinstance(content, str) else content_parts(content)
            )
            if isinstance(output, list) and all(p["type"] == "input_text" for p in output):
                output = message.text  # text only: the plain form every server takes
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}
            )
        elif isinstance(message, SystemMessage):
            items.append({"type": "message", "role": "system", "content": message.content})
        else:
            content = message.content
            items.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": content if isinstance(content, str) else content_parts(content),
                }
            )
    return items


def content_parts(parts: Iterable[ContentPart]) -> list[dict[str, Any]]:
    """User or tool content parts as Responses input content (reasoning is left out)."""
    wire: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                wire.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            wire.append({"type": "input_image", "image_url": part.data_url(), "detail": "auto"})
        elif isinstance(part, DocumentPart):
            wire.append(
                {
                    "type": "input_file",
                    "filename": part.name or "document.pdf",
                    "file_data": part.data_url(),
                }
            )
    return wire


def _ours(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    value = (data or {}).get(PROVIDER)
    return value if isinstance(value, Mapping) else {}


def _assistant_items(message: AssistantMessage) -> list[dict[str, Any]]:
    ours = _ours(message.provider_data)
    items: list[dict[str, Any]] = []
    text: list[str] = []
    text_at = -1  # where the message item goes: after the reasoning that preceded its text
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            kept = (part.provider_data or {}).get("item")
            if (
                part.provider == PROVIDER
                and isinstance(kept, Mapping)
                and kept.get("type") == "reasoning"
            ):
                items.append(dict(kept))
        elif isinstance(part, TextPart) and part.text:
            if text_at < 0:
                text_at = len(items)
            text.append(part.text)
    with_reasoning = bool(items)  # only reasoning items so far
    if text:
        message_id = ours.get("message_id")
        item: dict[str, Any] = {"type": "message", "role": "assistant", "content": "".join(text)}
        if with_reasoning and isinstance(message_id, str) and message_id:
            # the output message form: the one that carries an item id
            item = {
                "type": "message",
                "role": "assistant",
                "id": message_id,
                "content": [{"type": "output_text", "text": item["content"], "annotations": []}],
                "status": "completed",
            }
        items.insert(text_at, item)
    for other in ours.get("items") or ():
        if isinstance(other, Mapping):
            items.append(dict(other))
    for call in message.tool_calls:
        wire: dict[str, Any] = {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
        wire.update({k: v for k, v in _ours(call.provider_data).items() if k not in _CALL_KEYS})
        if not with_reasoning:
            wire.pop("id", None)  # an item id without its reasoning item is refused
        items.append(wire)
    return items


# --- response ------------------------------------------------------------------------


def wire_usage(payload: Any) -> Usage:
    """Responses `usage` as core `Usage` (a count that is not a non-negative number is 0)."""
    if not isinstance(payload, Mapping):
        return Usage(requests=1)
    inputs = payload.get("input_tokens_details")
    outputs = payload.get("output_tokens_details")
    return Usage(
        input_tokens=token_count(payload.get("input_tokens")),
        output_tokens=token_count(payload.get("output_tokens")),
        cached_tokens=token_count(
            inputs.get("cached_tokens") if isinstance(inputs, Mapping) else 0
        ),
        requests=1,
        reasoning_tokens=token_count(
            outputs.get("reasoning_tokens") if isinstance(outputs, Mapping) else 0
        ),
    )


def response_error(error: Any, payload: Any = None) -> ProviderError:
    """The `ProviderError` for a Responses error object (`{"code", "message"}`)."""
    code = error.get("code") if isinstance(error, Mapping) else None
    detail = error_message({"error": error}) if isinstance(error, Mapping) else None
    message = f"{PROVIDER}: {detail or 'the response failed'}"
    if isinstance(code, str) and code:
        message += f" ({code})"
    kind = error_type_for_code(code, error.get("type") if isinstance(error, Mapping) else None)
    if kind is None:
        kind = _ERROR_TYPES.get(code, BadRequestError) if isinstance(code, str) else ProviderError
    return kind(
        message, body=json_excerpt(payload if payload is not None else error), provider=PROVIDER
    )


def reasoning_part(item: Mapping[str, Any]) -> ReasoningPart:
    """A reasoning item as a `ReasoningPart` carrying the item unchanged."""
    return ReasoningPart(
        text=reasoning_text(item), provider=PROVIDER, provider_data={"item": dict(item)}
    )


def reasoning_text(item: Mapping[str, Any]) -> str:
    """What a reasoning item lets a UI show: its summary, else its reasoning text."""
    for key in ("summary", "content"):
        pieces = [
            p["text"]
            for p in item.get(key) or ()
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        if pieces:
            return "\n\n".join(pieces)
    return ""


def response_from_payload(payload: Mapping[str, Any]) -> ChatResponse:
    """A `response` object (a call's answer, or the one a stream ends with) as a
    `ChatResponse`; a failed response raises its `ProviderError`."""
    status = payload.get("status")
    if status == "failed" or (payload.get("error") and payload.get("object") != "response"):
        raise response_error(payload.get("error") or {}, payload)
    output = payload.get("output")
    if not isinstance(output, list):
        raise TypeError(f"output is a {type(output).__name__}, not a list")
    message, refused = _output_message(output)
    if status == "incomplete":
        details = payload.get("incomplete_details") or {}
        reason = _INCOMPLETE.get(str(details.get("reason")), "length")
    elif refused:
        reason = "content_filter"
    else:
        reason = "tool_calls" if message.tool_calls else "stop"
    return ChatResponse(
        message=message,
        finish_reason=reason,
        usage=wire_usage(payload.get("usage")),
        id=payload.get("id"),
        model=payload.get("model"),
    )


def _output_message(output: list[Any]) -> tuple[AssistantMessage, bool]:
    """The output items as one assistant message (text, reasoning, calls; the message's
    id and the items the core has no type for kept as provider data), and whether the
    model refused."""
    parts: list[TextPart | ReasoningPart] = []
    calls: list[ToolCall] = []
    others: list[dict[str, Any]] = []
    message_id: str | None = None
    refused = False
    for item in output:
        kind = item["type"]
        if kind == "message":
            message_id = message_id or item.get("id")
            for content in item.get("content") or ():
                if content["type"] == "output_text":
                    parts.append(TextPart(text=_string(content, "text")))
                elif content["type"] == "refusal":
                    refused = True
                    parts.append(TextPart(text=_string(content, "refusal")))
        elif kind == "reasoning":
            parts.append(reasoning_part(item))
        elif kind == "function_call":
            calls.append(function_call(item))
        else:
            others.append(dict(item))
    ours: dict[str, Any] = {}
    if message_id:
        ours["message_id"] = message_id
    if others:
        ours["items"] = others
    message = AssistantMessage(
        content=assistant_content(parts),
        tool_calls=tuple(calls),
        provider_data={PROVIDER: ours} if ours else None,
    )
    return message, refused


def function_call(item: Mapping[str, Any]) -> ToolCall:
    """A `function_call` item as a `ToolCall`; its item `id` (and any other field) is
    kept in `provider_data` and sent back with it."""
    extra = {k: v for k, v in item.items() if k not in _CALL_KEYS}
    arguments = item.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        raise TypeError(f"arguments is a {type(arguments).__name__}, not a string")
    return ToolCall(
        id=item.get("call_id") or new_call_id(),
        name=_string(item, "name"),
        arguments=arguments or "{}",
        provider_data={PROVIDER: extra} if extra else None,
    )


def _string(item: Mapping[str, Any], key: str) -> str:
    value = item[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is a {type(value).__name__}, not a string")
    return value


# --- stream --------------------------------------------------------------------------


class ResponsesStreamReader:
    """What a Responses stream has delivered so far: events in, deltas out.

    Function calls are numbered by their `output_index` (0, 1, ... in the order they
    were added), reasoning items likewise; the final response is read from the
    terminal event (module notes).
    """

    __slots__ = ("_added", "_calls", "_done", "_final", "_items", "_reasoning", "_summary")

    def __init__(self) -> None:
        self._final: Mapping[str, Any] | None = None
        self._done = False
        self._calls: dict[Any, int] = {}  # output_index / item id -> call number
        self._reasoning: dict[Any, int] = {}  # output_index / item id -> reasoning number
        self._summary: dict[int, Any] = {}  # reasoning number -> last part index seen
        self._items: dict[int, dict[str, Any]] = {}  # output_index -> item, as it grows
        self._added: list[int] = []  # output indexes in order

    @property
    def done(self) -> bool:
        """Whether `response.completed` (or `response.incomplete`) arrived."""
        return self._done

    def receive(self, data: str, event: str = "message") -> list[ModelDelta]:
        """Take one event's data; return the deltas it carries."""
        if self._done:
            return []
        payload = event_object(data, event, provider=PROVIDER)
        kind = payload.get("type") or event
        if kind == "error" or event == "error":
            error = payload.get("error") if isinstance(payload.get("error"), Mapping) else payload
            raise response_error(error, payload)
        if kind == "response.failed":
            response = payload.get("response") or {}
            raise response_error(response.get("error") or {}, payload)
        return self._event(kind, payload)

    def _event(self, kind: str, event: Mapping[str, Any]) -> list[ModelDelta]:
        if kind in ("response.completed", "response.incomplete"):
            response = event["response"]
            if not isinstance(response, Mapping):
                raise TypeError("the event's response is not an object")
            self._final = response
            self._done = True
            return []
        if kind == "response.output_item.added":
            return self._item_added(event["output_index"], event["item"])
        if kind == "response.output_item.done":
            self._item(event["output_index"]).clear()
            self._item(event["output_index"]).update(event["item"])
            return []
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = _string(event, "delta")
            self._grow_text(event, "refusal" if kind == "response.refusal.delta" else "text")
            return [TextDelta(delta)] if delta else []
        if kind == "response.function_call_arguments.delta":
            number = self._call_number(event)
            delta = _string(event, "delta")
            item = self._item(event["output_index"])
            item["arguments"] = item.get("arguments", "") + delta
            return [ToolCallDelta(index=number, arguments=delta)] if delta else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._reasoning_delta(event, kind)
        return []  # created, in_progress, *.done, annotations, ...: nothing to show

    def _item(self, output_index: Any) -> dict[str, Any]:
        if not isinstance(output_index, int) or isinstance(output_index, bool):
            raise TypeError(f"output_index is a {type(output_index).__name__}, not an int")
        item = self._items.get(output_index)
        if item is None:
            item = self._items[output_index] = {}
            self._added.append(output_index)
        return item

    def _item_added(self, output_index: Any, item: Any) -> list[ModelDelta]:
        if not isinstance(item, Mapping):
            raise TypeError("the added item is not an object")
        stored = self._item(output_index)
        stored.update(item)
        if item.get("type") != "function_call":
            return []
        number = self._calls.get(output_index)
        if number is None:
            number = self._calls[output_index] = len(set(self._calls.values()))
        if isinstance(item.get("id"), str):
            self._calls[item["id"]] = number
        extra = {k: v for k, v in item.items() if k not in _CALL_KEYS}
        arguments = item.get("arguments") or ""
        if not isinstance(arguments, str):
            raise TypeError(f"arguments is a {type(arguments).__name__}, not a string")
        stored["arguments"] = arguments
        return [
            ToolCallDelta(
                index=number,
                id=item.get("call_id") or None,
                name=item.get("name") or None,
                arguments=arguments,
                provider_data={PROVIDER: extra} if extra else None,
            )
        ]

    def _call_number(self, event: Mapping[str, Any]) -> int:
        for key in (event.get("output_index"), event.get("item_id")):
            if key is not None and key in self._calls:
                return self._calls[key]
        raise ValueError("function-call arguments for a call that was never added")

    def _grow_text(self, event: Mapping[str, Any], field: str) -> None:
        item = self._item(event["output_index"])
        item.setdefault("type", "message")
        content = item.setdefault("content", [])
        index = event.get("content_index", 0)
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"content_index is a {type(index).__name__}, not an int")
        if not 0 <= index < len(content) + _MAX_CONTENT_GAP:
            # the parts before it are padded: a number sent by the server must not size that
            raise ValueError(f"content_index {index} is out of range")
        while len(content) <= index:
            content.append({"type": "output_text" if field == "text" else "refusal", field: ""})
        part = content[index]
        part[field] = part.get(field, "") + event["delta"]

    def _reasoning_delta(self, event: Mapping[str, Any], kind: str) -> list[ModelDelta]:
        key = event.get("output_index")
        number = self._reasoning.get(key)
        if number is None:
            number = self._reasoning[key] = len(self._reasoning)
        delta = _string(event, "delta")
        part = (kind, event.get("summary_index", event.get("content_index", 0)))
        previous = self._summary.get(number)
        self._summary[number] = part
        deltas: list[ModelDelta] = []
        if previous is not None and previous != part:
            deltas.append(ReasoningDelta("\n\n", number))  # a new summary part
        if delta:
            deltas.append(ReasoningDelta(delta, number))
        return deltas

    def response(self) -> ChatResponse:
        """The final response; raises if the stream ended before its terminal event."""
        if self._final is None:
            raise StreamInterruptedError(f"{PROVIDER}: the stream ended before response.completed")
        final = dict(self._final)
        if not final.get("output"):
            final["output"] = [self._items[i] for i in sorted(self._added) if self._items[i]]
        try:
            return response_from_payload(final)
        except ProviderError:
            raise
        except PARSE_ERRORS as exc:
            raise StreamInterruptedError(
                f"{PROVIDER}: the streamed response is invalid ({type(exc).__name__}: {exc})"
            ) from exc


__all__ = [
    "INCLUDE",
    "PROVIDER",
    "OpenAIResponsesChatModel",
    "OpenAIResponsesWire",
    "ResponsesStreamReader",
    "content_parts",
    "function_call",
    "input_items",
    "reasoning_part",
    "reasoning_text",
    "request_body",
    "response_error",
    "response_from_payload",
    "text_format",
    "wire_tool_choice",
    "wire_usage",
]
