"""`OpenAIChatModel`: the Chat Completions API, from OpenAI or any compatible server.

Wire notes:
- An assistant message with tool calls and no text is sent with `"content": ""`, never
  `null` (llama.cpp's server rejects `null`).
- Tool results are `role: tool` messages with `tool_call_id`. Chat Completions has no
  error flag, so a failed tool's message is sent as is: its text says it failed.
- `tool_choice` and `parallel_tool_calls` are only sent with tools (the API rejects them
  otherwise); `ChatOptions.extra` is merged into the body last, so it can override.
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
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import httpx

from ..core.assembly import StreamAssembler
from ..core.errors import StreamInterruptedError
from ..core.events import TextDelta, ToolCallDelta
from ..core.messages import AssistantMessage, Message, ToolCall, ToolMessage, new_call_id
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.usage import Usage
from .errors import ProviderError
from .http import (
    PARSE_ERRORS,
    RetryPolicy,
    error_for_status,
    error_message,
    json_dumps,
    json_excerpt,
    plain,
    token_count,
)
from .http_model import HTTPChatModel

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""The official API's base URL."""

_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "eos": "stop",
    "eos_token": "stop",
}


class OpenAIChatModel(HTTPChatModel):
    """A chat model behind `POST {base_url}/chat/completions`.

    `base_url` defaults to `OPENAI_BASE_URL` from the environment, else the official
    API. The API key is `api_key`, else the variable named by `api_key_env`, read at the
    first call. `api_key_env` defaults to `OPENAI_API_KEY`, except when `base_url` is
    passed explicitly: then no variable is read unless named, so an OpenAI key is never
    sent to another server by accident. A key is required by the official API and when
    `api_key_env` is named; other servers (vLLM, llama.cpp, Ollama) get no key if none is set.

    `max_tokens_param` is the body field for `ChatOptions.max_tokens`: by default
    `max_completion_tokens` for the official API (its reasoning models reject the other)
    and `max_tokens` for other servers. `stream_usage=False` leaves out
    `stream_options`, for servers that reject it. `headers` are added to every request.

    Use it as an async context manager, or call `aclose()`, to close the HTTP client it
    creates; an injected `http_client` is left open.
    """

    provider_name = "openai"
    endpoint = "/chat/completions"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_key_env: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        max_retries: int = 2,
        retry_policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = None,
        stream_usage: bool = True,
    ) -> None:
        key_required = api_key_env is not None
        if base_url is None:
            base_url = os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
            api_key_env = api_key_env or "OPENAI_API_KEY"
        official = base_url.rstrip("/") == OPENAI_BASE_URL
        if official:
            api_key_env = api_key_env or "OPENAI_API_KEY"
            key_required = True
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            key_required=key_required,
            http_client=http_client,
            timeout=timeout,
            max_retries=max_retries,
            retry_policy=retry_policy,
            headers=headers,
        )
        self._max_tokens_param = max_tokens_param or (
            "max_completion_tokens" if official else "max_tokens"
        )
        self._stream_usage = stream_usage

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _parse(self, payload: Any) -> ChatResponse:
        return completion_response(payload)

    def _stream_state(self) -> _StreamState:
        return _StreamState()

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        options = request.options
        body: dict[str, Any] = {
            "model": options.model or self.model_name,
            "messages": wire_messages(request.messages),
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
            if options.tool_choice is not None:
                body["tool_choice"] = wire_tool_choice(options.tool_choice)
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.max_tokens is not None:
            body[self._max_tokens_param] = options.max_tokens
        if options.stop:
            body["stop"] = list(options.stop)
        if stream:
            body["stream"] = True
            if self._stream_usage:
                body["stream_options"] = {"include_usage": True}
        body.update(plain(options.extra))
        return body


def wire_tool_choice(choice: str) -> str | dict[str, Any]:
    """`auto` / `none` / `required` as they are; a tool's name as a named function choice."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def wire_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Core messages as Chat Completions messages."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            item: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
            if message.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ]
            wire.append(item)
        elif isinstance(message, ToolMessage):
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        else:
            wire.append({"role": message.role, "content": message.content})
    return wire


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
    """Chat Completions `usage` as core `Usage` (cached tokens are part of the input).

    A count that is not a non-negative number (a string, a huge float) counts as 0."""
    if not isinstance(payload, Mapping):
        return Usage(requests=1)
    details = payload.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=token_count(payload.get("prompt_tokens")),
        output_tokens=token_count(payload.get("completion_tokens")),
        cached_tokens=token_count(cached),
        requests=1,
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
    calls = tuple(
        ToolCall(
            id=call.get("id") or new_call_id(),
            name=call["function"]["name"],
            arguments=wire_arguments(call["function"]) or "{}",
        )
        for call in wire.get("tool_calls") or ()
    )
    message = AssistantMessage(content=content or None, tool_calls=calls)
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
    return ProviderError(message, body=body, provider="openai")


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
        self._named: set[int] = set()  # call numbers that got a name
        self._row: list[int] = []  # the calls of the last chunk with tool calls, in order
        self._calls = 0

    def receive(self, data: str, event: str = "message") -> list[TextDelta | ToolCallDelta]:
        """Take one event's data; return the deltas it carries."""
        if self.done:
            return []
        if event == "error":
            raise _event_error(data)
        if data.strip() == "[DONE]":
            self.done = True
            return []
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise StreamInterruptedError(f"openai: malformed JSON in the stream: {exc}") from exc
        if not isinstance(chunk, dict):
            raise StreamInterruptedError("openai: a stream event is not a JSON object")
        if _is_error(chunk):
            raise _payload_error(chunk)
        try:
            return self._chunk(chunk)
        except PARSE_ERRORS as exc:
            raise StreamInterruptedError(
                f"openai: unexpected stream chunk ({type(exc).__name__}: {exc})"
            ) from exc

    def _chunk(self, chunk: Mapping[str, Any]) -> list[TextDelta | ToolCallDelta]:
        self.id = self.id or chunk.get("id")
        self.model = self.model or chunk.get("model")
        if chunk.get("usage"):
            self.usage = wire_usage(chunk["usage"])
        deltas: list[TextDelta | ToolCallDelta] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text is None and isinstance(delta.get("refusal"), str):
                text = delta["refusal"]
            if text is not None and not isinstance(text, str):
                raise TypeError(f"content is a {type(text).__name__}, not a string")
            if text:
                deltas.append(TextDelta(text))
            deltas.extend(self._tool_deltas(delta.get("tool_calls") or ()))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        for item in deltas:
            self.assembler.add(item)
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
                    index=number, id=call_id, name=name, arguments=wire_arguments(function)
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
            self._named.add(number)
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
